"""Time every report view against one scan of the nodes table.

Target (issue 4): all six views over a warehouse built from a 500 MB root answer in under
1 s in total. Two ways to get the warehouse:

* default: write a root of realistic 2-12 MB node files (`ingest.sample.write_bench_root`)
  and ingest it, exactly as a user would;
* `--synthetic-nodes N`: insert N node rows (and their task-rounds, groups and timing rows)
  straight into a fresh warehouse, to see how the views scale far beyond a 500 MB root.

Each view is answered in full (`SELECT * ... fetchall()`), best of `--repeat` runs; the
baseline is the best time to scan every column of `nodes` once (`SELECT * FROM nodes` into
Arrow). Usage::

    python benchmarks/views_bench.py --root-mb 500 --workdir /tmp/vb
    python benchmarks/views_bench.py --synthetic-nodes 1000000 --workdir /tmp/vb
"""
from __future__ import annotations

import time
from pathlib import Path

from _warehouse import fresh_warehouse, warehouse_from_cli  # benchmarks/_warehouse.py

VIEWS = ("task_round_metrics", "round_metrics", "run_metrics", "run_status_counts",
         "decision_rule", "invariant_violations")



def build_synthetic(workdir: Path, n_nodes: int) -> str:
    """N nodes in 16-sibling groups, 4 tasks x rounds per run, 10 runs in one lineage chain."""
    from warehouse.config import db_path_from_url
    import duckdb

    url = fresh_warehouse(workdir)
    con = duckdb.connect(db_path_from_url(url))
    per_run = max(1, n_nodes // 10)
    con.execute("""
        INSERT INTO runs ("run_id", "arm", "kind", "lost", "resumed_from_run")
        SELECT 'run_' || i, 'hr24k_u6', 'training', FALSE,
               CASE WHEN i > 0 THEN 'run_' || (i - 1) END
        FROM range(10) AS t(i)""")
    con.execute(f"""
        INSERT INTO nodes ("source_id", "line_no", "run_id", "round", "task", "node_id",
                           "parent_id", "sibling_group", "mode", "status", "reward",
                           "test_metric", "oriented", "n_response_tokens", "schema_kind",
                           "resources_gpu", "decl_malformed", "exc_type")
        SELECT i // 16, i % 16 + 1, 'run_' || (i // {per_run}), (i % {per_run}) // 64,
               'task_' || ((i // 16) % 4), printf('%012x', i),
               CASE WHEN (i // 16) % 3 = 0 THEN NULL ELSE printf('%012x', greatest(i - 64, 0)) END,
               'g' || (i // 16),
               CASE (i // 16) % 3 WHEN 0 THEN 'draft' WHEN 1 THEN 'improve' ELSE 'debug' END,
               CASE WHEN hash(i) % 3 = 0 THEN 'ok' ELSE 'crashed' END,
               CASE WHEN hash(i) % 3 = 0 THEN (hash(i) % 1000) / 1000.0 ELSE -0.5 END,
               (hash(i) % 997) / 997.0, (hash(i) % 997) / 997.0,
               hash(i) % 30000, 'B', hash(i) % 2, hash(i) % 7 = 0,
               CASE WHEN hash(i) % 11 = 0 THEN 'GpuIdleError' END
        FROM range({n_nodes}) AS t(i)""")
    con.execute("""
        INSERT INTO task_rounds ("run_id", "round", "task", "summary_present", "node_file_present",
                                 "has_tree", "has_transcript", "gen_llm_seconds", "gen_exec_seconds")
        SELECT DISTINCT "run_id", "round", "task", TRUE, TRUE, TRUE, TRUE, 100.0, 50.0 FROM nodes""")
    con.execute("""
        INSERT INTO steps ("source_id", "line_no", "run_id", "step", "total_s", "gen_s",
                           "update_actor_s")
        SELECT 1000000 + row_number() OVER (), 1, "run_id", "round", 100.0, 60.0, 40.0
        FROM (SELECT DISTINCT "run_id", "round" FROM nodes)""")
    con.close()
    print(f"synthetic warehouse: {n_nodes} nodes")
    return url




def best_of(con, sql: str, repeat: int, arrow: bool = False) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        con.sql(sql).to_arrow_table() if arrow else con.execute(sql).fetchall()
        times.append(time.perf_counter() - t0)
    return min(times)


def measure(url: str, repeat: int) -> dict:
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        present = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        n_nodes = con.execute("SELECT count(*) FROM nodes").fetchall()[0][0]
        scan = best_of(con, "SELECT * FROM nodes", repeat, arrow=True)
        views = {v: best_of(con, f'SELECT * FROM "{v}"', repeat) for v in VIEWS if v in present}
    return {"nodes": n_nodes, "scan_s": scan, "views": views}


def report(result: dict) -> None:
    total = sum(result["views"].values())
    print(f"nodes: {result['nodes']}; one scan of nodes (all columns): {result['scan_s'] * 1e3:.1f} ms")
    for view, seconds in result["views"].items():
        print(f"  {view:<22} {seconds * 1e3:8.1f} ms  ({seconds / result['scan_s']:.1f}x the scan)")
    print(f"all {len(result['views'])} views: {total * 1e3:.1f} ms = "
          f"{total / result['scan_s']:.1f}x one nodes scan; target < 1000 ms: "
          f"{'met' if total < 1.0 else 'MISSED'}")


def main() -> None:
    with warehouse_from_cli(__doc__, "bench_views", 5, build_synthetic) as (url, args):
        report(measure(url, args.repeat))


if __name__ == "__main__":
    main()
