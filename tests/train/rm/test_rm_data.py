"""Pair and evaluation files: the two shapes, malformed lines, the overlap refusal, the
bundled synthetic data."""
from __future__ import annotations

from pathlib import Path

import pytest

from train.rm import synthetic
from train.rm.data import (PreferenceDataError, check_no_overlap, proxy_rows, read_eval, read_pairs)

CASES = Path(__file__).parent / "cases"


def test_malformed_pair_lines_are_reported_with_file_and_line_and_the_rest_loads():
    loaded = read_pairs(CASES / "pairs_malformed.jsonl")
    assert [p.prompt for p in loaded.rows] == ["p1", "p2", "implicit"]
    assert loaded.rows[0].chosen[-1] == {"role": "assistant", "content": "good"}
    assert [e.split(": ", 1)[0].rsplit(":", 1)[1] for e in loaded.errors] == ["3", "4", "5"]
    assert all(e.startswith(str(CASES / "pairs_malformed.jsonl") + ":") for e in loaded.errors)
    assert "missing field 'rejected'" in loaded.errors[1]
    assert "'chosen' must be an answer string or a list of at least two messages" in loaded.errors[2]


def test_eval_rows_take_the_section_from_the_subset_or_the_section_column():
    loaded = read_eval(CASES / "eval_rewardbench_shape.jsonl")
    assert [(r.id, r.subset, r.section) for r in loaded.rows] == [
        ("1", "alpacaeval-easy", "Chat"), ("2", "math-prm", "Reasoning"), ("4", "x", "Safety")]
    assert len(loaded.errors) == 1 and ":3: section None (subset 'unknown-subset')" in loaded.errors[0]


def test_overlap_between_pairs_and_eval_rows_is_refused(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"prompt": "fresh", "chosen": "a", "rejected": "b"}\n'
                     '{"prompt": "  E2 ", "chosen": "a", "rejected": "b"}\n')
    rows = read_eval(CASES / "eval_rewardbench_shape.jsonl").rows
    with pytest.raises(PreferenceDataError, match=r"1 training pair\(s\).*pairs.jsonl:2.*id 2"):
        check_no_overlap(read_pairs(pairs).rows, rows, pairs, "eval.jsonl")
    assert check_no_overlap(read_pairs(pairs).rows[:1], rows, pairs, "eval.jsonl") == 1


def test_an_empty_or_missing_file_is_an_error(tmp_path):
    (tmp_path / "empty.jsonl").write_text("not json\n")
    with pytest.raises(PreferenceDataError, match=r"no usable rows .*empty.jsonl:1: not valid JSON"):
        read_pairs(tmp_path / "empty.jsonl")
    with pytest.raises(PreferenceDataError, match="no such file"):
        read_eval(tmp_path / "missing.jsonl")


def test_the_proxy_subset_is_fixed_whatever_the_file_order():
    rows = read_eval(synthetic.EVAL_FILE).rows
    first = [r.id for r in proxy_rows(rows, 100)]
    again = [r.id for r in proxy_rows(list(reversed(rows)), 100)]
    assert len(first) == 100 and sorted(first) == sorted(again)
    assert {r.section for r in proxy_rows(rows, 100)} == {"Chat", "Chat Hard", "Safety", "Reasoning"}


def test_bundled_files_are_the_generators_output_with_no_overlap():
    for path, text in synthetic.render().items():
        assert path.read_text() == text, f"{path} is stale: run python -m train.rm.synthetic"
    pairs, rows = read_pairs(synthetic.PAIRS_FILE), read_eval(synthetic.EVAL_FILE)
    assert not pairs.errors and not rows.errors
    assert check_no_overlap(pairs.rows, rows.rows, "pairs", "eval") == synthetic.N_PAIRS
    assert {r.section for r in rows.rows} == {"Chat", "Chat Hard", "Safety", "Reasoning"}
