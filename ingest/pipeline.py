"""`warehouse ingest`: data roots -> warehouse, every file fully in or fully out.

Incremental and idempotent: a file whose size and mtime match its `sources` row is skipped
without reading; a file with a new mtime is hashed and skipped when the content hash matches;
a changed file replaces its rows. The files of a batch share one commit; a crash or Ctrl-C
leaves every file fully in or fully out (the open batch rolls back) and the next run picks up
where this one stopped; a file that fails to land leaves the others as its own transaction
would have (`_Walker.land_group`).
Memory is bounded by the largest single file, never by the root.
"""
from __future__ import annotations

import contextlib
import errno
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ingest import derive, load
from ingest.discover import FileJob, Layout, Problem, discover, require_runs
from ingest.lines import MAX_LINE_BYTES, split_lines, whole_text
from ingest.manifest import infer_entry, load_manifests
from ingest.derive import upsert_task_round
from ingest.rm_ingest import load_rm_files, rm_warnings
from ingest.sources import (content_hash, known_sources, lookup_source_ids, open_source, open_sources,
                            record_errors, touch_source)
from warehouse import rowgroups, tokens
from warehouse.db import checkpoint_each_commit, is_ducklake_connection, is_write_conflict, transaction
from warehouse.errors import CATALOG_FULL, DatabaseLockedError, DiskError, disk_errno, disk_path, free_space

EXIT_OK, EXIT_REJECTED, EXIT_FAILED = 0, 3, 1


@dataclass
class IngestReport:
    roots: list[str] = field(default_factory=list)
    runs: int = 0
    files_total: int = 0
    files_loaded: int = 0
    files_skipped: int = 0
    files_failed: int = 0
    entries_skipped: int = 0     # second names of a file, round_x directories, link cycles
    rows: int = 0
    rows_rejected: int = 0       # over every file of the roots, skipped ones included
    bytes_total: int = 0
    bytes_read: int = 0
    lost_runs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # one line each: file, line, reason

    @property
    def exit_code(self) -> int:
        return EXIT_REJECTED if self.rows_rejected or self.files_failed else EXIT_OK


# Called with (None, total bytes, 0) once at the start, then (job, bytes, rows) per file.
Progress = Callable[[FileJob | None, int, int], None]


BATCH_BYTES = 64 * 1024 * 1024  # raw bytes normalized per query plan (bounds memory)
LAKE_RETRY_S = 120.0  # how long a DuckLake ingest keeps redoing commits other writers win
ROW_KINDS = ("nodes", "summary", "timing", "step_metrics", "wandb_history", "wandb_config",
             "wandb_summary")
RENDERED = ("tree", "transcript")
ROOT_MANIFEST = "manifest.toml"


def ingest_roots(db_url: str, roots, manifest_files=(), *, progress: Progress | None = None,
                 max_line_bytes: int = MAX_LINE_BYTES, batch_bytes: int = BATCH_BYTES,
                 layouts: list[Layout] | None = None) -> IngestReport:
    """Ingest every root into the warehouse at `db_url` (which must be at schema head)."""
    from warehouse.db import connect
    from warehouse.revision import require_head

    layouts = layouts if layouts is not None else [discover(root) for root in roots]
    manifests = _manifests(layouts, manifest_files)
    report = _new_report(layouts)
    if progress:
        progress(None, report.bytes_total, 0)
    with connect(db_url) as con:
        require_head(con, db_url)
        for layout in layouts:
            require_runs(layout)
        lake = is_ducklake_connection(con)
        marks = (len(report.warnings), len(report.lost_runs))

        def forget_lost_attempt():  # a DuckLake commit that lost the race is redone
            del report.warnings[marks[0]:], report.lost_runs[marks[1]:]

        transaction(con, lambda: register_runs(con, layouts, manifests, report), wait_s=LAKE_RETRY_S,
                    before_retry=forget_lost_attempt)
        checkpoint_each_commit(con)  # each batch's commit writes its rows once (warehouse/db.py)
        first_write = tokens.next_write(con)
        _load_files(_Walker(con, report, progress, max_line_bytes, lake), layouts, batch_bytes)
        if report.files_loaded:
            _merge_token_writes(con, first_write, report)
        # the file: the next open needs no WAL replay (DuckLake's CHECKPOINT is maintenance
        # that rewrites files under other writers: left to the operator, docs/ducklake.md)
        if (report.files_loaded or report.files_failed) and not lake:
            _checkpoint(con)
    return report


def _merge_token_writes(con, first_write: int, report: IngestReport) -> None:
    """The batches' token index as one write (warehouse/tokens.py): far fewer index rows for
    each lookup to check and each checkpoint to rewrite; on DuckLake far fewer files, as a
    file whose rows are all deleted leaves the table (the 1.3 GB root's 20 batch files each
    read by every lookup: at 10x, 200). Every row is already committed and the index is whole
    without it, so a failure is a warning, not a failed ingest. On DuckLake the writes from
    this ingest's first on may hold another writer's too: merged with them, the same live
    entries (a lookup joins entries to writes by write and source id), and a commit that
    loses to another writer's is redone."""
    try:
        transaction(con, lambda: tokens.merge_writes(con, first_write), wait_s=LAKE_RETRY_S)
    except Exception as exc:  # noqa: BLE001 (the rows are in; say why the index stays in batches)
        report.warnings.append(f"the token index of this ingest stays one write per batch (token searches "
                               f"read more of it): merging its writes failed: {str(exc).strip().splitlines()[0]}")


def _checkpoint(con) -> None:
    """Every file is committed (in the WAL); writing them into the file needs room too."""
    try:
        con.execute("CHECKPOINT")
    except Exception as exc:  # only a full or read-only disk is reworded
        code = disk_errno(exc)
        if code is None:
            raise
        where = disk_path(exc) or _write_location(con)
        raise DiskError(f"every file is loaded and committed, but the closing CHECKPOINT could not "
                        f"write {where} ({free_space(where)}): the rows wait in its WAL. Free space "
                        "there; the next command that opens the warehouse for writing finishes it.") from None


def _manifests(layouts: list[Layout], manifest_files) -> dict:
    """Shipped manifests, then each root's own manifest.toml (the trainer's export writes
    one), then the --manifest files."""
    in_roots = [path for layout in layouts
                if os.path.isfile(path := os.path.join(layout.root, ROOT_MANIFEST))]
    return load_manifests([*in_roots, *manifest_files])


def _new_report(layouts: list[Layout]) -> IngestReport:
    report = IngestReport(roots=[layout.root for layout in layouts])
    report.warnings += [f"skipped {path}: not a run (no round_<N>/ or timing.jsonl inside)"
                        for layout in layouts for path in layout.skipped]
    jobs = [job for layout in layouts for job in layout.files]
    report.files_total, report.bytes_total = len(jobs), sum(job.size for job in jobs)
    return report


def _load_files(walker: "_Walker", layouts: list[Layout], batch_bytes: int) -> None:
    jobs = [job for layout in layouts for job in layout.files]
    for problem in (p for layout in layouts for p in layout.problems):
        walker.problem(problem)
    walker.rendered([job for job in jobs if job.kind in RENDERED])
    for kind in ROW_KINDS:
        walker.batches(kind, list(_batches([job for job in jobs if job.kind == kind],
                                           batch_bytes)))
    load_rm_files(walker, [job for job in jobs if job.kind.startswith("rm_")])
    rm_runs = sorted({run.run_id for layout in layouts for run in layout.rm_runs})
    walker.report.warnings += rm_warnings(walker.con, rm_runs)


def _batches(jobs: list[FileJob], batch_bytes: int):
    batch, size = [], 0
    for job in jobs:
        if batch and size + job.size > batch_bytes:
            yield batch
            batch, size = [], 0
        batch.append(job)
        size += job.size
    if batch:
        yield batch


# --- runs ------------------------------------------------------------------------------------

def register_runs(con, layouts: list[Layout], manifests: dict, report: IngestReport) -> None:
    """A runs row per run directory found, plus the LOST runs the applying manifests name."""
    from ingest.derive import upsert_rounds, upsert_run

    on_disk = {run.run_id: run for layout in layouts for run in layout.runs}
    applying = {manifests[r]["manifest"] for r in on_disk if r in manifests}
    for run_id, run in sorted(on_disk.items()):
        entry = manifests.get(run_id)
        if entry is None:
            entry = infer_entry(run_id)
            report.warnings.append(
                f"run {run_id} has no manifest entry: ingested as kind {entry['kind']!r} with "
                "arm unknown; add it with --manifest FILE")
        upsert_run(con, _run_row(run_id, entry, lost=run.lost, path=run.path))
        if run.lost:
            report.lost_runs.append(run_id)
            report.warnings.append(f"run {run_id} is LOST: {run.path} is a dangling symlink "
                                   f"(-> {run.target}); recorded with lost = true")
    for run_id, entry in sorted(manifests.items()):
        if entry["lost"] and run_id not in on_disk and entry["manifest"] in applying:
            upsert_run(con, _run_row(run_id, entry, lost=True, path=None))
            report.lost_runs.append(run_id)
            report.warnings.append(f"run {run_id} is LOST (per {entry['manifest']}); "
                                   "recorded with lost = true")
    # every round directory, even one whose files all failed
    upsert_rounds(con, [r for layout in layouts for r in layout.rounds])
    rm_runs = [run for layout in layouts for run in layout.rm_runs]
    for run in rm_runs:  # its manifest.json fills the row in; here only: it exists
        register_rm_run(con, run.run_id, run.path)
    report.runs = len(on_disk) + len(rm_runs)


def register_rm_run(con, run_id: str, path: str) -> None:
    """A `runs` row of kind reward_model unless the run has one (its manifest's, kept)."""
    from ingest.derive import insert_new_run
    from ingest.rm_records import QUESTION_ID, RUN_KIND

    # started_at NULL until the run's manifest.json lands (ingest.rm_records writes the whole row)
    insert_new_run(con, {"run_id": run_id, "question_id": QUESTION_ID, "kind": RUN_KIND,
                         "source_path": path, "started_at": None})


def _run_row(run_id: str, entry: dict, *, lost: bool, path: str | None) -> dict:
    keys = ("question_id", "arm", "kind", "wandb_run", "resumed_from", "model", "notes",
            "overrides", "seed", "settings_sources")
    return {"run_id": run_id, "lost": lost, "source_path": path,
            **{k: entry.get(k) for k in keys}}


# --- files ---------------------------------------------------------------------------------

class _Walker:
    """Loads files batch by batch; the files of a batch land in one transaction."""

    def __init__(self, con, report: IngestReport, progress: Progress | None, max_line_bytes: int,
                 lake: bool = False):
        self.con, self.report, self.progress = con, report, progress
        self.max_line_bytes = max_line_bytes
        self.lake = lake
        self.known = known_sources(con)
        self.next_id = max((v[0] for v in self.known.values()), default=0) + 1
        self.lost_since = None  # when DuckLake commits started losing to other writers
        self.lake_floor = 0  # DuckLake: the next id past those claimed in this transaction

    def claim(self, path: str) -> tuple[int, bool]:
        """(source id, whether the path was loaded before). The file has one writer, so ids
        are counted here; on DuckLake other writers commit meanwhile, so the id is read in
        the transaction (a path another process loaded is replaced, never duplicated)."""
        return self.claim_all([path])[0]

    def claim_all(self, paths: list[str]) -> list[tuple[int, bool]]:
        """`claim` for each path in turn; on DuckLake with one lookup for them all (a lookup
        per file read the sources table and the catalog again each time)."""
        if self.lake:
            found, next_id = lookup_source_ids(self.con, paths)
            claimed = []
            for path in paths:
                if path in found:
                    claimed.append((found[path], True))
                    continue
                # a group's sources rows are inserted together after every claim, so max() + 1
                # alone would give each new file of the group the same id
                source_id = max(next_id, self.lake_floor)
                self.lake_floor = source_id + 1
                claimed.append((source_id, False))
            return claimed
        claimed = []
        for path in paths:
            if path in self.known:
                claimed.append((self.known[path][0], True))
            else:
                self.next_id += 1
                claimed.append((self.next_id - 1, False))
        return claimed

    def read(self, job: FileJob, fetched: tuple | None = None) -> tuple | None:
        """(data, hash, lines) when the file must be loaded; None when skipped or failed.

        `fetched` is what `fetch` returned for the job (on another thread), if it ran.
        """
        prev = self.known.get(job.path)
        data, digest, lines = fetched or self.fetch(job, split=False)
        if data is None:
            return self._skip(job, prev)
        if isinstance(data, OSError):
            return self.fail(job, f"unreadable: {data.strerror or data}")
        self.report.bytes_read += len(data)
        if prev and prev[3] == digest and prev[5] is None:
            transaction(self.con, lambda: touch_source(self.con, job.path, job.mtime_ns))
            return self._skip(job, prev)
        return data, digest, lines

    def fetch(self, job: FileJob, split: bool = True) -> tuple:
        """(data or the OSError or None when unchanged, hash, lines): file work only, no
        warehouse access, so it runs on a reader thread while DuckDB works on a batch."""
        prev = self.known.get(job.path)
        if prev and prev[1] == job.size and prev[2] == job.mtime_ns and prev[3] and prev[5] is None:
            return None, None, None
        try:
            with open(job.path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            return exc, None, None
        return data, content_hash(data), self._lines(job, data) if split else None

    def _skip(self, job: FileJob, prev: tuple) -> None:
        self.report.files_skipped += 1
        self.report.rows_rejected += prev[4] or 0
        self._tick(job, 0)
        return None

    def _tick(self, job: FileJob, rows: int) -> None:
        if self.progress:
            self.progress(job, job.size, rows)

    # row files
    def batches(self, kind: str, batches: list[list[FileJob]]) -> None:
        """Each batch in turn, the next one read, hashed and split on a reader thread
        meanwhile (file reads, BLAKE2b and the splitter release the GIL; DuckDB runs)."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as reader:
            ahead = [reader.submit(self._fetch_all, jobs) for jobs in batches[:1]]
            for i, jobs in enumerate(batches):
                fetched = ahead.pop().result()
                if i + 1 < len(batches):
                    ahead.append(reader.submit(self._fetch_all, batches[i + 1]))
                self.batch(kind, jobs, fetched)

    def _fetch_all(self, jobs: list[FileJob]) -> list[tuple]:
        return [self.fetch(job) for job in jobs]

    def batch(self, kind: str, jobs: list[FileJob], fetched: list | None = None) -> None:
        fetched = fetched or [None] * len(jobs)
        todo = [(job, *got) for job, pre in zip(jobs, fetched)
                if (got := self.read(job, pre)) is not None]
        if not todo:
            return
        try:
            staged = load.stage(self.con, load.STAGED_KIND[kind],
                                [(key, self._lines(job, data) if lines is None else lines)
                                 for key, (job, data, _, lines) in enumerate(todo)])
        except Exception as exc:  # noqa: BLE001 - find the one file that breaks the batch
            self.stop_on_disk_error(exc, todo[0][0])
            if len(todo) == 1:
                self.fail(todo[0][0], f"could not load: {_first_line(exc)}")
                return
            for job, _, _, _ in todo:
                self.batch(kind, [job])
            return
        keyed = [(key, job, digest) for key, (job, _, digest, _) in enumerate(todo)]
        while keyed:
            keyed = self.land_group(keyed, staged)
        load.drop_staged(self.con)

    def _lines(self, job: FileJob, data: bytes):
        if job.kind in ("summary", "wandb_config", "wandb_summary"):
            return whole_text(data)
        return split_lines(data, self.max_line_bytes)

    def land_group(self, keyed: list[tuple[int, FileJob, str]], staged, at_once: bool = True) -> list:
        """Land the files of `keyed` in one transaction; returns the files still to land.

        One commit per group rather than per file: each commit writes its rows to DuckDB's
        WAL, and committing a batch at once costs a third as much. Every file is still fully
        in or fully out. When file k raises, the group rolls back, files before k land again
        in one transaction, file k is failed exactly as a transaction of its own would have
        failed, and the files after it are returned to be landed next. Node files land
        `at_once` (`_land_nodes_at_once`); when that raises, the group is landed again file
        by file to find the file that breaks it.
        """
        first_id, landed = self.next_id, []
        at_once = at_once and len(keyed) > 1 and keyed[0][1].kind == "nodes"
        self.lake_floor = 0
        self.con.execute("BEGIN TRANSACTION")
        try:
            if at_once:
                landed = self._land_nodes_at_once(keyed, staged)
            else:
                for key, job, digest in keyed:
                    landed.append(self._land_one(key, job, digest, staged))
        except BaseException as exc:
            self.con.execute("ROLLBACK")
            if not isinstance(exc, Exception):  # Ctrl-C: every file of the group is out
                raise
            self.stop_on_disk_error(exc, keyed[min(len(landed), len(keyed) - 1)][1])
            if self.lake and is_write_conflict(exc):  # another writer won: the group again
                return self._lost_commit(exc, keyed, first_id)
            self.next_id = first_id
            if at_once:
                return self.land_group(keyed, staged, at_once=False)
            k = len(landed)
            before = keyed[:k]
            while before:
                before = self.land_group(before, staged)
            self.claim(keyed[k][1].path)  # the id a transaction of its own would have used
            self.fail(keyed[k][1], f"could not load: {_first_line(exc)}")
            return keyed[k + 1:]
        try:
            padded = not self.lake and rowgroups.pad(self.con)  # the group's own row groups
            self.con.execute("COMMIT")
        except Exception as exc:
            with contextlib.suppress(Exception):  # a failed COMMIT has ended it already
                self.con.execute("ROLLBACK")
            self.stop_on_disk_error(exc, keyed[0][1])
            if not (self.lake and is_write_conflict(exc)):
                raise
            return self._lost_commit(exc, keyed, first_id)
        if padded:
            rowgroups.drop_pads(self.con)
        self.lost_since = None
        for (key, job, digest), (source_id, rows, rejected) in zip(keyed, landed):
            self._landed(job, key, staged, digest, source_id, rows, rejected)
        return []

    def stop_on_disk_error(self, exc: Exception, job: FileJob) -> None:
        """A full or read-only disk under the warehouse (the file, or a DuckLake's data path)
        would fail every later file the same way: the ingest stops at the first, that
        file's transaction rolled back and the files landed before it kept."""
        code = disk_errno(exc)
        if code is None:
            return
        where = disk_path(exc) or _write_location(self.con, catalog=CATALOG_FULL in str(exc))
        folder = os.path.dirname(where) if where.endswith(".parquet") else where
        loaded = f"the {self.report.files_loaded} files loaded before it stay and are skipped"
        if code == errno.ENOSPC:
            orphans = (" ('warehouse cleanup --older-than 0' deletes the stopped commit's Parquet while "
                       "no other writer runs)") if self.lake else ""
            raise DiskError(f"the ingest stopped at {job.path}: no space left on the device for {folder} "
                            f"({free_space(folder)}). Free space there{orphans} and run 'warehouse ingest' "
                            f"again: {loaded}.") from None
        why = "read-only file system" if code == errno.EROFS else "permission denied"
        raise DiskError(f"the ingest stopped at {job.path}: cannot write {folder}: {why}. Move the "
                        f"warehouse where you can write and run 'warehouse ingest' again: {loaded}.") from None

    def _lost_commit(self, exc: Exception, keyed: list, first_id: int) -> list:
        """Back off, then hand the whole group back to be landed again (DuckLake only); give
        up after LAKE_RETRY_S of losing, with nothing of the group written."""
        self.next_id = first_id
        now = time.monotonic()
        self.lost_since = self.lost_since or now
        if now - self.lost_since > LAKE_RETRY_S:
            raise DatabaseLockedError(f"other writers kept winning the commit for {LAKE_RETRY_S:.0f} s "
                                      f"({_first_line(exc)}); run the ingest again") from exc
        time.sleep(random.uniform(0.01, 0.2))
        return keyed

    def _land_one(self, key: int, job: FileJob, digest: str, staged) -> tuple[int, int, int]:
        source = self._open(key, job, digest, staged)
        _land(self.con, job, source, key, staged)
        return source.source_id, staged.rows[key], len(staged.errors[key])

    def _open(self, key: int, job: FileJob, digest: str, staged):
        return open_source(self.con, **self._source_spec(key, job, digest, staged))

    def _source_spec(self, key: int, job: FileJob, digest: str, staged,
                     claimed: tuple[int, bool] | None = None) -> dict:
        source_id, existed = claimed or self.claim(job.path)
        return dict(source_id=source_id, existed=existed, path=job.path, kind=job.kind,
                    run_id=job.run_id, round=job.round, task=job.task, size_bytes=job.size,
                    mtime_ns=job.mtime_ns, digest=digest, rows=staged.rows[key],
                    rejected=len(staged.errors[key]), error=None)

    def _land_nodes_at_once(self, keyed: list[tuple[int, FileJob, str]], staged) -> list:
        """The node files of a group: their sources rows, then all their nodes and payloads
        in one INSERT each, then each file's derived rows."""
        claims = self.claim_all([job.path for _, job, _ in keyed])
        specs = [self._source_spec(key, job, digest, staged, claimed)
                 for (key, job, digest), claimed in zip(keyed, claims)]
        sources = dict(zip((key for key, _, _ in keyed), open_sources(self.con, specs)))
        load.insert_nodes(self.con, sources)
        derive.refresh_sibling_groups(self.con, [(s.run_id, s.round, s.task) for s in sources.values()])
        derive.mark_node_files(self.con, [(s.run_id, s.round, s.task, s.source_id) for s in sources.values()])
        load.derive_nodes(self.con, sources, staged, {key: job.round_path for key, job, _ in keyed})
        return [(sources[key].source_id, staged.rows[key], len(staged.errors[key]))
                for key, _, _ in keyed]

    def _landed(self, job: FileJob, key: int, staged, digest: str, source_id: int, rows: int,
                rejected: int) -> None:
        self.known[job.path] = (source_id, job.size, job.mtime_ns, digest, rejected, None)
        self.report.files_loaded += 1
        self.report.rows += rows
        self.report.rows_rejected += rejected
        for line_no, reason in sorted(staged.errors[key].items())[:MAX_REPORTED_LINES]:
            self.report.errors.append(f"{job.path}:{line_no}: {reason}")
        self._tick(job, rows)

    # rendered views: no rows, so all of them in one transaction
    def rendered(self, jobs: list[FileJob]) -> None:
        todo = [(job, got[0], got[1]) for job in jobs if (got := self.read(job)) is not None]
        first_id = self.next_id

        def work():
            ids = []
            for job, _, digest in todo:
                source_id, existed = self.claim(job.path)
                ids.append((source_id, existed))
                source = open_source(self.con, source_id=source_id, existed=existed,
                                     path=job.path, kind=job.kind, run_id=job.run_id,
                                     round=job.round, task=job.task, size_bytes=job.size,
                                     mtime_ns=job.mtime_ns, digest=digest)
                flag = "has_tree" if job.kind == "tree" else "has_transcript"
                load.mark_rendered(self.con, source, flag, job.round_path)
            return ids

        def forget_lost_attempt():
            self.next_id = first_id

        try:
            ids = transaction(self.con, work, wait_s=LAKE_RETRY_S, before_retry=forget_lost_attempt) if todo else []
        except Exception as exc:
            self.stop_on_disk_error(exc, todo[0][0])
            raise
        for (job, _, digest), (source_id, _) in zip(todo, ids):
            self.known[job.path] = (source_id, job.size, job.mtime_ns, digest, 0, None)
            self.report.files_loaded += 1
            self._tick(job, 0)

    # whole-file failures
    def fail(self, job: FileJob, reason: str) -> None:
        self.report.files_failed += 1
        self.report.errors.append(f"{job.path}: {reason}")
        self._record_problem(job, reason)

    def _record_problem(self, job: FileJob, reason: str) -> None:
        """The entry's `sources` row (error set, so a later ingest looks again) and its line-0
        ingest_errors row."""
        self._tick(job, 0)
        if (self.known.get(job.path) or (None,) * 6)[5] == reason:
            return None  # recorded exactly so last time: leave the warehouse as it is

        def work():
            source_id, existed = self.claim(job.path)
            source = open_source(self.con, source_id=source_id, existed=existed, path=job.path,
                                 kind=job.kind, run_id=job.run_id, round=job.round,
                                 task=job.task, size_bytes=job.size, mtime_ns=job.mtime_ns,
                                 error=reason)
            record_errors(self.con, source, {0: reason})
            if job.kind == "nodes":  # the task-round was seen, even if its file is unreadable
                upsert_task_round(self.con, job.run_id, job.round, job.task,
                                  {"node_file_present": True})
            return source_id

        source_id = transaction(self.con, work)
        self.known[job.path] = (source_id, job.size, job.mtime_ns, None, 0, reason)
        return None

    def problem(self, problem: Problem) -> None:
        job = FileJob(problem.path, "skipped" if problem.skipped else "unreadable", 0, 0,
                      run_id=problem.run_id)
        self.report.files_total += 1
        if not problem.skipped:
            return self.fail(job, problem.reason)
        # skipped on purpose: nothing of the root is lost, so a warning, not a failure
        self.report.entries_skipped += 1
        self.report.warnings.append(f"skipped {problem.path}: {problem.reason}")
        self._record_problem(job, f"skipped: {problem.reason}")


def _land(con, job: FileJob, source, key: int, staged) -> None:
    if job.kind == "nodes":
        load.land_nodes(con, source, key, staged, job.round_path)
    elif job.kind == "summary":
        load.land_summary(con, source, key, staged, job.round_path)
    elif job.kind == "timing":
        load.land_timing(con, source, key, staged)
    elif job.kind == "step_metrics":
        load.land_step_metrics(con, source, key, staged)
    elif job.kind == "wandb_history":
        load.land_wandb_history(con, source, key, staged, job.wandb_run)
    else:
        column = "config" if job.kind == "wandb_config" else "summary"
        load.land_wandb_object(con, source, key, staged, job.wandb_run, column)


def _write_location(con, catalog: bool = False) -> str:
    """Where the warehouse writes: a DuckLake's data path (or with `catalog`, its catalog),
    else the database file."""
    if is_ducklake_connection(con):
        if catalog:
            path = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
                               ).fetchone()[0]
            return path.split(":", 1)[-1]  # sqlite:/path/catalog.sqlite
        return con.execute("SELECT data_path FROM ducklake_settings(current_database())").fetchone()[0]
    return con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
                       ).fetchone()[0]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


MAX_REPORTED_LINES = 20


def build_demo(db_url: str, out_dir, seed: int = 0, progress: Progress | None = None
               ) -> IngestReport:
    """`warehouse demo`: create or upgrade the warehouse, write the sample root, ingest it."""
    from ingest.sample import write_sample_root
    from warehouse.migrate import init_db

    init_db(db_url)
    root = write_sample_root(out_dir, seed=seed)
    return ingest_roots(db_url, [root], progress=progress)
