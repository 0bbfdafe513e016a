"""The hacking-onset alarm's cost per training step, in one process (run it under the CPU lock).

Trains the same warm-started tiny policy on the same prompts for `--steps` steps with the alarm off,
on (signals and CUSUM every step), and on with the truncation probe (`--probe-samples` completions
cut and finished per step), the three interleaved `--repeats` times (step times drift on a shared
machine). Prints each variant's median step time and its ratio to the alarm off. Then the parts
timed alone on one recorded step: the alarm's own work (signals from the records plus the CUSUM
update) and one probe call with every record paid (so it always probes `--probe-samples`).

    flock /tmp/cpu.lock python benchmarks/bench_alarm.py [--steps 8] [--repeats 2] [--probe-samples 4] [--workdir DIR]
    python benchmarks/bench_alarm.py --records RUN/generations/step-1.jsonl   # each signal's and detector's cost alone
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from hackable_rl.config.loading import load_config

REPO = Path(__file__).resolve().parents[1]


def _step_times(config) -> tuple[list[float], Path]:
    from bench_train_overhead import StepTimer

    from hackable_rl.training.run import run_training

    timer = StepTimer()
    result = run_training(config, overwrite=True, extra_callbacks=[timer])
    return timer.times, result.run_dir


def _alarm_work(run_dir: Path, repeats: int) -> float:
    """Seconds per step of the alarm's own work on the run's first recorded step (no probe)."""
    from hackable_rl.alarm.onset_alarm import OnsetAlarm
    from hackable_rl.alarm.signals import step_signals
    from hackable_rl.core.jsonl import read_jsonl

    records = read_jsonl(sorted((run_dir / "generations").glob("step-*.jsonl"))[0])
    alarm = OnsetAlarm(load_config(REPO / "params.yaml").alarm)
    started = time.perf_counter()
    for step in range(1, repeats + 1):
        alarm.update(step_signals(step, records, 1.0))
    return (time.perf_counter() - started) / repeats


def _probe_work(config, run_dir: Path, repeats: int) -> float:
    """Seconds per call of the truncation probe on the run's first recorded step, every record paid."""
    from hackable_rl.alarm.truncation_probe import TruncationProbe
    from hackable_rl.core.jsonl import read_jsonl
    from hackable_rl.models.loading import load_policy
    from hackable_rl.reward.pipeline import build_reward_pipeline

    model, tokenizer = load_policy(config)
    rows = [row | {"reward": 1.0} for row in read_jsonl(sorted((run_dir / "generations").glob("step-*.jsonl"))[0])]
    probe = TruncationProbe(config.alarm.probe, tokenizer, build_reward_pipeline(config, tokenizer=tokenizer), {},
                            config.rewards.think_open, config.rewards.think_close)
    probe(model, rows)  # the first call pays one-off costs
    started = time.perf_counter()
    for _ in range(repeats):
        probe(model, rows)
    return (time.perf_counter() - started) / repeats


def signal_costs(records_path: Path, repeats: int) -> None:
    """Prints each signal's cost on one recorded step, and each detector's per-step update, alone."""
    from hackable_rl.alarm.onset_alarm import SignalCusum
    from hackable_rl.alarm.window_detector import WindowDetector
    from hackable_rl.config.experiment import AlarmConfig
    from hackable_rl.core.jsonl import read_jsonl
    from hackable_rl.core.stats import mean
    from hackable_rl.training import signals

    records = read_jsonl(records_path)
    groups = signals._groups(records)  # the grouping every group signal shares, timed on its own below
    parts = {
        "groups (shared by the group signals)": lambda: signals._groups(records),
        "reward": lambda: mean(record.get("reward") for record in records),
        "zero_advantage_share": lambda: signals.zero_advantage_share(groups),
        "modal_answer_share": lambda: signals.modal_answer_share(groups),
        "answer_entropy": lambda: signals.answer_entropy(groups),
        "pay_rate/<member> and pay_spread": lambda: signals.pay_spread(signals.member_pay_rates(records)),
        "disagreement": lambda: mean(record.get("U") for record in records),
        "mean_length": lambda: mean(record.get("completion_tokens") for record in records),
        "unparsable_share": lambda: mean(float(signals._answer(record) is None) for record in records),
        "all signals (step_signals)": lambda: signals.step_signals(1, records),
    }
    print(f"{len(records)} records of {records_path}; microseconds per step, {repeats} repeats each")
    for name, work in parts.items():
        started = time.perf_counter()
        for _ in range(repeats):
            work()
        print(f"  {name:<40} {(time.perf_counter() - started) / repeats * 1e6:9.1f}")
    config = AlarmConfig()
    for name, detector in (("CUSUM update (one signal)", SignalCusum("reward", config)),
                           ("windowed test update (one signal, window 10)", WindowDetector("reward", 10, 0.02, "up", 4.0))):
        started = time.perf_counter()
        for step in range(1, repeats + 1):
            detector.update(step, 0.3 + 0.01 * (step % 7))
        print(f"  {name:<40} {(time.perf_counter() - started) / repeats * 1e6:9.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=Path, default=None,
                        help="Only time each signal and detector on this recorded step (a run's generations/step-N.jsonl).")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--probe-samples", type=int, default=4)
    parser.add_argument("--workdir", type=Path, default=None, help="A folder with prepared data and a warm start.")
    options = parser.parse_args()
    if options.records is not None:
        signal_costs(options.records, 2000)
        return
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="bench-alarm-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)
    common = [f"trainer.max_steps={options.steps}", f"trainer.save_steps={options.steps}", "trainer.permanent_steps=[]",
              "warmstart.steps=60", "warmstart.eval_size=20", "tracking.enabled=false", "torch_threads=1"]
    variants = {"alarm off": ["alarm.enabled=false"], "alarm on": ["alarm.enabled=true"],
                f"alarm + probe ({options.probe_samples}/step)": ["alarm.enabled=true",
                                                                 f"alarm.probe.samples={options.probe_samples}"]}
    config = load_config(REPO / "params.yaml", common)
    if not (workdir / "cache" / "models" / f"tiny-{config.data.name}").exists():
        from hackable_rl.data.prepare import prepare_dataset
        from hackable_rl.warmstart import run_warmstart

        prepare_dataset(config)
        run_warmstart(config, workdir / "metrics" / "warmstart.json")
    times: dict[str, list[float]] = {label: [] for label in variants}
    run_dir = None
    for _ in range(options.repeats):
        for label, extra in variants.items():
            steps, run_dir = _step_times(load_config(REPO / "params.yaml", [*common, *extra]))
            times[label] += steps[1:]  # the first step of a run pays one-off costs
    medians = {label: statistics.median(values) for label, values in times.items()}
    print(f"{options.repeats} runs of {options.steps} steps per variant, interleaved (first step of each excluded)")
    for label, seconds in medians.items():
        print(f"{label:<28} median step {seconds:.3f} s, ratio to alarm off {seconds / medians['alarm off']:.3f}")
    work = _alarm_work(run_dir, 200)
    print(f"alarm work alone (signals + CUSUM, one step's records): {work * 1e3:.2f} ms per step")
    probe_config = load_config(REPO / "params.yaml", [*common, f"alarm.probe.samples={options.probe_samples}"])
    probe = _probe_work(probe_config, run_dir, 10)
    print(f"probe alone ({options.probe_samples} completions cut, finished and rescored): {probe * 1e3:.1f} ms per step, "
          f"{probe / medians['alarm off']:.3f} of a step without the alarm")


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_train_overhead's StepTimer
    main()
