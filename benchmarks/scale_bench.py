"""Scale benchmark: what adding a run costs as the warehouse grows (issue 40).

    python benchmarks/scale_bench.py [--size-mb 30] [--file-mb 1] [--lengths 300-24576] [--scale 1,10] [--work DIR]
                                     [--layouts 2048,122880,ducklake] [--export] [--pages]
                                     [--keep] [--json PATH]
    python benchmarks/scale_bench.py --measure WAREHOUSE --base BASE --work DIR [--pages] [--export]
    python benchmarks/scale_bench.py --grow WAREHOUSE --base BASE --work DIR --copies 11-30

Workload: one generated 000-style root of `--size-mb` MB (`ingest.sample.write_bench_root`,
node files of about `--file-mb` MB, 16 nodes each, one response length a file; with `--lengths
SHORTEST-CAP` each response's own, from a few hundred tokens to the cap), copied (hard links)
under distinct run ids.
For each layout (the row-group size a writer attaches the file with: 2048 is this version's,
122880 DuckDB's default, the layout before it; or `ducklake`, a DuckLake with a SQLite catalog
and its Parquet files in the work folder) a fresh warehouse takes copy after copy;
at each scale S of `--scale` (S copies held) it measures, each stage in a process of its own
so that its peak RSS is its own:

* root: the S-th copy's ingest (into the warehouse of S-1 copies; at 1x, into an empty one);
* two-node run: a run of one task-round with 2 nodes, ingested into the warehouse of S copies
  (what a trainer's round commit costs);
* tables: `warehouse tables` (every relation's row count);
* token search: one token id across all runs, through the token index (`warehouse token`,
  warehouse/tokens.py), and through `node_tokens` alone (every array unrolled), same rows;
  and the nodes holding it from the index alone (`warehouse token --nodes`, no array read);
* pages (with `--pages`): each dashboard page (runs, run, nodes, node, compare, quality)
  through Starlette's test client, after one warm-up request, and the node page's token
  section, which the page fetches after it shows (`node_tokens`: the longest response's);
* export (with `--export`): `warehouse export` of the whole warehouse;
* the file's size against the node JSONL it holds, and at the largest scale after
  `warehouse compact`.

Every figure is printed with its growth factor against 1x of the same layout, and the
layouts' ratio at each scale; with `--pages`, each page's seconds with its growth factor
against the 0.5 s target. DuckLake's size is its catalog plus its Parquet files; with
`--compact-lake` its files are merged (`warehouse compact`, timed) before each scale's figures,
then its history let go (`warehouse cleanup --expire-snapshots 0 --older-than 0`, timed: the
files only earlier snapshots read, such as the token index batches an ingest merged, are
deleted; `with_history_mb` is the size before).

With `--keep` the warehouses stay in the work folder for later measurements: the one of the
largest scale as `rg<size>.duckdb` (compacted), and each smaller scale's copied as
`rg<size>_<S>x.duckdb` once its figures are taken; a lake as `lake.sqlite` (its catalog) with
its files in `lake_files/`, as it holds at the largest scale. `--json` writes every
figure to a file as well. `--measure` takes the figures of one scale (the 2-node run, tables,
token searches, pages, export) on a warehouse built earlier, e.g. one `--keep` left.
A WAREHOUSE is a DuckDB file, or a lake's `lake.sqlite` (its files in `lake_files/` beside it).
`--grow` ingests more copies of the root into such a warehouse (copies numbered as given, run
ids `20260801_<copy>_bench`), each in a process of its own, printing each root ingest's
seconds and peak RSS: how 30x is built from a kept 10x, then measured with `--measure`.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

BASE_RUN = "20260801_000000_bench"
TOKEN_ID = 4242
TOKEN_VIEW = f'SELECT * FROM "node_tokens" WHERE "token_id" = {TOKEN_ID} ORDER BY ALL'
PAGE_TARGET_S = 0.5


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _use_layout(row_group_size: int) -> None:
    """Writers attach the file with `row_group_size`-row groups; any size but this version's
    is an earlier layout, whose writes were not padded (warehouse/rowgroups.py)."""
    import warehouse.db
    import warehouse.rowgroups

    if row_group_size != warehouse.db.ROW_GROUP_SIZE:
        warehouse.rowgroups.PADDED_TABLES = {}
    warehouse.db.ROW_GROUP_SIZE = row_group_size


def _init(row_group_size: int, url: str) -> None:
    from warehouse.migrate import init_db

    _use_layout(row_group_size)
    init_db(url)


def _ingest(row_group_size: int, url: str, root: str) -> tuple[float, float]:
    from ingest.pipeline import ingest_roots

    _use_layout(row_group_size)
    t0 = time.perf_counter()
    report = ingest_roots(url, [root])
    assert report.files_failed == 0, report
    return time.perf_counter() - t0, _peak_mb()


def _open_row_group(url: str, row_group_size: int = 2048) -> int | None:
    """The rows in node_payloads' last row group (the one an unpadded append joins and the
    checkpoint rewrites; warehouse/rowgroups.py); 0 when it is full; None on DuckLake, whose
    commits each write Parquet files of their own."""
    from warehouse.config import is_ducklake
    from warehouse.db import connect

    if is_ducklake(url):
        return None
    with connect(url, read_only=True) as con:
        held = con.execute("SELECT max(\"start\" + \"count\") - min(\"start\") FROM pragma_storage_info('node_payloads') "
                           "WHERE column_id = 0 AND segment_type <> 'VALIDITY' AND row_group_id = "
                           "(SELECT max(row_group_id) FROM pragma_storage_info('node_payloads'))").fetchone()[0] or 0
    return 0 if held >= row_group_size else held


def _tables(url: str) -> tuple[float, float]:
    from warehouse.query import list_tables

    t0 = time.perf_counter()
    list_tables(url)
    return time.perf_counter() - t0, _peak_mb()


def _token_search(url: str) -> tuple[float, float, int]:
    from warehouse.db import connect
    from warehouse.tokens import find_token

    with connect(url, read_only=True) as con:
        t0 = time.perf_counter()
        rows = find_token(con, TOKEN_ID).rows
        return time.perf_counter() - t0, _peak_mb(), len(rows)


def _token_nodes(url: str) -> tuple[float, float, int]:
    from warehouse.tokens import search_token_nodes

    t0 = time.perf_counter()
    rows = search_token_nodes(url, TOKEN_ID).rows
    return time.perf_counter() - t0, _peak_mb(), len({r[:6] for r in rows})


def _token_view(url: str) -> tuple[float, float, int]:
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        t0 = time.perf_counter()
        rows = con.execute(TOKEN_VIEW).fetchall()
        return time.perf_counter() - t0, _peak_mb(), len(rows)


def _pages(url: str) -> dict[str, float]:
    """Seconds per dashboard page, each fetched once after a warm-up request (the live page's
    version poll: a page of its own, so no measured page is answered from DuckLake's cache)."""
    from starlette.testclient import TestClient

    from warehouse.db import connect
    from warehouse.serve.app import create_app

    with connect(url, read_only=True) as con:
        runs = [r for (r,) in con.execute('SELECT "run_id" FROM "runs" ORDER BY 1').fetchall()]
        node = con.execute('SELECT "node_id" FROM "nodes" WHERE "run_id" = ? ORDER BY "n_response_tokens" DESC '
                           'LIMIT 1', [runs[0]]).fetchone()[0]
    paths = {"runs": "/", "run": f"/runs/{runs[0]}", "nodes": f"/runs/{runs[0]}/nodes",
             "node": f"/runs/{runs[0]}/nodes/{node}", "node_tokens": f"/runs/{runs[0]}/nodes/{node}?part=tokens",
             "compare": f"/compare?run={runs[0]}&run={runs[-1]}", "quality": "/quality"}
    seconds = {}
    with TestClient(create_app(url)) as client:
        assert client.get(f"/api/runs/{runs[0]}/version").status_code == 200
        for name, path in paths.items():
            t0 = time.perf_counter()
            answer = client.get(path)
            seconds[f"page_{name}_s"] = time.perf_counter() - t0
            assert answer.status_code == 200, (path, answer.status_code)
    return seconds


def _export(url: str, out: str) -> tuple[float, float]:
    from warehouse.export import export_parquet

    t0 = time.perf_counter()
    export_parquet(url, out, overwrite=True)
    return time.perf_counter() - t0, _peak_mb()


def _compact(url: str) -> tuple[float, float]:
    from warehouse.maintenance import compact

    t0 = time.perf_counter()
    compact(url)
    return time.perf_counter() - t0, _peak_mb()


def _cleanup(url: str) -> tuple[float, float]:
    """`warehouse cleanup --expire-snapshots 0 --older-than 0` (no writer runs meanwhile)."""
    from warehouse.maintenance import cleanup

    t0 = time.perf_counter()
    cleanup(url, 0, expire_older_than_s=0)
    return time.perf_counter() - t0, _peak_mb()


def _in_own_process(fn, *args):
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


# --- the roots ---------------------------------------------------------------------------

def _copy_root(base: Path, out: Path, run_id: str, files: int | None = None, lines: int | None = None) -> int:
    """`base`'s run under `run_id` (hard links), or its first `files` files cut to `lines`
    lines; returns the node bytes written."""
    src_run = base / BASE_RUN
    total = 0
    for i, src in enumerate(sorted(src_run.rglob("*.jsonl"))):
        if files is not None and i >= files:
            break
        dst = out / run_id / src.relative_to(src_run)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if lines is None:
            os.link(src, dst)
        else:
            with src.open("rb") as f:
                dst.write_bytes(b"".join(f.readline() for _ in range(lines)))
        total += dst.stat().st_size
    return total


def cut_two_node(base: Path, work: Path, tag: str) -> tuple[Path, int]:
    """A 2-node run (`base`'s first node file cut to 2 lines) under run id
    `20260802_<tag>_twonode`, in a root of its own under `work`: (root, node bytes)."""
    two = work / f"two_{tag}"
    shutil.rmtree(two, ignore_errors=True)
    return two, _copy_root(base, two, f"20260802_{tag}_twonode", files=1, lines=2)


def print_means(seconds: dict[str, list[float]], new: str, old: str, unit: str = "writes") -> None:
    """Each variant's mean, min and max seconds, and the ratio of `new`'s mean to `old`'s."""
    import statistics

    means = {name: statistics.mean(v) for name, v in seconds.items()}
    for name, v in seconds.items():
        print(f"{name:22s} mean {means[name]:.2f} s (min {min(v):.2f}, max {max(v):.2f}) over {len(v)} {unit}")
    print(f"{new} / {old}: {means[new] / means[old]:.2f}x")


# --- one layout ---------------------------------------------------------------------------

class Warehouse:
    """Where one layout's copies go: a DuckDB file (attached with `row_group_size`-row row
    groups) or a DuckLake (SQLite catalog, Parquet files under a folder of its own)."""

    def __init__(self, label: str, work: Path):
        from warehouse.config import resolve_db_url

        self.label, self.lake = label, label == "ducklake"
        self.row_group_size = 2048 if self.lake else int(label)
        if self.lake:
            self.paths = [work / "lake.sqlite", work / "lake_files"]
            self.url = resolve_db_url(f"ducklake:sqlite:{self.paths[0]}", self.paths[1])
        else:
            self.paths = [work / f"rg{label}.duckdb", work / f"rg{label}.duckdb.wal"]
            self.url = f"duckdb:///{self.paths[0]}"
        self.remove()

    def remove(self) -> None:
        for p in self.paths:
            shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)

    def size_mb(self) -> float:
        return _size_mb(self.paths)


def _size_mb(paths: list[Path]) -> float:
    """MB of the files at `paths` (a folder: every file under it)."""
    files = [f for p in paths if p.exists() for f in ([p] if p.is_file() else p.rglob("*"))]
    return sum(f.stat().st_size for f in files if f.is_file()) / 1e6


def measure_held(url: str, row_group_size: int, base: Path, work: Path, tag: str, row: dict,
                 pages: bool, export: bool) -> int:
    """The figures of a warehouse as it holds (each stage a process of its own) into `row`:
    a 2-node run's ingest (run id tagged `tag`), `warehouse tables`, the token searches, and
    with `pages`/`export` the pages and the export. Returns the node bytes the 2-node run added."""
    two, added = cut_two_node(base, work, tag)
    # an unpadded small write's cost follows the rows in the last row group, which it rewrites
    row["open_row_group_payloads"] = _in_own_process(_open_row_group, url, row_group_size)
    row["two_node_s"], row["two_node_rss_mb"] = _in_own_process(_ingest, row_group_size, url, str(two))
    shutil.rmtree(two)
    row["tables_s"], row["tables_rss_mb"] = _in_own_process(_tables, url)
    row["token_search_s"], row["token_search_rss_mb"], found = _in_own_process(_token_search, url)
    row["token_nodes_s"], row["token_nodes_rss_mb"], holding = _in_own_process(_token_nodes, url)
    try:  # the baseline: the view alone, which a large warehouse's budget may not hold
        row["token_view_s"], row["token_view_rss_mb"], viewed = _in_own_process(_token_view, url)
        assert found == viewed, (found, viewed)  # the same rows, the view's way and the index's
    except Exception as exc:  # DuckDB's OutOfMemoryException, raised in the child
        if "out of memory" not in str(exc).lower():
            raise
        row["token_view_error"] = str(exc).splitlines()[0][:120]
    assert 0 < holding <= found or holding == found == 0, (holding, found)  # nodes of those rows
    if pages:
        row.update(_in_own_process(_pages, url))
    if export:
        out = work / "export"
        row["export_s"], row["export_rss_mb"] = _in_own_process(_export, url, str(out))
        shutil.rmtree(out)
    return added


def measure_layout(wh: Warehouse, base: Path, work: Path, scales: list[int],
                   export: bool, pages: bool, keep: bool = False,
                   results: dict[int, dict[str, float]] | None = None, taken=lambda: None,
                   compact_lake: bool = False) -> dict[int, dict[str, float]]:
    """Fill `results` (scale -> figures), calling `taken` after each scale's figures."""
    url, row_group_size = wh.url, wh.row_group_size
    _in_own_process(_init, row_group_size, url)
    held, results = 0, {} if results is None else results
    for copy in range(1, max(scales) + 1):
        root = work / f"root_{copy}"
        shutil.rmtree(root, ignore_errors=True)
        held += _copy_root(base, root, f"20260801_{copy:06d}_bench")
        seconds, rss = _in_own_process(_ingest, row_group_size, url, str(root))
        shutil.rmtree(root)
        if copy not in scales:
            continue
        row = results[copy] = {"root_s": seconds, "root_rss_mb": rss}
        if wh.lake and compact_lake:  # as a team's lake is kept: its files merged before it is read,
            row["compact_s"], row["compact_rss_mb"] = _in_own_process(_compact, url)
            # its history then let go: the files only earlier snapshots read (merged, deleted) go
            row["with_history_mb"] = wh.size_mb()
            row["cleanup_s"], row["cleanup_rss_mb"] = _in_own_process(_cleanup, url)
        held += measure_held(url, row_group_size, base, work, f"{copy:06d}", row, pages, export)
        row["file_mb"] = wh.size_mb()
        row["jsonl_mb"] = held / 1e6
        row["file_vs_jsonl"] = row["file_mb"] / row["jsonl_mb"]
        if copy == max(scales) and not wh.lake:  # compacting earlier would change what later copies meet
            row["compact_s"], row["compact_rss_mb"] = _in_own_process(_compact, url)
            row["compacted_vs_jsonl"] = wh.size_mb() / row["jsonl_mb"]
        print(f"  {wh.label} {copy}x: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                                  for k, v in row.items()), flush=True)
        taken()
        if keep and not wh.lake and copy != max(scales):
            for path in wh.paths:
                if path.exists():
                    shutil.copyfile(path, path.with_name(path.name.replace(".duckdb", f"_{copy}x.duckdb")))
    if not keep:
        wh.remove()
    return results


def _held_url(path: Path) -> str:
    """The URL of a warehouse `--keep` left: a DuckDB file, or a lake's catalog `lake.sqlite`
    (its files in `lake_files/` beside it)."""
    from warehouse.config import resolve_db_url

    if path.suffix == ".sqlite":
        return resolve_db_url(f"ducklake:sqlite:{path}", path.parent / "lake_files")
    return f"duckdb:///{path}"


def _held_mb(path: Path) -> float:
    """The size of a warehouse `--keep` left (a lake's: its catalog and its files)."""
    return _size_mb([path] + ([path.parent / "lake_files"] if path.suffix == ".sqlite" else []))


def grow(url: str, base: Path, work: Path, copies: range, json_path: Path | None) -> None:
    """Ingest copy after copy of the root into the warehouse at `url`, each in a process of
    its own; print (and with `json_path`, write) each root ingest's seconds and peak RSS."""
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for copy in copies:
        root = work / f"root_{copy}"
        shutil.rmtree(root, ignore_errors=True)
        mb = _copy_root(base, root, f"20260801_{copy:06d}_bench") / 1e6
        seconds, rss = _in_own_process(_ingest, 2048, url, str(root))
        shutil.rmtree(root)
        rows.append({"copy": copy, "root_mb": mb, "root_s": seconds, "root_rss_mb": rss})
        print(f"  copy {copy}: {mb:,.1f} MB in {seconds:.1f} s, peak {rss:,.0f} MB", flush=True)
        if json_path:
            json_path.write_text(json.dumps(rows, indent=1))


def print_table(results: dict[int, dict[int, dict[str, float]]], scales: list[int]) -> None:
    ours, *others = list(results)
    keys = list(results[ours][scales[-1]])
    head = ["figure"] + [f"{_name(lay)} {s}x" for lay in results for s in scales]
    head += [f"{_name(lay)} {s}x/1x" for lay in results for s in scales[1:]]
    head += [f"{_name(ours)}/{_name(o)} {s}x" for o in others for s in scales]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in keys:
        cells = [_cell(results[lay][s].get(key)) for lay in results for s in scales]
        cells += [_ratio(results[lay][s].get(key), results[lay][scales[0]].get(key), "x")
                  for lay in results for s in scales[1:]]
        cells += [_ratio(results[ours][s].get(key), results[o][s].get(key)) for o in others for s in scales]
        print(f"| {key} | " + " | ".join(cells) + " |")


def print_pages(results: dict[str, dict[int, dict[str, float]]], scales: list[int]) -> None:
    """Each page's seconds at each scale with its growth factor, against the target."""
    for layout, by_scale in results.items():
        for key in [k for k in by_scale[scales[-1]] if k.startswith("page_")]:
            times = [by_scale[s][key] for s in scales]
            growth = ", ".join(f"{s}x/1x {t / times[0]:.2f}x" for s, t in zip(scales[1:], times[1:]))
            over = [f"{s}x" for s, t in zip(scales, times) if t > PAGE_TARGET_S]
            verdict = f"over {PAGE_TARGET_S} s at {', '.join(over)}" if over else f"<= {PAGE_TARGET_S} s"
            print(f"{layout} {key[5:-2]}: " + ", ".join(f"{s}x {t:.3f} s" for s, t in zip(scales, times))
                  + f" ({growth}; {verdict})")


def _name(layout: str) -> str:
    return layout if layout == "ducklake" else f"rg{layout}"


def _cell(value: float | str | None) -> str:
    return "" if value is None else f"{value:.2f}" if isinstance(value, (int, float)) else str(value)


def _ratio(a: float | str | None, b: float | str | None, unit: str = "") -> str:
    numbers = all(isinstance(v, (int, float)) for v in (a, b))
    return f"{a / b:.2f}{unit}" if numbers and b else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=30.0, help="the root's size (1x)")
    parser.add_argument("--file-mb", type=float, default=1.0, help="about how large a node file is")
    parser.add_argument("--lengths", default=None, metavar="SHORTEST-CAP",
                        help="each response's own length, log-uniform from SHORTEST to CAP tokens, one in ten "
                             "at CAP (e.g. 300-24576); default: one length per node file, from --file-mb")
    parser.add_argument("--scale", default="1,10", help="scales to measure, in copies of the root")
    parser.add_argument("--layouts", default="2048,122880",
                        help="row-group sizes of a DuckDB file, or ducklake (SQLite catalog); the first is "
                             "compared with the others")
    parser.add_argument("--pages", action="store_true", help="also time each dashboard page")
    parser.add_argument("--export", action="store_true", help="also time `warehouse export`")
    parser.add_argument("--compact-lake", action="store_true",
                        help="ducklake: run `warehouse compact` (timed) before each scale's figures")
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the warehouses in the work folder (needs --work): each scale's DuckDB file, "
                             "a lake as it holds at the largest scale")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure to this JSON file")
    parser.add_argument("--measure", type=Path, default=None, metavar="DB",
                        help="only measure this existing warehouse (a DuckDB file, or a lake's lake.sqlite) as it "
                             "holds (a 2-node run is added), "
                             "with --base, the root its copies came from (the folder of its run)")
    parser.add_argument("--base", type=Path, default=None, help="with --measure: the generated root")
    parser.add_argument("--tag", default="999999", help="with --measure: the 2-node run's id tag (new each time)")
    parser.add_argument("--grow", type=Path, default=None, metavar="DB",
                        help="ingest more copies of the root (--copies) into this existing warehouse (a DuckDB "
                             "file, or a lake's lake.sqlite)")
    parser.add_argument("--copies", default=None, metavar="FIRST-LAST",
                        help="with --grow: the copies' numbers (their run ids), e.g. 11-30")
    args = parser.parse_args()
    if args.grow:
        if args.base is None or args.work is None or args.copies is None:
            parser.error("--grow needs --base, --work and --copies")
        first, last = (int(n) for n in args.copies.split("-"))
        grow(_held_url(args.grow), args.base, args.work, range(first, last + 1), args.json)
        return
    if args.measure:
        if args.base is None or args.work is None:
            parser.error("--measure needs --base and --work")
        args.work.mkdir(parents=True, exist_ok=True)
        row = {}
        measure_held(_held_url(args.measure), 2048, args.base, args.work, args.tag, row, args.pages, args.export)
        row["file_mb"] = _held_mb(args.measure)
        print(json.dumps(row, indent=1))
        if args.json:
            args.json.write_text(json.dumps(row, indent=1))
        return
    if args.keep and args.work is None:
        parser.error("--keep needs --work (the folder the warehouses stay in)")
    scales = sorted({int(s) for s in args.scale.split(",")})
    work = args.work or Path(tempfile.mkdtemp(prefix="scale_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    from ingest.sample import write_bench_root

    base = work / "base"
    shutil.rmtree(base, ignore_errors=True)
    lengths = tuple(int(n) for n in args.lengths.split("-")) if args.lengths else None
    write_bench_root(base, target_mb=args.size_mb, file_mb=args.file_mb, lengths=lengths)
    size = sum(p.stat().st_size for p in base.rglob("*.jsonl")) / 1e6
    nodes = sum(1 for p in base.rglob("*.jsonl") for _ in p.open("rb"))
    mix = f", response lengths {lengths[0]}-{lengths[1]} (log-uniform, 1 in 10 at the cap)" if lengths else ""
    print(f"root: {size:.1f} MB of node JSONL, {nodes} nodes{mix}; scales {scales}; work {work}", flush=True)
    results = {}
    for layout in args.layouts.split(","):
        results[layout] = {}

        def taken() -> None:
            if args.json:
                args.json.write_text(json.dumps({"root_mb": size, "nodes": nodes, "results": results}, indent=1))
        measure_layout(Warehouse(layout, work), base, work, scales, args.export, args.pages, args.keep,
                       results[layout], taken, args.compact_lake)
    print_table(results, scales)
    if args.pages:
        print_pages(results, scales)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
