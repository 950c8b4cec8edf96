"""`warehouse serve`: a thin command over :mod:`warehouse.serve.server` (imports stay inside)."""
from __future__ import annotations

import click


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0: every interface; the pages have no login).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port to listen on (0: any free port).")
@click.option("--refresh", "refresh_s", type=click.FloatRange(min=0.5), default=5.0, show_default=True,
              help="Seconds between a run page's checks for new rounds.")
@click.pass_obj
def serve(obj: dict, host: str, port: int, refresh_s: float) -> None:
    """Serve a read-only dashboard of the warehouse in the browser, fully offline.

    Pages: Runs (state, last activity; sort, search, pick columns, filter by question, arm,
    kind, state), a run's settings, checkpoints and charts per task with its step metrics and
    phase times (smoothing, log y, x as round, global step or wall time; redrawn while the run
    is written), the rollout browser (a run's nodes by task, round, status, reward) and each
    node's tree and response token by token, Compare (runs or arms per round, with the
    decision rule at step k), Quality (invariant violations). docs/dashboard.md describes
    them. On the file every request opens the warehouse read-only and closes it, so `train
    run` and `warehouse ingest` can write meanwhile; on DuckLake the lake is attached once and
    each request reads the newest snapshot.
    """
    from warehouse.serve.server import serve as run_server

    run_server(obj["db_url"], host, port, refresh_s, log=click.echo)
