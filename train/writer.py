"""Writing training rounds into the warehouse (and, optionally, as a classic data root).

Every write goes through the ingest's record-level API (:mod:`ingest.records`): one schema,
one normalization. A finished round is committed in ONE transaction (run row, every task's
nodes, payloads, sibling groups and summary, and the step's timing row and `step_metrics`
row when there is a step), so a crash mid-round leaves no partial round. The write connection is opened only to commit, so
other processes can read the warehouse while training runs.

A run owns its id: `RoundWriter.claim` inserts the run row before round 1 and refuses an id
that is already in the warehouse, so a round never merges into or replaces another run's rows.
Rewriting a round of one's own run replaces that round's rows (the same sources), idempotently.

If another process holds the warehouse file's lock, `warehouse.db.connect` retries with
backoff for `lock_wait_s` (on DuckLake, where there is no lock, `transaction` redoes a
commit that lost to another writer's for as long); past that, or when the warehouse's disk is
full or read-only (a commit that fails with ENOSPC, EROFS or EACCES), the round is spooled to disk
in the data-root layout (data roots 000/002, plus `<run>/step_metrics.jsonl`) and a one-line notice
says how to ingest it (`RoundWriter.load_command`): a round is never lost, and `warehouse
ingest` of the spool lands the same rows the commit would have.

`export_root` additionally writes every round as the classic data-root files
(`<run>/round_<N>/<task>__<ts>.jsonl`, `__summary_<ts>.json`, `__tree.txt`, `__transcript.md`,
`<run>/timing.jsonl`, `<run>/step_metrics.jsonl`) plus `manifest.toml` with the run's metadata; `warehouse ingest` of that
export (with `--manifest`) yields the same rows.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from warehouse.errors import DatabaseLockedError, DiskError, TerminalError, TransientError

LOCK_WAIT_S = 60.0


class RunIdTakenError(TerminalError):
    """Another run already holds this run id in the warehouse."""


class RoundsSpooledError(TransientError):
    """The run ended with rounds that are in its spool, not in the warehouse: exit 3, the
    exit code of an ingest that left rows out, with the one command that loads them."""

    exit_code = 3

    @classmethod
    def of(cls, report) -> "RoundsSpooledError":
        """From a `train.run.RunReport` that has spooled rounds."""
        rounds = ", ".join(str(r) for r in report.spooled)
        return cls(f"run {report.run_id}: round(s) {rounds} are not in the warehouse but spooled to "
                   f"{report.spool_root}. Load them with: {report.load_command}")


@dataclass
class RunRow:
    """The `runs` row of a training run (ingest.records.upsert_run's input)."""

    run_id: str
    arm: str | None
    question_id: str | None
    model: str
    seed: int
    overrides: dict = field(default_factory=dict)
    notes: str = ""
    kind: str = "training"
    resumed_from: dict | None = None  # {"run": ..., "step": ...}
    # overrides key -> its source (train.settings.recorded_sources); a key added later without
    # one (the model directory, once loaded) is the run's own pick
    sources: dict = field(default_factory=dict)

    def settings_sources(self) -> dict | None:
        return {key: self.sources.get(key, "run") for key in self.overrides} or None

    def row(self, source_path: str) -> dict:
        return {"run_id": self.run_id, "arm": self.arm, "question_id": self.question_id, "kind": self.kind,
                "model": self.model, "seed": self.seed, "overrides": self.overrides or None,
                "notes": self.notes or None, "source_path": source_path, "resumed_from": self.resumed_from,
                "settings_sources": self.settings_sources()}


@dataclass
class RoundWrite:
    """Everything one round adds: per task the node records and summary; when the round was
    learnt from, its step's timing row and metrics."""

    round: int
    records: dict  # task -> list of node records
    summaries: dict  # task -> summary dict (None when the task has none)
    step: dict | None = None  # {"step", "total_s", "phases_s"}
    metrics: dict | None = None  # {"step", "loss", "kl", ...} (train.learn.store.step_metrics_record)

    @classmethod
    def of(cls, round_no: int, result, step: dict | None = None, metrics: dict | None = None) -> "RoundWrite":
        """A round's write from its train.rollout.round.RoundResult and, when it was learnt
        from, its step's timing row and the step's metrics."""
        from train.learn.store import step_metrics_record

        recorded = step_metrics_record(round_no, metrics) if metrics is not None else None
        return cls(round_no, result.records, result.summaries, step, recorded)


class RoundWriter:
    def __init__(self, db_url: str | None, run: RunRow, export_root: str | Path | None = None,
                 spool_root: str | Path | None = None, lock_wait_s: float = LOCK_WAIT_S, log=print):
        self.db_url = db_url
        self.run = run
        self.export_root = Path(export_root) if export_root else None
        self.spool_root = Path(spool_root) if spool_root else Path(f"spool_{run.run_id}")
        self.lock_wait_s = lock_wait_s
        self.log = log
        self.steps: list[dict] = []  # every step so far (the export's timing.jsonl)
        self.metrics: list[dict] = []  # every step's metrics so far (the export's step_metrics.jsonl)
        self.spooled_steps: list[dict] = []  # only the spooled rounds' steps (the spool's timing.jsonl)
        self.spooled_metrics: list[dict] = []  # and their metrics (the spool's step_metrics.jsonl)
        self.spooled: list[int] = []
        self.claimed = False  # the run row is ours in the warehouse

    def claim(self) -> None:
        """Insert the run row now, before any round; RunIdTakenError when the id is taken.

        When the warehouse stays locked the claim waits for the first round's commit, which
        makes it in the same transaction (a generated id is unique by construction anyway)."""
        if self.db_url is None:
            return
        try:
            claim_run(self.db_url, self.run, self.lock_wait_s)
            self.claimed = True
        except DatabaseLockedError as exc:
            self.log(f"Warning: run {self.run.run_id} not yet recorded ({exc}); its first committed "
                     "round will record it.")

    def write(self, rnd: RoundWrite) -> str:
        """Commit the round (else spool it) and export it; returns 'db', 'spool' or 'export'."""
        self.steps += [rnd.step] if rnd.step else []
        self.metrics += [rnd.metrics] if rnd.metrics else []
        if self.export_root is not None:
            export_round(self.export_root, self.run, rnd, self.steps, self.metrics)
        if self.db_url is None:
            return "export"
        try:
            commit_round(self.db_url, self.run, rnd, self.lock_wait_s, claim=not self.claimed)
            self.claimed = True
            return "db"
        except DatabaseLockedError as exc:
            return self._spool_instead(rnd, exc)
        except RunIdTakenError as exc:  # taken while the warehouse was locked at the claim
            self._spool(rnd)
            raise RunIdTakenError(f"{exc} Round {rnd.round} is spooled to {self.spool_root}: rename "
                                  f"{self.run.run_id} there (directory and manifest entry) before "
                                  "ingesting it.") from None
        except Exception as exc:
            from warehouse.errors import disk_errno

            if disk_errno(exc) is None and not isinstance(exc, DiskError):
                raise
            return self._spool_instead(rnd, exc)  # the warehouse's disk is full or read-only

    def _spool_instead(self, rnd: RoundWrite, why: Exception) -> str:
        """Spool the round the warehouse did not take; a spool that cannot be written either is
        one error naming both, so the round is never dropped unsaid."""
        try:
            self._spool(rnd)
        except OSError as exc:
            raise DiskError(f"round {rnd.round} of run {self.run.run_id} is lost: the warehouse refused it "
                            f"({str(why).strip().splitlines()[0] if str(why).strip() else type(why).__name__}) "
                            f"and its spool {self.spool_root} could not be written ({exc}). Free space "
                            "there or pass --spool-root on another disk.") from None
        first = str(why).strip().splitlines()[0] if str(why).strip() else type(why).__name__
        self.log(f"Warning: round {rnd.round} not committed ({first}); spooled to {self.spool_root}. "
                 f"Load it later with: {self.load_command()}")
        return "spool"

    def load_command(self) -> str:
        """The command that loads the spool into the warehouse (shell-quoted, absolute paths:
        it works from any directory)."""
        import shlex

        spool = self.spool_root.resolve()
        return shlex.join(["warehouse", "--db", self.db_url, "ingest", str(spool),
                           "--manifest", str(spool / "manifest.toml")])

    def _spool(self, rnd: RoundWrite) -> None:
        # the spool holds only what the warehouse lacks, so ingesting it adds no duplicate
        self.spooled_steps += [rnd.step] if rnd.step else []
        self.spooled_metrics += [rnd.metrics] if rnd.metrics else []
        export_round(self.spool_root, self.run, rnd, self.spooled_steps, self.spooled_metrics)
        self.spooled.append(rnd.round)


def source_path(run_id: str, round: int, task: str) -> str:
    return f"train://{run_id}/round_{round}/{task}"


def claim_run(db_url: str, run: RunRow, lock_wait_s: float = LOCK_WAIT_S) -> None:
    """Record the run row of a new run; RunIdTakenError when another run has the id."""
    from warehouse.db import connect, transaction

    with connect(db_url, wait_s=lock_wait_s) as con:
        transaction(con, lambda: _claim(con, run), wait_s=lock_wait_s)


def _claim(con, run: RunRow) -> None:
    from ingest.records import insert_new_run

    if not insert_new_run(con, run.row(f"train://{run.run_id}")):
        raise RunIdTakenError(f"run {run.run_id} is already in the warehouse (another run has this id). "
                              "Pass a new --run-id, or leave it out for a fresh one.")


def commit_round(db_url: str, run: RunRow, rnd: RoundWrite, lock_wait_s: float = LOCK_WAIT_S,
                 claim: bool = False) -> None:
    """The round's rows, and its step's timing and metrics rows, in one transaction; the
    connection is held only for this. Each step is its own source, so a round spooled in between never duplicates
    or drops another round's timing row. `claim`: the run row is not recorded yet, so record it
    here, refusing (RunIdTakenError, nothing written) an id another run holds."""
    from ingest.records import load_step_metrics, load_steps, load_task_round, upsert_run
    from warehouse.db import checkpoint_each_commit, connect, transaction

    def work():
        if claim:
            _claim(con, run)
        else:
            upsert_run(con, run.row(f"train://{run.run_id}"))
        for task, records in rnd.records.items():
            load_task_round(con, run_id=run.run_id, round=rnd.round, task=task, records=records,
                            summary=rnd.summaries.get(task), source_path=source_path(run.run_id, rnd.round, task))
        if rnd.step:
            load_steps(con, run.run_id, [rnd.step], source_path=f"train://{run.run_id}/round_{rnd.round}/timing")
        if rnd.metrics:
            load_step_metrics(con, run.run_id, [rnd.metrics],
                              source_path=f"train://{run.run_id}/round_{rnd.round}/step_metrics")

    # on DuckLake no lock is waited for: a commit that loses to another writer's is redone
    with connect(db_url, wait_s=lock_wait_s) as con:
        checkpoint_each_commit(con)  # the round's payloads written once, not logged then checkpointed
        transaction(con, work, wait_s=lock_wait_s)


def export_round(root: Path, run: RunRow, rnd: RoundWrite, steps: list[dict],
                 metrics: list[dict] = ()) -> Path:
    """The round as data-root files under `root/<run_id>/round_<N>/`; returns that directory."""
    from train.rollout.render import render_transcript, render_tree

    round_dir = root / run.run_id / f"round_{rnd.round}"
    round_dir.mkdir(parents=True, exist_ok=True)
    stamp = int(time.time())
    for task, records in rnd.records.items():
        _write_jsonl(round_dir / f"{task}__{stamp}.jsonl", records)
        summary = rnd.summaries.get(task)
        if summary is not None:
            (round_dir / f"{task}__summary_{stamp}.json").write_text(json.dumps(summary, indent=1))
        if records:
            (round_dir / f"{task}__{stamp}__tree.txt").write_text(render_tree(records))
            (round_dir / f"{task}__{stamp}__transcript.md").write_text(render_transcript(task, records))
    if steps:
        _write_jsonl(root / run.run_id / "timing.jsonl", steps)
    if metrics:
        _write_jsonl(root / run.run_id / "step_metrics.jsonl", metrics)
    write_manifest(root / "manifest.toml", run)
    return round_dir


def write_manifest(path: Path, run: RunRow) -> None:
    """The run's metadata as an ingest manifest (merging runs already listed there)."""
    import tomllib

    import tomli_w

    doc = tomllib.loads(path.read_text()) if path.is_file() else {"runs": {}}
    entry = {"kind": run.kind, "model": run.model, "seed": run.seed}
    entry.update({k: v for k, v in (("arm", run.arm), ("question_id", run.question_id),
                                    ("notes", run.notes)) if v})
    if run.overrides:
        entry["overrides"] = run.overrides
        entry["settings_sources"] = run.settings_sources()
    if run.resumed_from:
        entry["resumed_from"] = run.resumed_from
    doc.setdefault("runs", {})[run.run_id] = entry
    path.write_text(tomli_w.dumps(doc))


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    tmp.replace(path)
