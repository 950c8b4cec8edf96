"""Publishing a reward-model run into the warehouse, through the record API of the
reward-model tables (:mod:`ingest.rm_records`), and as that layout's data root.

What lands, and when (each flush is one `warehouse.db.transaction`, so an interrupted run
leaves the warehouse consistent, holding everything up to its last flush, and a flush that
loses a DuckLake commit race is redone):
- at the start: the run (`runs` kind reward_model, `rm_runs`) and its job;
- after each artifact: the step log so far, the job's progress, every artifact (retained or
  not, in progress order);
- after each evaluation: its summary, official only with a receipt that matches, which
  :func:`ingest.rm_layout.write_evaluation_files` writes only once the summary is complete;
- at the end: the budget facts (wall clock, reserve, seconds, stop reason, steps, members,
  snapshots published and retained).

Each write goes to a fixed source path (`train://<run>/steps.jsonl`, ...), so rewriting the
whole log replaces the previous write: re-running a flush is idempotent. `--export-root`
then exports the run's rows in the data-root layout (:func:`ingest.rm_layout.export_run`);
`warehouse ingest` of it gives the same rows. Without a warehouse (`--no-db`) the rows go to a
scratch warehouse that only feeds the export.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from warehouse.vocabulary import RUNNING

TASK_BUNDLED, TASK_SEED = "bt_rm_synthetic", "ultrafeedback_bt_rm_rewardbench"
AGENT = "train rm"


@dataclass
class Publisher:
    run_id: str
    job: str
    phase: str
    db_url: str
    run_dir: Path  # where evaluation summaries and receipts are written as they finish
    export_root: Path | None
    scratch: Path | None  # the scratch warehouse's directory (--no-db with --export-root)
    job_row: dict
    steps: list = field(default_factory=list)
    artifacts: dict = field(default_factory=dict)  # progress -> record
    published: int = 0

    @classmethod
    def open(cls, opts, ctx, log) -> "Publisher | NullPublisher":
        """Write the run and its job; a NullPublisher when there is neither warehouse nor export."""
        if opts.db_url is None and opts.export_root is None:
            return NullPublisher()
        scratch = None
        db_url = opts.db_url
        if db_url is None:
            from warehouse.migrate import init_db

            scratch = Path(tempfile.mkdtemp(prefix="rm_scratch_"))
            db_url = f"duckdb:///{scratch / 'warehouse.duckdb'}"
            init_db(db_url)
        job_row = {"job": opts.phase, "phase": opts.phase, "pairs": len(ctx.pairs),
                   "steps_planned": opts.members * opts.member_steps, "micro_batch": 1,
                   "grad_accum": opts.grad_accum, "learning_rate": opts.lr, "seed": opts.seed,
                   "members": opts.members, "status": RUNNING}
        pub = cls(run_id=ctx.run_id, job=opts.phase, phase=opts.phase, db_url=db_url, run_dir=ctx.out_dir,
                  export_root=Path(opts.export_root) if opts.export_root else None, scratch=scratch,
                  job_row=job_row)
        pub._commit(lambda con, api: (api.write_run(con, _manifest(opts, ctx), run_dir=str(ctx.out_dir)),
                                      api.write_jobs(con, pub.run_id, [pub.job_row])))
        return pub

    def step(self, row: dict) -> None:
        self.steps.append({"job": self.job, **row})

    def artifact(self, artifact) -> None:
        """Record (or update) an artifact, then flush the step log, the job and every artifact."""
        self.artifacts[artifact.progress] = {
            "job": self.job, "progress": artifact.progress, "path": str(artifact.path),
            "parameters": artifact.parameters, "dtype": artifact.dtype,
            "format": "full" if artifact.kind == "full_model" else "lora_delta",
            "loadable": artifact.loadable, "retained": artifact.retained, "members": artifact.members,
            "save_seconds": round(artifact.seconds, 3)}
        self.published = len(self.artifacts)
        self._flush_training()

    def evaluation(self, summary: dict, path: Path, receipt_path: Path | None) -> None:
        """The evaluation's row from the files just written: official only when the receipt
        exists and matches the summary's bytes."""
        receipt = json.loads(receipt_path.read_text()) if receipt_path else None
        self._commit(lambda con, api: api.write_evaluation(
            con, self.run_id, summary, receipt=receipt, data=path.read_bytes(),
            receipt_path=str(receipt_path) if receipt_path else None))

    def finish(self, *, stop_reason, steps, members, train_seconds, wall_clock, reserve, total_seconds,
               steps_per_member, retained) -> None:
        """The budget facts and the job's final state; then the export, if asked."""
        self.job_row.update(steps_done=steps, seconds=round(train_seconds, 3), status=stop_reason,
                            peak_mem_gb=max((s["peak_mem_gib"] * 2**30 / 1e9 for s in self.steps), default=None))
        budget = {self.phase: {"wall_clock_s": wall_clock, "reserve_s": reserve, "train_s": round(train_seconds, 3),
                               "elapsed_s": round(total_seconds, 3), "stop_reason": stop_reason, "steps": steps,
                               "members": members, "steps_per_member": steps_per_member,
                               "snapshots_published": self.published, "snapshots_retained": retained}}
        self._flush_training(lambda con, api: api.write_budget(con, self.run_id, budget))
        if self.export_root is not None:
            self._export()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _flush_training(self, extra=None) -> None:
        def write(con, api):
            api.write_steps(con, self.run_id, self.steps)
            api.write_jobs(con, self.run_id, [self.job_row])
            api.write_artifacts(con, self.run_id, [self.artifacts[p] for p in sorted(self.artifacts)])
            if extra:
                extra(con, api)
        self._commit(write)

    def _commit(self, write) -> None:
        """`write(con, api)` in one transaction (redone from the start when a DuckLake commit
        loses to another writer's, as every trainer write is); a record the API rejects is an
        ingest_errors row."""
        from ingest import rm_records as api
        from warehouse.db import connect, transaction

        with connect(self.db_url) as con:
            transaction(con, lambda: write(con, api))

    def _export(self) -> None:
        from ingest.rm_layout import export_run
        from warehouse.db import connect

        with connect(self.db_url, read_only=True) as con:
            export_run(con, self.run_id, self.export_root)


class NullPublisher:
    """Neither a warehouse nor an export (`--no-db`): the run directory's files are the record."""

    def step(self, row: dict) -> None:
        pass

    def artifact(self, artifact) -> None:
        pass

    def evaluation(self, summary: dict, path, receipt_path) -> None:
        pass

    def finish(self, **budget) -> None:
        pass


def _manifest(opts, ctx) -> dict:
    from train.rm.scoring import FINAL_EVALUATOR, PROXY_EVALUATOR

    manifest = {"run_id": ctx.run_id, "task": TASK_BUNDLED if opts.pairs is None else TASK_SEED, "agent": AGENT,
                "base_model": opts.model, "train_pairs": len(ctx.pairs),
                "proxy_evaluator": PROXY_EVALUATOR.format(n=len(ctx.proxy_index)), "final_evaluator": FINAL_EVALUATOR,
                "seed": opts.seed, "notes": json.dumps(opts.sets, sort_keys=True) if opts.sets else None}
    if opts.reference is not None:  # --set reference=74.568936: the views read gap and ratio against it
        manifest["reference"] = {"evaluator": FINAL_EVALUATOR, "score": opts.reference, "split": "full",
                                 "n": len(ctx.eval_rows), "direction": "maximize", "protocol": "same-protocol reference"}
    return manifest
