"""The pilots' learning curves and the declared rule applied to them (`hackable-rl pilots`).

Reads a pilots folder as dvc.yaml writes it (`base-s<seed>/` and `<setting>-s<seed>/`, each with
condition.json; a pilot's `checkpoints.csv` and `checkpoints/step-<N>/prompts.jsonl`) and, per setting,
seed and evaluated checkpoint: validation pass@1 under both judges and greedy accuracy, each as a gain
over the same replicate's warm start paired by prompt with its prompt-level standard error; the
training-time judge correctness and token entropy over the ten steps up to the checkpoint; and the
training cost (steps x the pilot's measured seconds per step). Then the rule of pilots.yaml, applied to
the pilot seeds, and the chosen setting on the confirm seeds. No torch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from hackable_rl.config.pilots import PilotsFile
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_json
from hackable_rl.evaluation.prompt_results import PROMPTS_FILE, PromptResult, read_prompt_results
from hackable_rl.evaluation.stage.checkpoint_curve import CHECKPOINTS_FILE, step_folder

__all__ = ["CurvePoint", "Choice", "Confirmation", "choose", "confirmations", "curve_points", "write_pilot_summary"]

WINDOW_STEPS = 10
"""Training steps up to a checkpoint whose judge correctness and entropy stand beside it."""


@dataclass(frozen=True)
class CurvePoint:
    """One pilot checkpoint against its replicate's warm start (validation, paired by prompt)."""

    setting: str
    seed: int
    step: int
    pass_at_1: float
    gain: float
    gain_se: float
    transfer_gain: float | None
    greedy: float | None
    greedy_change: float | None
    greedy_se: float | None
    train_reward: float | None
    """The training reward over the WINDOW_STEPS steps up to `step` (signals.csv; against the clean member,
    its verdict: the judge's strict reading of the same completions)."""
    train_correctness: float | None
    """The judge's correctness of the training samples over those steps (curve.csv, written where a study
    names a flaw; None otherwise)."""
    entropy: float | None
    """Mean token entropy of the training samples over those steps."""
    seconds_per_step: float
    cost_seconds: float
    """step x seconds_per_step: the training this checkpoint cost (its evaluation not counted)."""
    prompts: int

    def qualifies(self, threshold: float) -> bool:
        """Gain at least `threshold`, greedy accuracy not below the warm start's by more than its SE."""
        guard = self.greedy_change is None or self.greedy_se is None or self.greedy_change >= -self.greedy_se
        return self.gain >= threshold and guard


@dataclass(frozen=True)
class Choice:
    """What the rule chose from the pilot seeds' checkpoints, and under which threshold."""

    point: CurvePoint | None
    threshold: float | None
    """target_gain, or fallback_gain when no checkpoint reached the target; None: nothing chosen."""
    rung: str = "none"
    """`target`, `fallback`, or `none`."""

    def describe(self) -> str:
        if self.point is None:
            return "no setting chosen: no checkpoint reached the fallback gain with the greedy guard"
        p = self.point
        return (f"chosen: {p.setting} at {p.step} steps (gain {p.gain:+.3f} ± {p.gain_se:.3f}, greedy "
                f"{_signed(p.greedy_change)}, cost {p.cost_seconds / 60:.0f} min of training) under the "
                f"{self.rung} threshold {self.threshold:+.2f}")


@dataclass(frozen=True)
class Confirmation:
    """The chosen (setting, steps) on one confirm seed, against the threshold it was chosen under."""

    seed: int
    setting: str
    step: int
    threshold: float
    point: CurvePoint | None
    """The chosen setting's checkpoint at the chosen steps on this seed; None: not run (or not evaluated
    at that step)."""

    @property
    def confirmed(self) -> bool | None:
        """The rule's words: the same threshold with the same guard; None until the seed has run."""
        return None if self.point is None else self.point.qualifies(self.threshold)

    def describe(self) -> str:
        name = f"{self.setting}-s{self.seed}"
        if self.point is None:
            return f"confirmation on s{self.seed}: waiting for {name} (step {self.step})"
        p = self.point
        verdict = "confirmed" if self.confirmed else "NOT confirmed"
        guard = "" if p.greedy_se is None else f" ± {p.greedy_se:.3f}"
        return (f"confirmation on s{self.seed}: {verdict}: {self.setting} at {self.step} steps gains "
                f"{p.gain:+.3f} ± {p.gain_se:.3f} (greedy {_signed(p.greedy_change)}{guard}) against the "
                f"threshold {self.threshold:+.2f} with the greedy guard")


def confirmations(choice: Choice, confirm: list[CurvePoint], seeds: list[int]) -> list[Confirmation]:
    """The rule's last step: the chosen checkpoint's setting and steps on each confirm seed, judged by the
    threshold it was chosen under. Empty while nothing is chosen."""
    if choice.point is None or choice.threshold is None:
        return []
    chosen = choice.point
    at_step = {p.seed: p for p in confirm if p.setting == chosen.setting and p.step == chosen.step}
    return [Confirmation(seed, chosen.setting, chosen.step, choice.threshold, at_step.get(seed)) for seed in seeds]


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


def _paired(trained: list[PromptResult], base: list[PromptResult], metric: str) -> tuple[float, float] | None:
    """Mean and standard error of the per-prompt difference trained - base over the prompts both define."""
    by_id = {row.prompt_id: row.value(metric) for row in base}
    diffs = [value - by_id[row.prompt_id] for row in trained
             if (value := row.value(metric)) is not None and by_id.get(row.prompt_id) is not None]
    if len(diffs) < 2:
        return None
    mean = sum(diffs) / len(diffs)
    variance = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)
    return mean, math.sqrt(variance / len(diffs))


def _window(folder: Path, file: str, column: str, step: int) -> float | None:
    path = folder / file
    if not path.is_file():
        return None
    table = pd.read_csv(path)
    if column not in table:
        return None
    values = table[(table["step"] > step - WINDOW_STEPS) & (table["step"] <= step)][column].dropna()
    return float(values.mean()) if len(values) else None


def _ok_condition(folder: Path) -> dict:
    path = folder / "condition.json"
    if not path.is_file():
        raise UserError(f"{path}: missing; run the pilot first (dvc.yaml's pilot stages)")
    record = read_json(path)
    if record.get("status") != "ok":
        raise UserError(f"{path}: status {record.get('status')!r} ({record.get('error')}); rerun the pilot")
    return record


def curve_points(pilots: PilotsFile, folder: Path, setting: str, seed: int) -> list[CurvePoint]:
    """Every evaluated checkpoint of one pilot, against its replicate's warm start."""
    pilot = folder / f"{setting}-s{seed}"
    record = _ok_condition(pilot)
    _ok_condition(folder / f"base-s{seed}")
    base = read_prompt_results(folder / f"base-s{seed}" / PROMPTS_FILE)
    if not (pilot / CHECKPOINTS_FILE).is_file():
        raise UserError(f"{pilot / CHECKPOINTS_FILE}: missing; the pilot ran without evaluation.checkpoint_steps")
    steps = record["train"]["step"]
    per_step = record["train"]["seconds"] / steps
    points = []
    for step in pd.read_csv(pilot / CHECKPOINTS_FILE)["step"]:
        trained = read_prompt_results(step_folder(pilot, int(step)) / PROMPTS_FILE)
        gain = _paired(trained, base, "pass_at_1")
        if gain is None:
            raise UserError(f"{step_folder(pilot, int(step))}: fewer than two prompts shared with base-s{seed}")
        transfer = _paired(trained, base, "pass_at_1_transfer")
        greedy = _paired(trained, base, "greedy_accuracy")
        greedy_values = [v for row in trained if (v := row.value("greedy_accuracy")) is not None]
        judged = [(row.correct, row.n) for row in trained]
        points.append(CurvePoint(
            setting, seed, int(step), sum(c for c, _ in judged) / max(1, sum(n for _, n in judged)), gain[0], gain[1],
            transfer[0] if transfer else None,
            sum(greedy_values) / len(greedy_values) if greedy_values else None,
            greedy[0] if greedy else None, greedy[1] if greedy else None,
            _window(pilot, "signals.csv", "reward", int(step)), _window(pilot, "curve.csv", "correctness", int(step)),
            _window(pilot, "signals.csv", "entropy", int(step)),
            per_step, int(step) * per_step, len(trained)))
    return points


def choose(points: list[CurvePoint], target: float, fallback: float) -> Choice:
    """The declared rule: the cheapest checkpoint reaching `target` with the greedy guard (ties: the larger
    gain); else the largest gain among those reaching `fallback` with the guard; else none."""
    reaching = [p for p in points if p.qualifies(target)]
    if reaching:
        return Choice(min(reaching, key=lambda p: (p.cost_seconds, -p.gain)), target, "target")
    fallen_back = [p for p in points if p.qualifies(fallback)]
    if fallen_back:
        return Choice(max(fallen_back, key=lambda p: (p.gain, -p.cost_seconds)), fallback, "fallback")
    return Choice(None, None)


def write_pilot_summary(pilots: PilotsFile, folder: Path, out: Path) -> tuple[list[CurvePoint], Choice, list[CurvePoint]]:
    """summary.csv (every checkpoint of every pilot in `folder` that has run) and curves.png in `out`; the
    rule's choice over the pilot seeds (none until every pilot has run); and the chosen setting's points on
    the confirm seeds that have run."""
    points = [point for setting in pilots.grid for seed in pilots.pilot_seeds
              if (folder / f"{setting}-s{seed}" / "condition.json").is_file()
              for point in curve_points(pilots, folder, setting, seed)]
    missing = [f"{s}-s{seed}" for s in pilots.grid for seed in pilots.pilot_seeds
               if not (folder / f"{s}-s{seed}" / "condition.json").is_file()]
    choice = choose(points, pilots.target_gain, pilots.fallback_gain) if not missing else Choice(None, None)
    confirm = []
    chosen = pilots.chosen or (choice.point.setting if choice.point else None)
    for seed in pilots.confirm_seeds if chosen else []:
        if (folder / f"{chosen}-s{seed}" / "condition.json").is_file():
            confirm += curve_points(pilots, folder, chosen, seed)
    rows = [asdict(point) for point in [*points, *confirm]]
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=[field for field in CurvePoint.__dataclass_fields__]).to_csv(
        out / "summary.csv", index=False, float_format="%.4f")
    if rows:
        _plot(pd.DataFrame(rows), out / "curves.png")
    return points, choice if not missing else Choice(None, None), confirm


def _plot(table: pd.DataFrame, path: Path) -> Path:
    # deferred: matplotlib loads only where a figure is drawn
    import matplotlib

    matplotlib.use("Agg")
    # deferred: matplotlib loads only where a figure is drawn
    import matplotlib.pyplot as plt

    panels = (("gain", "validation pass@1 gain over the warm start"), ("greedy_change", "greedy accuracy change"),
              ("train_reward", f"training reward (last {WINDOW_STEPS} steps)"),
              ("entropy", "training token entropy"))
    figure, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6))
    for (setting, seed), rows in table.groupby(["setting", "seed"], sort=False):
        for axis, (column, title) in zip(axes, panels, strict=True):
            axis.plot(rows["step"], rows[column], marker="o", label=f"{setting} s{seed}")
            axis.set_title(title, fontsize=9)
            axis.set_xlabel("GRPO step")
    for axis in axes[:2]:
        axis.axhline(0, color="#999999", linewidth=0.8)
    axes[0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
