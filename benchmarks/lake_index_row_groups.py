"""The lake's token index in row groups of 2,048 rows against DuckDB's 122,880 (issue 40).

    python benchmarks/lake_index_row_groups.py --base BASE [--copies 3] [--work DIR] [--repeat 3]

BASE is a root `scale_bench.py` generated (e.g. `--work DIR` left `DIR/base`). For each
variant a new lake (SQLite catalog) takes `--copies` copies of the root under distinct run ids
(an ingest each, so the index holds a write each): `2048`, as `warehouse init` sets
node_token_index's `parquet_row_group_size` (warehouse.migrate.LAKE_TABLE_OPTIONS), and the
baseline `122880`, DuckDB's default, the lake before it (the option set back after init).
Then, each in a process of its own, `--repeat` times: the nodes holding token id 4242
(`warehouse token 4242 --nodes`: `search_token_nodes`, the lake's attach included) and its
full rows (`warehouse token 4242`). Prints each variant's figures and the ratio
2048 / 122880 of their means, with the index's Parquet row groups and size.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_bench import _copy_root, _in_own_process, _ingest, _init, _token_nodes, _token_search

VARIANTS = (2048, 122880)


def _set_row_groups(url: str, rows: int) -> None:
    from warehouse.db import LAKE_ALIAS, connect

    with connect(url) as con:
        con.execute(f"CALL {LAKE_ALIAS}.set_option('parquet_row_group_size', '{rows}', table_name => 'node_token_index')")


def _index_layout(url: str) -> tuple[int, int, float]:
    """(files, row groups, MB) of node_token_index's Parquet files."""
    from warehouse.db import LAKE_ALIAS, connect

    with connect(url, read_only=True) as con:
        files = [f for (f,) in con.execute(f"SELECT data_file FROM ducklake_list_files('{LAKE_ALIAS}', "
                                           "'node_token_index')").fetchall()]
        groups = con.execute("SELECT count(DISTINCT (file_name, row_group_id)) FROM parquet_metadata(?)",
                             [files]).fetchone()[0]
    return len(files), groups, sum(Path(f).stat().st_size for f in files) / 1e6


def main() -> None:
    from warehouse.config import resolve_db_url

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="a root scale_bench.py generated")
    parser.add_argument("--copies", type=int, default=3, help="copies of the root each lake takes")
    parser.add_argument("--repeat", type=int, default=3, help="timed lookups of each kind per variant")
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="lake_index_"))
    results = {}
    for rows in VARIANTS:
        lake = work / f"lake_{rows}"
        shutil.rmtree(lake, ignore_errors=True)
        lake.mkdir(parents=True)
        url = resolve_db_url(f"ducklake:sqlite:{lake / 'lake.sqlite'}", lake / "files")
        _in_own_process(_init, 2048, url)
        _in_own_process(_set_row_groups, url, rows)
        for copy in range(1, args.copies + 1):
            root = work / f"root_{copy}"
            shutil.rmtree(root, ignore_errors=True)
            _copy_root(args.base, root, f"20260801_{copy:06d}_bench")
            seconds, _ = _in_own_process(_ingest, 2048, url, str(root))
            shutil.rmtree(root)
            print(f"  {rows}: copy {copy} ingested in {seconds:.1f} s", flush=True)
        nodes = [_in_own_process(_token_nodes, url)[0] for _ in range(args.repeat)]
        full = [_in_own_process(_token_search, url)[0] for _ in range(args.repeat)]
        files, groups, mb = _index_layout(url)
        results[rows] = nodes, full
        print(f"{rows}-row groups: index {files} files, {groups} row groups, {mb:.1f} MB; --nodes "
              + ", ".join(f"{s:.2f}" for s in nodes) + " s; full rows " + ", ".join(f"{s:.2f}" for s in full) + " s",
              flush=True)
    for i, name in enumerate(("--nodes", "full rows")):
        new, old = (statistics.mean(results[v][i]) for v in VARIANTS)
        print(f"{name}: 2048 {new:.2f} s / 122880 {old:.2f} s = {new / old:.2f}x")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
