"""The step phases are declared once, in warehouse.vocabulary: the steps table's columns, the
normalization's timing fields, the loader's column list, the trainer's phase timer and the
sample warehouse's timing rows all follow it, and no other product module spells the list."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import sqlalchemy as sa

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


def _string_lists(path: Path, shortest: int):
    """(line, the strings) of each tuple/list/set literal of `shortest` or more string constants."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Tuple | ast.List | ast.Set) and len(node.elts) >= shortest \
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            yield node.lineno, {e.value for e in node.elts}


def _product_hits(check) -> list[str]:
    """`check`'s line numbers in every product module but the vocabulary itself."""
    vocabulary = ROOT / "warehouse" / "vocabulary.py"
    return [f"{p.relative_to(ROOT)}:{n}" for pkg in PRODUCT for p in sorted((ROOT / pkg).rglob("*.py"))
            if p != vocabulary for n in check(p)]


def _spelled_phase_lists(path: Path) -> list[int]:
    """Line numbers of literals of three or more strings, all of them phases or phase columns:
    a second copy of the vocabulary's list."""
    names = set(vocab.STEP_PHASES) | set(vocab.STEP_PHASE_COLUMNS)
    return [line for line, values in _string_lists(path, 3) if values <= names]


def test_no_product_module_spells_the_phase_list_again():
    assert _product_hits(_spelled_phase_lists) == []


def test_the_spelled_list_check_finds_a_copy(tmp_path):
    copy = tmp_path / "copy.py"
    copy.write_text('PHASES = ("gen", "old_log_prob", "ref")\nOTHER = ("gen", "status", "ref")\n')
    assert _spelled_phase_lists(copy) == [1]


# --- statuses, modes and run states are the vocabulary's names, not spelled strings
VALUES = set(vocab.STATUSES) | set(vocab.MODES) | set(vocab.RUN_STATES)
SUBJECT = ("status", "mode", "state")


def _is_value(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in VALUES


def _spelled_values(path: Path) -> list[str]:
    """Where `path` spells a status, mode or run state: compared with something named after one
    (`r["status"] == "ok"`, `mode != "draft"`), given as one in a dict or a call (`{"status":
    "ok"}`, `Grade(status="ok")`), or listed (two or more of them in a tuple, list or set, or as a dict's keys)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(word in ast.unparse(s).lower() for s in sides if not _is_value(s) for word in SUBJECT)
            if named and any(_is_value(s) for s in sides):
                found.append(node.lineno)
        elif isinstance(node, ast.Dict):
            pairs = [(k.value, v) for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)]
            if any(key in SUBJECT and _is_value(value) for key, value in pairs) \
                    or sum(map(_is_value, node.keys)) >= 2:
                found.append(node.lineno)
        elif isinstance(node, ast.Tuple | ast.List | ast.Set) and sum(map(_is_value, node.elts)) >= 2:
            found.append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg in SUBJECT and _is_value(node.value):
            found.append(node.value.lineno)
    return [f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{n}" for n in sorted(set(found))]


def test_no_product_module_spells_a_status_mode_or_run_state():
    vocabulary = ROOT / "warehouse" / "vocabulary.py"
    spelled = [hit for pkg in PRODUCT for p in sorted((ROOT / pkg).rglob("*.py"))
               if p != vocabulary for hit in _spelled_values(p)]
    assert spelled == []


@pytest.mark.parametrize("code, hits", [
    ('ok = [n for n in nodes if n["status"] == "ok"]', 1),
    ('if mode != "debug": pass', 1),
    ('parent = {"code": "", "status": "crashed"}', 1),
    ('grade = Grade(status="no_submission")', 1),
    ('plant = ("timeout", "no_code")', 1),
    ('codes = {"ok": 0, "crashed": 1}', 1),
    ('if state in ("finished", "failed"): pass', 1),
    ('ok = [n for n in nodes if n["status"] == OK]', 0),
    ('ctx.obj["debug"] = debug', 0),  # a flag's name, not a mode
    ('if reply == "ok": pass', 0),  # not a status
    ('row = {"lost": bool(raw.get("lost"))}', 0),  # a column named like a run state
])
def test_the_spelled_value_check(tmp_path, code, hits):
    path = tmp_path / "m.py"
    path.write_text(code + "\n")
    assert len(_spelled_values(path)) == hits


# --- field lists: each record kind's fields are declared once, in the vocabulary
RECORD_KINDS = {"node": vocab.NODE_FIELDS, "summary": vocab.SUMMARY_FIELDS,
                "timing": vocab.TIMING_FIELDS, "step_metric": vocab.STEP_METRIC_FIELDS,
                "train_tokens": (*vocab.NODE_TRAIN_TOKEN_FIELDS,
                                 *(vocab.Field(c, c, "float") for c in vocab.NODE_TRAIN_TOKEN_DERIVED_COLUMNS)),
                **{name.lower(): getattr(vocab, name) for name in dir(vocab)
                   if name.startswith("RM_") and name.endswith("_FIELDS")}}
LOCATION = ["source_id", "line_no", "run_id", "round", "task"]  # a node's file, not its record


def _names(fields) -> set[str]:
    return {name for f in fields for name in (f.key, f.column, *(c for _, c in f.parts)) if name}


_SQL_LIST = re.compile(r"\(([^()]+)\)")
_NAME = re.compile(r'(?:\w+\.)?"?([A-Za-z_]\w*)"?')


def _sql_column_lists(path: Path, shortest: int):
    """(line, the names) of each parenthesized list of `shortest` or more plain column names in
    a string, such as an INSERT's column list, leaving out the location columns every table has."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for inside in _SQL_LIST.findall(node.value):
                names = [_NAME.fullmatch(part.strip()) for part in inside.split(",")]
                if len(names) >= shortest and all(names):
                    yield node.lineno, {m.group(1) for m in names} - set(LOCATION)


def _spelled_field_lists(path: Path) -> list[int]:
    """Line numbers of literals of strings, or of SQL column lists in a string, every name a key
    or column of one record kind, that name twelve of them or two thirds of the kind: a second
    copy of (much of) the vocabulary's field list. A page or a benchmark choosing the few columns
    it shows names fewer, or mixes in names of its own."""
    kinds = [_names(fields) for fields in RECORD_KINDS.values()]
    lists = [*_string_lists(path, 5), *_sql_column_lists(path, 5)]
    return [line for line, values in sorted(lists, key=lambda hit: hit[0])
            if values and any(values <= names and (len(values) >= 12 or 3 * len(values) >= 2 * len(names)) for names in kinds)]


def test_no_product_module_spells_a_field_list_again():
    assert _product_hits(_spelled_field_lists) == []


def test_the_field_list_check_finds_a_copy(tmp_path):
    copy = tmp_path / "copy.py"
    copy.write_text(
        'COLS = ("node_id", "step", "record_round", "exp_id", "parent_id", "sibling_group", "mode", "plan",\n'
        '        "exc_type", "exec_time", "term_tail", "is_buggy")\n'  # twelve node columns
        'PICK = ("task", "node_id", "status", "reward", "mode")\n'  # a query's own choice
        'STEP = ["step", "loss", "pg_loss", "kl", "clip_frac", "grad_norm", "entropy", "tokens"]\n'  # 8 of 11
        'SHOW = ("loss", "kl", "grad_norm", "entropy", "tokens", "micro_batches", "peak_mem_gib")\n'  # 7 of 11
        'TT = ("step", "advantage", "trainer_logprobs", "ref_logprobs", "ratios", "compared_tokens",\n'
        '      "mult_prob_error_sum", "mult_prob_error_max")\n'  # 8 of node_train_tokens' 11 names
        'SQL = ("INSERT INTO node_train_tokens (source_id, line_no, run_id, step, advantage, trainer_logprobs, "\n'
        '       "ref_logprobs, ratios, compared_tokens, mult_prob_error_sum, mult_prob_error_max, abs_delta_gt_1, "\n'
        '       "kl_to_ref_sum) SELECT 1")\n'  # the loader's list, spelled in its SQL
        'PICK_SQL = "SELECT * FROM nodes WHERE status IN (\'ok\', \'crashed\') AND (step, reward) = (1, 2)"\n')
    assert _spelled_field_lists(copy) == [1, 4, 6, 8]


def test_the_node_tables_are_the_vocabularys_fields():
    from ingest.load import NODE_COLUMNS, PAYLOAD_COLUMNS

    nodes = [c.name for c in metadata.tables["nodes"].columns]
    assert nodes == [*LOCATION, *vocab.node_columns(), *vocab.NODE_DERIVED_COLUMNS]
    assert nodes[len(LOCATION):] == list(NODE_COLUMNS)
    payloads = [c.name for c in metadata.tables["node_payloads"].columns]
    assert payloads == ["source_id", "line_no", *PAYLOAD_COLUMNS]
    assert {f.key for f in vocab.NODE_FIELDS if f.table == "node_payloads"} == set(PAYLOAD_COLUMNS)
    status, mode = (next(f for f in vocab.NODE_FIELDS if f.key == k) for k in ("status", "mode"))
    assert (status.values, mode.values) == (vocab.STATUSES, vocab.MODES)


def test_the_train_token_table_is_the_vocabularys_fields():
    from ingest.load import TRAIN_TOKEN_COLUMNS

    table = metadata.tables["node_train_tokens"]
    columns = [c.name for c in table.columns]
    assert columns == ["source_id", "line_no", "run_id", *TRAIN_TOKEN_COLUMNS]
    assert TRAIN_TOKEN_COLUMNS == (*(f.column for f in vocab.NODE_TRAIN_TOKEN_FIELDS),
                                   *vocab.NODE_TRAIN_TOKEN_DERIVED_COLUMNS)
    arrays = [c.name for c in table.columns if isinstance(c.type, sa.ARRAY)]
    assert arrays == ["trainer_logprobs", "ref_logprobs", "ratios"]
    assert all(type(table.c[name].type.item_type) is sa.Float for name in arrays)  # float32, not DOUBLE
    assert {f.key for f in vocab.NODE_FIELDS if f.table == "node_train_tokens"} \
        == {f.key for f in vocab.NODE_TRAIN_TOKEN_FIELDS}


def test_the_summary_and_step_metric_columns_are_the_vocabularys_fields():
    from ingest.load import STEP_METRIC_COLUMNS, SUMMARY_COLUMNS

    task_rounds = [c.name for c in metadata.tables["task_rounds"].columns]
    summary = [f.column for f in vocab.SUMMARY_FIELDS]
    assert task_rounds[-len(summary) - 1:] == [*summary, "extra"] == list(SUMMARY_COLUMNS)
    step_metrics = [c.name for c in metadata.tables["step_metrics"].columns]
    assert step_metrics == ["run_id", *STEP_METRIC_COLUMNS]


def test_the_sample_root_writes_each_schemas_keys_in_file_order():
    from ingest.sample import KEYS

    a = [f.key for f in vocab.NODE_FIELDS if f.since == "A"]
    assert len(a) == 25 and list(KEYS["A"]) == a
    assert list(KEYS["C"]) == [f.key for f in vocab.NODE_FIELDS if f.since != "train"]


RM_TABLES = {"rm_runs": "RM_RUN_FIELDS", "rm_references": "RM_REFERENCE_FIELDS", "rm_budgets": "RM_BUDGET_FIELDS",
             "rm_jobs": "RM_JOB_FIELDS", "rm_steps": "RM_STEP_FIELDS", "rm_artifacts": "RM_ARTIFACT_FIELDS",
             "rm_evaluations": "RM_EVALUATION_FIELDS", "rm_eval_sections": "RM_SECTION_FIELDS"}
#: the rm columns no record sets: the write fills them in (ids, the run, the receipt, the key)
RM_BOOKKEEPING = {"source_id", "line_no", "run_id", "extra", "phase", "evaluation_id", "section", "reference_id",
                  "official", "receipt_status", "summary_path", "summary_sha256", "summary_size", "receipt_path",
                  "receipt_sha256", "receipt_size"}


@pytest.mark.parametrize("table, name", sorted(RM_TABLES.items()))
def test_each_rm_table_holds_its_record_kinds_fields_and_the_normalization_types_them(table, name):
    from ingest.normalize import FIELDS

    fields = getattr(vocab, name)
    columns = {c.name: c for c in metadata.tables[table].columns}
    record_columns = [c for c in columns if c not in RM_BOOKKEEPING or c in {f.column for f in fields}]
    assert record_columns == [f.column for f in fields]
    for f in fields:
        assert f.strict and columns[f.column].nullable == (not f.required and not columns[f.column].primary_key)
        assert f.closed == bool(f.values)
    assert fields in FIELDS.values()  # typed by ingest.normalize, as every record kind


def test_the_rm_record_api_spells_no_field_list_and_reads_the_vocabularys_choices():
    from ingest import rm_records

    assert not [name for name in vars(rm_records) if name.endswith("_FIELDS")]
    assert (rm_records.PHASES, rm_records.SPLITS) == (vocab.RM_PHASES, vocab.RM_SPLITS)
    phase = next(f for f in vocab.RM_JOB_FIELDS if f.key == "phase")
    assert phase.values == vocab.RM_PHASES and phase.closed
