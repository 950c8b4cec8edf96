"""Every row the trainers write goes through the record API (ingest.records, ingest.rm_records,
ingest.run_state) inside `warehouse.db.transaction`: no module of train/ carries SQL that
writes. A write of its own would bypass the ingest's normalization and the export's round
trip, as `step_metrics` and `run_lifecycle` once did."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRITE = re.compile(r"\b(INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM|MERGE\s+INTO|COPY\s+\S+\s+FROM|"
                   r"CREATE\s+(OR\s+REPLACE\s+)?(TEMP\w*\s+)?(TABLE|VIEW)|DROP\s+(TABLE|VIEW)|ALTER\s+TABLE|TRUNCATE)\b",
                   re.IGNORECASE)


def sql_writes(path: Path) -> list[str]:
    """`path`'s string constants (f-strings' parts too) that read as SQL writing to a table."""
    return [f"{path.relative_to(ROOT)}:{node.lineno}: {WRITE.search(node.value).group(0)}"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and WRITE.search(node.value)]


def test_no_trainer_module_writes_sql_of_its_own():
    assert [hit for path in sorted((ROOT / "train").rglob("*.py")) for hit in sql_writes(path)] == []


def test_the_check_sees_a_write(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    module = tmp_path / "beat.py"
    module.write_text('def beat(con, run):\n    """One UPDATE per beat."""\n'
                      '    con.execute(\'UPDATE "run_lifecycle" SET "heartbeat_at" = now() WHERE "run_id" = ?\', [run])\n'
                      '    con.execute(f"DELETE FROM {TABLE} WHERE x = ?", [1])\n')
    assert sql_writes(module) == ['beat.py:3: UPDATE "run_lifecycle" SET', "beat.py:4: DELETE FROM"]
