"""`hackable-rl alarm-bench`: the alarm replayed over committed studies' trained runs (docs/usage.md).

`runs` reads each study's distinct runs (its study file's alarm split and hacking definition, the runs'
signals.csv and onsets); `rules` holds the detectors and their calibration on simulated stationary runs;
`replay` chooses a rule on the choice replicates and scores it once on the held-out ones (alarm_bench.json,
`markdown` writes alarm_bench.md); `audit`, `audit_scores` and `audit_markdown` do the same for the
audited alarm (audit_bench.*). Above `study/` (it reads the study records) and below `cli/`.
"""
