"""The hacking alarm, one job in one package: does a judge-free signal warn before the judge sees hacking?

Its floors, bottom first (each module imports only from its own floor or one below;
tests/test_architecture.py checks them):

1. `signals` (what one training step's records say without a judge: signals.csv) and
   `window_detector` (the judge's windowed test applied to one signal);
2. `onset_alarm`: the self-starting CUSUM on each standardised signal and the alarm that fires on them,
   live (training's callback, `trl_parts`) or over a finished run's signals;
3. `audit` (the audited alarm: k judged completions a step), `truncation_probe` (does a paid answer
   survive without its reasoning) and `onset` (after a run: the judge's onset and each signal's lead);
4. `bench` (a nested unit, above `study/`): `hackable-rl alarm-bench` replaying committed studies' runs
   to choose a rule on some replicates and score it on the others (`bench.replay`; `--audit`:
   `bench.audit`).

The package itself imports nothing. The alarm's settings are `config.experiment.AlarmConfig`, beside
every other typed section; its command is `cli/alarm.py`, beside every other command.
"""
