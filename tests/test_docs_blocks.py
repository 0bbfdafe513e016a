"""The docs' generated blocks (`report.docs_blocks`, `hackable-rl docs-blocks`): every block in README.md and
docs/*.md renders from the committed files exactly as it stands, a bad block is one line naming the file
and the key, and no result number is typed by hand outside a block where the docs report a committed
study (the lint below; the rule: docs/results.md, "How the numbers here are made")."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hackable_rl.cli.app import app
from hackable_rl.core.errors import UserError
from hackable_rl.report.docs_blocks import END, OPEN, check_docs, docs_files, render_text, stale_blocks
from hackable_rl.report.docs_values import Sources, format_value, reading

ROOT = Path(__file__).resolve().parents[1]


def test_every_generated_block_renders_from_the_committed_files_as_it_stands() -> None:
    files = docs_files(ROOT)
    assert {"README.md", "docs/results.md", "pipelines/smollm2_learning/README.md"} <= {
        path.relative_to(ROOT).as_posix() for path in files}
    assert check_docs(files, ROOT) == []


# ---- the syntax, on literal files ---------------------------------------------------------------------------

def _project(tmp_path: Path, doc: str) -> Path:
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics/outcomes.json").write_text(json.dumps([
        {"name": "gain", "cell": "k1", "a": "baseline", "b": "base", "metric": "pass_at_1", "mean_a": 0.6,
         "mean_b": 0.5, "diff": 0.1, "ci_low": 0.05, "ci_high": 0.15, "met": True, "per_replicate": [0.1, 0.08, 0.12],
         "p_value": 0.004, "p_holm": 0.012, "met_after_holm": True, "secondary": False, "mde": 0.05},
        {"name": "gain", "cell": "k2", "a": "baseline", "b": "base", "metric": "pass_at_1", "mean_a": 0.5,
         "mean_b": 0.5, "diff": 0.004, "ci_low": -0.02, "ci_high": 0.028, "met": False,
         "per_replicate": [0.0, 0.01, 0.002], "p_value": 0.5, "p_holm": 0.5, "met_after_holm": False,
         "secondary": False, "mde": 0.03}]))
    (tmp_path / "metrics/summary.csv").write_text("cell,method,seed,pass_at_1\nk1,baseline,0,0.5\nk1,baseline,1,0.7\n")
    (tmp_path / "README.md").write_text(doc)
    return tmp_path


def _render(root: Path) -> str:
    return render_text((root / "README.md").read_text(), "README.md", Sources(root))


def test_a_fragment_renders_inside_its_sentence_and_a_block_on_lines_of_its_own(tmp_path: Path) -> None:
    root = _project(tmp_path, (
        "Gain <!-- generated: comparison metrics/outcomes.json [name=gain,cell=k1] -->old<!-- end generated --> here;\n"
        "mean <!-- generated: value metrics/summary.csv [cell=k1,method=baseline]*.pass_at_1 mean .2f -->"
        "<!-- end generated -->.\n"
        "<!-- generated: text metrics/outcomes.json at=[name=gain,cell=k2]\n"
        "k2: {:ci} ({:reading}); per replicate {per_replicate:+.3f}; \\boxed{{}}\n-->\nstale\n<!-- end generated -->\n"))
    assert _render(root) == (
        "Gain <!-- generated: comparison metrics/outcomes.json [name=gain,cell=k1] -->+0.100 [+0.050, +0.150], "
        "Holm p 0.012<!-- end generated --> here;\n"
        "mean <!-- generated: value metrics/summary.csv [cell=k1,method=baseline]*.pass_at_1 mean .2f -->0.60"
        "<!-- end generated -->.\n"
        "<!-- generated: text metrics/outcomes.json at=[name=gain,cell=k2]\n"
        "k2: {:ci} ({:reading}); per replicate {per_replicate:+.3f}; \\boxed{{}}\n-->\n"
        "k2: +0.004 [-0.020, +0.028] (no difference detected (could have seen ±0.030)); per replicate "
        "+0.000, +0.010, +0.002; \\boxed{}\n<!-- end generated -->\n")


def test_a_table_repeats_its_placeholder_lines_once_per_row_and_outcomes_give_the_words(tmp_path: Path) -> None:
    root = _project(tmp_path, (
        "<!-- generated: table metrics/outcomes.json rows=[name=gain]*\n| cell | gain |\n| --- | --- |\n"
        "| {cell} | {diff:+.3f} |\n-->\n<!-- end generated -->\n"
        "<!-- generated: outcomes metrics/outcomes.json -->\n<!-- end generated -->\n"))
    text = _render(root)
    assert "| cell | gain |\n| --- | --- |\n| k1 | +0.100 |\n| k2 | +0.004 |\n<!-- end generated -->" in text
    assert "| gain (pass_at_1) | k1 | baseline 0.600 | base 0.500 | +0.100 [+0.050, +0.150] | +0.100, +0.080, +0.120 | " \
           "0.012 | detected after Holm | 0.050 |" in text
    assert stale_blocks(text, "README.md", Sources(root)) == []


@pytest.mark.parametrize(("block", "problem"), [
    ("<!-- generated: value metrics/nowhere.json a -->x<!-- end generated -->",
     "README.md:1: value: metrics/nowhere.json: no such file"),
    ("<!-- generated: value metrics/outcomes.json [name=gain,cell=k9].diff -->x<!-- end generated -->",
     "README.md:1: value: metrics/outcomes.json: no key [name=gain,cell=k9] (0 entries match) "
     "(path '[name=gain,cell=k9].diff')"),
    ("<!-- generated: value metrics/outcomes.json [name=gain].diff -->x<!-- end generated -->",
     "README.md:1: value: metrics/outcomes.json: no key [name=gain] (2 entries match; add a field, or * for all) "
     "(path '[name=gain].diff')"),
    ("<!-- generated: value metrics/outcomes.json [name=gain,cell=k1].dif -->x<!-- end generated -->",
     "README.md:1: value: metrics/outcomes.json: no key dif (path '[name=gain,cell=k1].dif')"),
    ("<!-- generated: chart metrics/outcomes.json -->x<!-- end generated -->",
     "README.md:1: unknown block kind 'chart' (one of value, comparison, text, table, outcomes)"),
    ("text\n<!-- generated: value metrics/outcomes.json [0].diff -->x", "README.md:2: a generated block without its"),
    ("<!-- generated: value metrics/outcomes.json [0].diff -->x<!-- generated: value metrics/outcomes.json [0].diff -->"
     "<!-- end generated -->", "README.md:1: a generated block opens inside another"),
    ("<!-- generated: value metrics/outcomes.json [0].name mean -->x<!-- end generated -->",
     "README.md:1: value: '[0].name': format 'mean': mean needs a list"),
])
def test_a_bad_block_is_one_line_naming_the_doc_the_file_and_the_key(tmp_path: Path, block: str, problem: str) -> None:
    root = _project(tmp_path, block + "\n")
    with pytest.raises(UserError) as caught:
        _render(root)
    assert len(caught.value.problems) == 1 and caught.value.problems[0].startswith(problem), caught.value.problems


def test_the_command_rewrites_stale_blocks_in_place_and_check_exits_1_naming_them(tmp_path: Path) -> None:
    root = _project(tmp_path, "a <!-- generated: value metrics/outcomes.json [name=gain,cell=k1].diff +.2f -->"
                              "+0.50<!-- end generated --> b\n")
    runner = CliRunner()
    checked = runner.invoke(app, ["docs-blocks", "--root", str(root), "--check"])
    assert checked.exit_code == 1 and "README.md:1: value metrics/outcomes.json" in checked.output and "stale" in checked.output
    rewritten = runner.invoke(app, ["docs-blocks", "--root", str(root)])
    assert rewritten.exit_code == 0 and "README.md: 1 generated blocks, 1 rewritten" in rewritten.output
    assert "-->+0.10<!-- end generated --> b\n" in (root / "README.md").read_text()
    assert runner.invoke(app, ["docs-blocks", "--root", str(root), "--check"]).exit_code == 0
    (root / "README.md").write_text("<!-- generated: value metrics/outcomes.json [0].nothing -->x<!-- end generated -->\n")
    broken = runner.invoke(app, ["docs-blocks", "--root", str(root)])
    assert broken.exit_code == 2
    assert [line for line in broken.output.splitlines() if line.startswith("error")] == [
        "error: README.md:1: value: metrics/outcomes.json: no key nothing (path '[0].nothing')"]


def test_the_words_follow_docs_metrics_vocabulary() -> None:
    base = {"diff": 0.1, "ci_low": 0.05, "ci_high": 0.15, "per_replicate": [0.1, 0.08, 0.12], "mde": 0.05}
    assert reading(base | {"met": True, "met_after_holm": True, "p_holm": 0.01}) == "detected after Holm"
    assert reading(base | {"met": True, "met_after_holm": False, "p_holm": 0.1}) == "detected raw only"
    assert reading(base | {"met": True, "met_after_holm": None, "p_holm": None, "secondary": True}) == "detected raw only"
    null = base | {"diff": 0.0, "ci_low": -0.02, "ci_high": 0.02, "met": False}
    assert reading(null) == "no difference detected (could have seen ±0.050)"
    assert reading(null | {"equivalence": "equivalent: 90% CI [-0.01, +0.01] inside ±0.020"}) == "equivalent within ±0.020"
    assert reading(base | {"met": False}) == "target not met: the difference lies the other way"
    assert reading(base | {"p_value": 0.003, "p_holm": 0.009}) == "detected after Holm"  # compare.json: no `met`
    assert format_value(0.0004, "p") == "< 0.001" and format_value(0.1127, "p") == "0.113"


# ---- the lint: no result number typed by hand where the docs report a committed study ------------------------

LINTED = ("README.md", "docs/results.md")
CHECKED_HEADINGS = {
    "README.md": ("## The main job: `dvc repro`", "### Results in DVC", "## Studies"),
    "docs/results.md": ("## The main job on the test split: three replicates",),
}
"""Sections that report committed files without naming a study folder in their heading (the main job's
metrics/, every study in README's overview)."""
PENDING: dict[str, str] = {}
"""Studies whose paragraphs the lint skips until they are converted (issue #57): a paragraph naming one is
not checked."""
RESULT_NUMBER = re.compile(
    r"\[\s*[+\-−]?\d*\.?\d+\s*,\s*[+\-−]?\d*\.?\d+\s*\]"  # an interval: [a, b]
    r"|\bp\s*(?:[<=]\s*)?\d*\.\d+"  # a p-value: p 0.019, Holm p 0.113, p < 0.001
    r"|(?<![\w.])[+\-−]\d*\.\d{2,}"  # a signed difference: +0.135, -0.02
    r"|(?<![\w.+\-−±])\d{1,2}\.\d{3,}"  # a measured share or mean: 0.428, 0.0009, 11.366
    r"|(?<![\w.])\d+\.\d+%"  # a share in percent with a decimal: 5.9%
    r"|(?<![\w/.\-])\d+/\d+(?![\w/])")  # a count of runs: 6/10 (not a date's 03/04)
TIMING = re.compile(r"\s?(s|ms|min|h|x|GFLOP/s)\b")
"""A number followed by one of these units is a timing or a speed ratio: not a restated result file."""
ALLOWED: dict[str, list[tuple[str, str]]] = {
    "README.md": [
        ("(0.490 and 0.541 in two more alternating pairs on one adapter)",
         "bench_smollm2.py's timing ratios, printed by benchmark runs, not committed"),
        ("more than the 0.013 margin of the benchmark's own run", "the same benchmark's printed ratio against 0.6"),
        ("within +-0.02, so it is not used", "the declared equivalence margin of the bf16 comparison"),
    ],
    "docs/results.md": [
        ("master_key rho0 = 0.061, any_box 0.031", "the rates declared in flawed_verifier's study.yaml before it ran"),
        ("calibration's 1.7% per detector", "the alarm calibration's per-detector budget: a design constant"),
        ("(95% CI below +0.02)", "the J sweep's declared margin for its random-reward control"),
        ("(band [0.4, 0.7]:", "the warm start's target band, declared in params.yaml"),
        ("0.043 of a 0.89 s step", "bench_alarm.py's timing, printed by a benchmark run, not committed"),
        ("0.894, 0.919 and 0.885 s", "bench_alarm.py's timings, printed by a benchmark run, not committed"),
        ("early-stop share 0.00125 (1 of 800 completions)", "a pilot warm start's evaluation, printed, its files not kept"),
        ("pass@1 0.896; its most frequent patterned error is\noff-by-one (0.068)",
         "the same pilot's evaluation, printed, its files not kept"),
    ],
}
"""(phrase, why) per file: a phrase in a checked section whose numbers are not restatements of a committed
result file (a design constant, a timing a benchmark printed). A number inside one is not flagged; a phrase
no longer in the file fails the test, so the list cannot go stale."""


def _tracked_studies() -> set[str]:
    tracked = subprocess.run(["git", "ls-files", "pipelines/*/metrics/outcomes.json"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    return {path.rsplit("/metrics/", 1)[0] for path in tracked}


def _sections(text: str) -> list[tuple[str, str, int]]:
    """(heading, body, first line) of each section, fenced code blocks left out of the body."""
    sections, heading, body, start, fenced = [], "", [], 1, False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if line.startswith("#") and not fenced:
            sections.append((heading, "\n".join(body), start))
            heading, body, start = line, [], number + 1
        else:
            body.append("" if fenced else line)
    return [*sections, (heading, "\n".join(body), start)]


def checked(doc: str, heading: str, studies: set[str]) -> bool:
    """A section reports committed results: its heading names a study with committed outcomes.json (not an
    earlier state: `at commit`, `before the splits`), or it is listed in CHECKED_HEADINGS."""
    if heading.startswith(CHECKED_HEADINGS.get(doc, ())):
        return True
    named = set(re.findall(r"`(pipelines/\w+)", heading))
    return bool(named & studies) and "at commit" not in heading and "before the splits" not in heading


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _template_only(block: re.Match) -> str:
    """A generated block with what it renders, its first line and its placeholders blanked: the
    template's own words stay, and a number typed into them is checked like any other."""
    header, _, rest = block.group(0).partition("\n")
    template, close, rendered = rest.partition("-->")
    if not close:  # a one-line block: all of it is its first line
        return _blank(block.group(0))
    template = re.sub(r"\{[^{}]*\}", lambda m: _blank(m.group(0)), template)
    return _blank(header) + "\n" + template + _blank(close + rendered)


def _blank_blocks_and_code(text: str) -> str:
    """The text with every generated block's rendered text, first line and placeholders, and inline
    code, blanked out (line breaks kept, so line numbers still hold)."""
    text = re.sub(re.escape(OPEN) + r".*?" + re.escape(END), _template_only, text, flags=re.S)
    return re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group(0)), text)


def hand_typed_numbers(doc: str, text: str, studies: set[str], allowed: list[tuple[str, str]]) -> list[str]:
    """`doc:line: number (in 'heading')` for each result number outside a block in a checked section."""
    found, blanked = [], _sections(_blank_blocks_and_code(text))
    for (heading, original, start), (_, body, _) in zip(_sections(text), blanked, strict=True):
        if not checked(doc, heading, studies):
            continue
        spans = [(m.start(), m.end()) for phrase, _ in allowed for m in re.finditer(re.escape(phrase), original)]
        for paragraph in re.finditer(r"(?:[^\n]+\n?)+", original):
            if any(study in paragraph.group(0) for study in PENDING):
                continue
            for match in RESULT_NUMBER.finditer(body, paragraph.start(), paragraph.end()):
                if TIMING.match(body, match.end()) or any(a <= match.start() < b for a, b in spans):
                    continue
                line = start + body.count("\n", 0, match.start())
                found.append(f"{doc}:{line}: {match.group(0)} (in {heading[:60]!r})")
    return found


@pytest.mark.parametrize("doc", LINTED)
def test_no_result_number_is_typed_by_hand_outside_a_generated_block(doc: str) -> None:
    text = (ROOT / doc).read_text()
    missing = [phrase for phrase, _ in ALLOWED[doc] if phrase not in text]
    assert missing == [], f"allowlisted phrases no longer in {doc}: remove them from ALLOWED"
    assert hand_typed_numbers(doc, text, _tracked_studies(), ALLOWED[doc]) == []


def test_the_lint_finds_a_restated_number_and_passes_one_inside_a_block() -> None:
    studies = {"pipelines/demo"}
    text = ("## Demo (`pipelines/demo`, 2026-12-06)\n\nThe gain +0.135 [+0.102, +0.168], Holm p 0.019; 6/10 on time;"
            " a step 2.166 s; `lr: 0.0003`.\n"
            "Inside <!-- generated: value x.json a -->+0.135 [+0.1, +0.2]<!-- end generated --> none.\n"
            "The band [0.4, 0.7] is a design constant.\n\n"
            "## Old (`pipelines/demo` at commit abc1234)\n\n+0.2 [0.1, 0.3] is history.\n")
    found = hand_typed_numbers("README.md", text, studies, [("band [0.4, 0.7]", "declared before the study")])
    assert found == ["README.md:3: +0.135 (in '## Demo (`pipelines/demo`, 2026-12-06)')",
                     "README.md:3: [+0.102, +0.168] (in '## Demo (`pipelines/demo`, 2026-12-06)')",
                     "README.md:3: p 0.019 (in '## Demo (`pipelines/demo`, 2026-12-06)')",
                     "README.md:3: 6/10 (in '## Demo (`pipelines/demo`, 2026-12-06)')"]
