"""The step phases are declared once, in warehouse.vocabulary: the steps table's columns, the
normalization's timing fields, the loader's column list, the trainer's phase timer and the
sample warehouse's timing rows all follow it, and no other product module spells the list."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from ingest.load import STEP_COLUMNS
from ingest.normalize import TIMING_FIELDS
from ingest.sample import sample_specs, write_sample_root
from train.learn.timing import PhaseTimer
from warehouse import vocabulary as vocab
from warehouse.schema import metadata

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("warehouse", "ingest", "train", "benchmarks")


def test_the_steps_table_has_one_column_per_phase_in_the_vocabularys_order():
    columns = [c.name for c in metadata.tables["steps"].columns]
    assert [c for c in columns if c.endswith("_s") and c != "total_s"] == list(vocab.STEP_PHASE_COLUMNS)
    assert vocab.STEP_PHASE_COLUMNS == tuple(f"{p}_s" for p in vocab.STEP_PHASES)


def test_the_normalization_and_the_loader_read_every_phase():
    (phases,) = [f for f in TIMING_FIELDS if f.key == "phases_s"]
    assert phases.parts == tuple(zip(vocab.STEP_PHASES, vocab.STEP_PHASE_COLUMNS))
    assert [c for c in STEP_COLUMNS if c in vocab.STEP_PHASE_COLUMNS] == list(vocab.STEP_PHASE_COLUMNS)


def test_the_phase_timer_takes_every_phase_and_refuses_others():
    timer = PhaseTimer()
    for phase in vocab.STEP_PHASES:
        with timer.phase(phase):
            pass
    assert set(timer.row(1)["phases_s"]) == set(vocab.STEP_PHASES)
    with pytest.raises(ValueError, match="unknown phase 'generate'"):
        with timer.phase("generate"):
            pass


def test_the_sample_warehouse_times_the_checkpoint_only_on_steps_that_save(tmp_path):
    write_sample_root(tmp_path, seed=0)
    checked = 0
    for spec in sample_specs():
        for path in tmp_path.rglob(f"{spec.run_id}/timing.jsonl"):
            for line in path.read_text().splitlines():
                row = json.loads(line)
                saves = row["step"] in spec.checkpoint_steps
                expected = [p for p in vocab.STEP_PHASES if p != vocab.CHECKPOINT_PHASE or saves]
                assert list(row["phases_s"]) == expected, (spec.run_id, row["step"])
                checked += saves
    assert checked > 0  # some step saved, so the checkpoint phase was written at least once


def _spelled_phase_lists(path: Path) -> list[int]:
    """Line numbers of tuple/list/set literals of three or more strings, all of them phases or
    phase columns: a second copy of the vocabulary's list."""
    names = set(vocab.STEP_PHASES) | set(vocab.STEP_PHASE_COLUMNS)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Tuple | ast.List | ast.Set) and len(node.elts) >= 3:
            values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(values) == len(node.elts) and set(values) <= names:
                found.append(node.lineno)
    return found


def test_no_product_module_spells_the_phase_list_again():
    vocabulary = ROOT / "warehouse" / "vocabulary.py"
    spelled = [f"{p.relative_to(ROOT)}:{n}" for pkg in PRODUCT for p in sorted((ROOT / pkg).rglob("*.py"))
               if p != vocabulary for n in _spelled_phase_lists(p)]
    assert spelled == []


def test_the_spelled_list_check_finds_a_copy(tmp_path):
    copy = tmp_path / "copy.py"
    copy.write_text('PHASES = ("gen", "old_log_prob", "ref")\nOTHER = ("gen", "status", "ref")\n')
    assert _spelled_phase_lists(copy) == [1]
