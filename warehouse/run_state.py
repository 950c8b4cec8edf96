"""A run's state on a page: its state, start, end and last activity, and whose clock that
last activity is (the run_state view), read once for the HTML reports and the dashboard.

One name for a run's life in every layer: `train.run_state` records it, `ingest.run_state`
writes its row (table `run_lifecycle`), the `run_state` view (sql/run_state.sql) derives its
state, and `warehouse.run_state` reads that for the pages.
"""
from __future__ import annotations

import html


#: whose clock run_state.last_activity_at is (its last_activity_from), as a page says it
ACTIVITY_FROM = {
    "trainer": "its trainer's record (last heartbeat, end or committed round)",
    "file names": "the time stamped in its round files' names",
    "file time": "its files' modification time (file time): they carry no time of their own, so "
                 "a copied or downloaded root shows when it was copied, not the run's own clock",
}


#: The run's row of runs: one SQL text wherever a page reads it, so that on DuckLake the
#: dashboard's Answers cache (warehouse.serve.lake) answers every read after the first on a
#: snapshot (each read of the table costs some ten catalog queries there).
RUN_ROW = 'SELECT * FROM "runs" WHERE "run_id" = ?'


def read_run_row(con, run_id: str) -> dict:
    """The run's row of runs; {} for a run the table does not hold."""
    return _row(con, RUN_ROW, run_id) or {}


def _row(con, sql: str, run_id: str) -> dict | None:
    """The first row `sql` finds for `run_id`, by column name; None when it finds none."""
    cur = con.execute(sql, [run_id])
    found = cur.fetchone()
    return dict(zip([d[0] for d in cur.description], found)) if found else None


def read_life(con, run_id: str) -> dict:
    """The run's run_state row (state, start, end and exit reason, last activity and whose
    clock it is); {"state": None} for a run the view does not know."""
    return _row(con, 'SELECT * FROM "run_state" WHERE "run_id" = ?', run_id) or {"state": None}


def life_line(life: dict) -> str:
    """The report's line under its title: the run's state, start, end (and exit reason), and
    its last activity with whose clock that is, so a file time never passes for the run's."""
    from warehouse.formatting import format_value

    esc = html.escape
    if not life.get("state"):
        return ""
    parts = [f"state <b class='state state-{esc(life['state'])}'>{esc(life['state'])}</b>"]
    if life.get("started_at"):
        parts.append(f"started {format_value(life['started_at'])} UTC")
    if life.get("ended_at"):
        reason = f" ({esc(life['exit_reason'])})" if life.get("exit_reason") else ""
        parts.append(f"ended {format_value(life['ended_at'])} UTC{reason}")
    if life.get("last_activity_at"):
        source = ACTIVITY_FROM.get(life.get("last_activity_from"), "")
        parts.append(f"last activity {format_value(life['last_activity_at'])} UTC"
                     + (f", from {esc(source)}" if source else ""))
    return f"<p id='run-life'>{'; '.join(parts)}.</p>"
