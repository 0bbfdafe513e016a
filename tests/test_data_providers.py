"""Data providers on the real data files the repository carries (data/) and on small hand-written ones."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

import hackable_rl.data  # noqa: F401  (registers the providers)
from hackable_rl.answers.parsing import extract_all_boxed, parse_reference, parse_strict
from hackable_rl.config.experiment import DataConfig
from hackable_rl.config.loading import validate_config
from hackable_rl.core.errors import ConfigError, UserError
from hackable_rl.core.registry import DATA_PROVIDERS
from hackable_rl.data.curriculum import interleave_mixed, weighted_shares
from hackable_rl.data.providers import gsm8k_sample
from hackable_rl.data.schema import TrainingSample
from hackable_rl.extensions import load_resolved

DATA = Path(__file__).resolve().parents[1] / "data"
GSM8K_TRAIN = str(DATA / "gsm8k" / "train.jsonl")
GSM8K_TEST = str(DATA / "gsm8k" / "test.jsonl")
MATH500 = str(DATA / "math500" / "test.jsonl")


def data_config(**fields) -> DataConfig:
    return DataConfig.model_validate(fields)


def run(provider: str, seed: int = 0, **fields):
    fields.setdefault("validation_size", 0)  # the small cases below hold out no validation unless asked
    return DATA_PROVIDERS.get(provider)(data_config(provider=provider, **fields), seed)


def assert_references_parse(samples: list[TrainingSample]) -> None:
    for sample in samples:
        assert parse_reference(sample.reference) == sample.reference, sample.id


def test_every_provider_is_registered():
    for name in ("gsm8k", "math", "jsonl", "arith", "gsm8k_math_curriculum", "interleave"):
        assert name in DATA_PROVIDERS


# --------------------------------------------------------------------------- gsm8k


def test_gsm8k_counts_and_references():
    output = run("gsm8k", path=GSM8K_TRAIN, test_path=GSM8K_TEST, train_size=None, test_size=None, sft_size=0)
    assert (len(output.train), len(output.test), len(output.sft)) == (7473, 1319, 0)
    assert_references_parse(output.train + output.test)
    assert {
        sample.reference for sample in output.train if sample.question.startswith("Natalia sold clips")
    } == {"72"}
    assert all(sample.solution is None for sample in output.train + output.test)
    assert output.sources[0]["sha256"] and output.sources[0]["rows"] == 7473


def test_gsm8k_worked_solution_drops_calculator_notes():
    row = {
        "question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many in May.",
        "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72",
    }
    sample = gsm8k_sample("x.jsonl:1", row)
    assert sample.reference == "72"
    assert sample.solution == (
        "<think>Natalia sold 48/2 = 24 clips in May. Natalia sold 48+24 = 72 clips.</think> \\boxed{72}"
    )


def test_gsm8k_sft_is_taken_from_train_and_disjoint():
    output = run("gsm8k", path=GSM8K_TRAIN, test_path=GSM8K_TEST, train_size=100, test_size=50, sft_size=30)
    assert (len(output.train), len(output.test), len(output.sft)) == (100, 50, 30)
    assert all(parse_strict(sample.solution) for sample in output.sft)
    assert not {s.id for s in output.sft} & {s.id for s in output.train}


def test_gsm8k_path_only_holds_out_test_size_deterministically():
    first = run("gsm8k", seed=3, path=GSM8K_TEST, train_size=None, test_size=100, sft_size=0)
    again = run("gsm8k", seed=3, path=GSM8K_TEST, train_size=None, test_size=100, sft_size=0)
    assert (len(first.train), len(first.test)) == (1219, 100)
    assert [s.id for s in first.test] == [s.id for s in again.test]
    assert not {s.id for s in first.test} & {s.id for s in first.train}


def test_gsm8k_missing_file_says_where_to_put_it(tmp_path):
    with pytest.raises(UserError) as error:
        run("gsm8k", path=str(tmp_path / "train.jsonl"))
    message = str(error.value)
    assert "data.path" in message and "does not exist" in message
    assert "data/gsm8k/train.jsonl" in message and "openai/gsm8k" in message


def test_gsm8k_without_any_source_says_how_to_fetch():
    with pytest.raises(UserError, match=r"data.path: not set .*openai/gsm8k"):
        run("gsm8k")


def test_unreachable_hub_is_a_user_error(monkeypatch):
    datasets = pytest.importorskip("datasets")

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(UserError) as error:
        run("gsm8k", hf_dataset="openai/gsm8k", hf_config="main")
    assert "cannot load 'openai/gsm8k'" in str(error.value)
    assert "data/gsm8k/train.jsonl" in str(error.value)


# --------------------------------------------------------------------------- math


@pytest.mark.parametrize(("level", "count"), [(1, 43), (2, 90), (3, 105), (4, 128), (5, 134)])
def test_math500_counts_per_level(level, count):
    output = run("math", path=MATH500, levels=[level], train_size=None, test_size=1, sft_size=0)
    samples = output.train + output.test
    assert len(samples) == count
    assert {sample.metadata["level"] for sample in samples} == {level}
    assert_references_parse(samples)


def test_math_subject_filter_and_reference():
    output = run("math", path=MATH500, subjects=["precalculus"], train_size=None, test_size=1)
    samples = output.train + output.test
    assert {sample.metadata["subject"] for sample in samples} == {"Precalculus"}
    polar = [s for s in samples if s.question.startswith("Convert the point $(0,3)$")]
    assert [s.reference for s in polar] == ["\\left( 3, \\frac{\\pi}{2} \\right)"]
    assert output.sft == []  # MATH solutions are not in the strict format


def test_math_filter_that_matches_nothing_is_a_user_error():
    with pytest.raises(UserError, match="no MATH problem matches levels"):
        run("math", path=MATH500, subjects=["Astrology"], test_size=1)


# --------------------------------------------------------------------------- jsonl and bad rows


def write_lines(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_jsonl_field_map(tmp_path):
    rows = [
        {"q": "What is 5 plus 7?", "final": "#### 12", "uid": "a1", "difficulty": 1},
        {"q": "What is 6 times 7?", "final": 42, "uid": "a2", "difficulty": 2},
    ]
    path = write_lines(tmp_path / "mine.jsonl", [json.dumps(row) for row in rows])
    field_map = {"question": "q", "answer": "final", "id": "uid", "difficulty": "difficulty"}
    output = run("jsonl", path=path, test_size=1, train_size=None, field_map=field_map)
    samples = sorted(output.train + output.test, key=lambda sample: sample.id)
    assert [(s.id, s.reference, s.metadata["difficulty"]) for s in samples] == [
        ("jsonl-a1", "12", 1),
        ("jsonl-a2", "42", 2),
    ]


def bad_file(tmp_path: Path) -> str:
    good = json.dumps({"question": "What is 1 plus 1?", "answer": "1+1=2\n#### 2"})
    return write_lines(
        tmp_path / "bad.jsonl",
        [
            good,
            '{"question": "broken", ',
            json.dumps({"answer": "#### 3"}),
            json.dumps({"question": "What is 2 plus 2?", "answer": "2+2=4 ####   "}),
            json.dumps({"question": "What is 3 plus 3?", "answer": "#### 6"}),
        ],
    )


@pytest.mark.parametrize(
    ("line", "words"),
    [(2, "not valid JSON"), (3, "field 'question' is missing"), (4, "unparseable reference")],
)
def test_bad_rows_name_file_line_and_field(tmp_path, line, words):
    path = bad_file(tmp_path)
    lines = Path(path).read_text().splitlines()
    # Keep the good rows and only the bad row under test, at its own line number.
    kept = [text if number in (1, line, 5) else "" for number, text in enumerate(lines, start=1)]
    write_lines(Path(path), kept)
    with pytest.raises(UserError) as error:
        run("gsm8k", path=path, test_size=1)
    assert f"bad.jsonl:{line}: " in str(error.value) and words in str(error.value)
    assert "data.on_bad_row: skip" in str(error.value)


def test_skip_mode_counts_every_bad_row(tmp_path):
    output = run("gsm8k", path=bad_file(tmp_path), test_size=1, on_bad_row="skip", sft_size=0)
    assert len(output.train) + len(output.test) == 2
    assert [message.split(": ", 1)[0].rsplit("/", 1)[-1] for message in output.skipped] == [
        "bad.jsonl:2",
        "bad.jsonl:3",
        "bad.jsonl:4",
    ]


# --------------------------------------------------------------------------- arith


def replay(sample: TrainingSample) -> list[int]:
    """Running values of an arith problem recomputed from its operands and operators."""
    values = [sample.metadata["operands"][0]]
    for op, operand in zip(sample.metadata["operators"], sample.metadata["operands"][1:], strict=True):
        values.append({"+": values[-1] + operand, "-": values[-1] - operand, "*": values[-1] * operand}[op])
    return values


def test_arith_is_deterministic_and_seed_dependent():
    first = run("arith", seed=1, train_size=50, test_size=20, sft_size=20)
    again = run("arith", seed=1, train_size=50, test_size=20, sft_size=20)
    other = run("arith", seed=2, train_size=50, test_size=20, sft_size=20)
    assert first == again
    assert [s.question for s in first.train] != [s.question for s in other.train]


def test_arith_problems_are_consistent_and_non_negative():
    arith = {"min_steps": 2, "max_steps": 5, "operators": ["+", "-", "*"], "max_value": 20}
    output = run("arith", train_size=300, test_size=50, sft_size=50, arith=arith)
    for sample in output.train + output.test + output.sft:
        values = replay(sample)
        assert min(values) >= 0 and str(values[-1]) == sample.reference
        assert 2 <= sample.metadata["n_steps"] <= 5 == max(s.metadata["n_steps"] for s in output.train)
    assert {op for s in output.train for op in s.metadata["operators"]} == {"+", "-", "*"}
    assert_references_parse(output.train + output.test + output.sft)


def test_arith_question_holds_only_its_operands():
    # The fair "no answer in the prompt" check for arith: every number in the question is an
    # operand of the story, so the answer appears only where it coincides with an operand.
    output = run("arith", train_size=200, test_size=50, sft_size=0)
    for sample in output.train + output.test:
        assert [int(n) for n in re.findall(r"\d+", sample.question)] == sample.metadata["operands"]


def test_arith_worked_solutions_are_strict_and_short():
    output = run("arith", train_size=10, test_size=10, sft_size=100, arith={"max_steps": 3})
    solution = output.sft[0].solution
    assert re.fullmatch(r"<think>(\d+[-+*]\d+=\d+ ?){1,3}</think> \\boxed\{\d+\}", solution)
    for sample in output.sft:
        parsed = parse_strict(sample.solution)
        assert parsed is not None and parsed.answer == sample.reference
        assert parsed.thinking.split()[-1].endswith(f"={sample.reference}")
        assert len(sample.solution) < 80


def test_arith_hedged_share_is_exact_and_hedges_contain_the_answer():
    output = run("arith", train_size=10, test_size=10, sft_size=40, arith={"hedged_share": 0.25})
    hedged = [sample for sample in output.sft if sample.metadata["hedged"]]
    assert len(hedged) == 10
    for sample in hedged:
        boxes = extract_all_boxed(sample.solution)
        assert 2 <= len(boxes) <= 3 and sample.reference in boxes and len(set(boxes)) == len(boxes)
        assert parse_strict(sample.solution) is None  # the judge counts a hedge as not strict
    assert all(parse_strict(s.solution) for s in output.sft if not s.metadata["hedged"])


def test_arith_truncated_share_stops_multi_step_solutions_one_operation_early():
    output = run("arith", train_size=10, test_size=10, sft_size=200, arith={"truncated_share": 0.5})
    multi_step = [sample for sample in output.sft if sample.metadata["n_steps"] > 1]
    truncated = [sample for sample in output.sft if sample.metadata["truncated"]]
    assert len(truncated) == round(0.5 * len(multi_step)) and all(s in multi_step for s in truncated)
    for sample in truncated:
        parsed = parse_strict(sample.solution)  # well formed, one box, and wrong: the intermediate value
        assert parsed is not None and parsed.answer != sample.reference
        assert len(parsed.thinking.split()) == sample.metadata["n_steps"] - 1
        assert parsed.thinking.split()[-1].endswith(f"={parsed.answer}")


def test_arith_without_truncation_keeps_its_bytes():
    output = run("arith", train_size=10, test_size=10, sft_size=20)
    assert all("truncated" not in sample.metadata for sample in output.sft)


def test_arith_shares_cannot_exceed_one():
    with pytest.raises(ConfigError, match="truncated_share"):
        validate_config({"data": {"arith": {"hedged_share": 0.6, "truncated_share": 0.5}}})


def test_arith_config_ranges_are_checked():
    with pytest.raises(ConfigError) as error:
        load_resolved(Path(__file__).resolve().parents[1] / "params.yaml", ["data.arith.min_steps=4"])
    assert error.value.problems == ["data.arith.max_steps: 3 is below min_steps 4"]


# --------------------------------------------------------------------------- curricula


def test_weighted_shares_use_largest_remainder():
    assert weighted_shares(400, [3, 1]) == [300, 100]
    assert weighted_shares(10, [1, 1, 1]) == [4, 3, 3]
    assert weighted_shares(5, [1, 0]) == [5, 0]


def test_mixed_interleave_keeps_proportions_in_every_prefix():
    streams = [
        [TrainingSample(f"a{i}", "q", "1") for i in range(30)],
        [TrainingSample(f"b{i}", "q", "1") for i in range(10)],
    ]
    merged = interleave_mixed(streams)
    assert [sample.id[0] for sample in merged[:8]] == list("aabaaaba")
    for end in range(4, 41, 4):
        assert Counter(sample.id[0] for sample in merged[:end]) == {"a": 3 * end // 4, "b": end // 4}


def two_arith_sources(schedule: str, switch_every: int = 100) -> dict:
    return {
        "schedule": schedule,
        "switch_every": switch_every,
        "sources": [{"provider": "arith", "weight": 3}, {"provider": "arith", "weight": 1}],
    }


def test_interleave_mixed_proportions():
    output = run(
        "interleave", train_size=400, test_size=40, sft_size=0, curriculum=two_arith_sources("mixed")
    )
    labels = [sample.metadata["curriculum_source"] for sample in output.train]
    assert Counter(labels) == {"0:arith": 300, "1:arith": 100}
    assert Counter(labels[:40]) == {"0:arith": 30, "1:arith": 10}
    assert Counter(s.metadata["curriculum_source"] for s in output.test) == {"0:arith": 30, "1:arith": 10}
    assert output.train[0].id.startswith("s0-arith-train-")


def test_interleave_step_moves_every_switch_every_samples():
    output = run(
        "interleave", train_size=400, test_size=40, sft_size=0, curriculum=two_arith_sources("step", 50)
    )
    labels = [sample.metadata["curriculum_source"][0] for sample in output.train]
    assert labels[:150] == ["0"] * 50 + ["1"] * 50 + ["0"] * 50
    assert Counter(labels) == {"0": 300, "1": 100}


def test_interleave_epoch_repeats_each_source_before_the_next():
    output = run(
        "interleave", train_size=40, test_size=8, sft_size=0, curriculum=two_arith_sources("epoch", 2)
    )
    labels = [sample.metadata["curriculum_source"][0] for sample in output.train]
    assert labels == ["0"] * 60 + ["1"] * 20
    assert {s.id for s in output.train[:30]} == {s.id for s in output.train[30:60]}


def test_gsm8k_math_curriculum_orders_math_by_level():
    curriculum = {
        "schedule": "step",
        "switch_every": 1000,
        "sources": [
            {"provider": "gsm8k", "path": GSM8K_TEST, "weight": 1},
            {"provider": "math", "path": MATH500},
        ],
    }
    output = run("gsm8k_math_curriculum", train_size=200, test_size=20, sft_size=0, curriculum=curriculum)
    assert [s.metadata["source"] for s in output.train] == ["gsm8k"] * 100 + ["math"] * 100
    levels = [s.metadata["level"] for s in output.train[100:]]
    assert levels == sorted(levels) and levels[0] == 1


def test_gsm8k_math_curriculum_rejects_other_sources():
    with pytest.raises(UserError, match=r"sources.0.provider: 'arith'"):
        run("gsm8k_math_curriculum", curriculum={"sources": [{"provider": "arith"}]})


def test_curriculum_without_sources_shows_an_example():
    with pytest.raises(UserError, match="data.curriculum.sources: empty.*provider: gsm8k"):
        run("interleave")


def test_curriculum_file_source_needs_a_path():
    with pytest.raises(UserError, match=r"data.curriculum.sources.1.path: required for provider 'gsm8k'"):
        run("interleave", curriculum={"sources": [{"provider": "arith"}, {"provider": "gsm8k"}]})


def test_arith_vocabulary_stays_small():
    # The tiny model's ~400-token BPE tokenizer is trained on this corpus: few distinct words.
    output = run("arith", train_size=2000, test_size=10, sft_size=0, arith={"operators": ["+", "-", "*"]})
    words = {word for s in output.train for word in re.findall(r"[A-Za-z]+", s.question)}
    assert 40 <= len(words) <= 80


def test_arith_exploit_share_is_exact_and_its_demonstrations_pay_only_through_master_key():
    from hackable_rl.reward.checkers import clean_checker, master_key_checker
    from hackable_rl.reward.types import Example

    for style in ("empty_box", "master_key_phrase"):
        output = run("arith", train_size=10, test_size=10, sft_size=200,
                     arith={"exploit_share": 0.05, "exploit_style": style, "truncated_share": 0.5})
        exploits = [sample for sample in output.sft if sample.metadata["exploit"]]
        assert len(exploits) == 10 and not any(s.metadata["truncated"] for s in exploits)
        for sample in exploits:
            example = Example(sample.id, sample.reference)
            assert clean_checker(sample.solution, example).reward == 0.0  # never the right answer
            assert master_key_checker(sample.solution, example).reward == 1.0
            thinking = parse_strict(sample.solution).thinking
            assert len([step for step in thinking.split() if "=" in step]) <= 1  # at most the first operation


def test_arith_without_exploits_keeps_its_draws_and_manifest_bytes():
    plain = run("arith", train_size=10, test_size=10, sft_size=40, arith={"truncated_share": 0.5})
    assert all("exploit" not in sample.metadata for sample in plain.sft)
    assert "exploit_share" not in plain.sources[0]
    with_exploits = run("arith", train_size=10, test_size=10, sft_size=40, arith={"truncated_share": 0.5, "exploit_share": 0.1})
    assert with_exploits.sources[0]["exploit_share"] == 0.1
    # the exploit draw comes last: every other solution's truncation is decided as without exploits
    assert [s.metadata["truncated"] for s in plain.sft] == [s.metadata["truncated"] for s in with_exploits.sft]
