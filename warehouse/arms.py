"""The arm registry: one definition shared by the warehouse's `arms` table and the trainer.

`warehouse init`/`upgrade` upserts these rows, so a changed arm ships with the package.
Caps and settings are the ones docs/data-roots.md and the seeds give; a value the seeds do not state
is None (NULL), never a guess.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

Q09 = "09-multitask-humanrank"
Q02 = "02-9b-capability-ceiling"

TASKS_09 = (
    "aerial-cactus-identification",
    "dogs-vs-cats-redux-kernels-edition",
    "text-normalization-challenge-english-language",
    "text-normalization-challenge-russian-language",
)


@dataclass(frozen=True)
class Arm:
    name: str
    question_id: str | None
    prompt_cap: int | None
    response_cap: int | None
    total_cap: int | None
    lora_rank: int = 32
    lora_alpha: int = 32
    learning_rate: float | None = None
    gpu_memory_utilization: float | None = None
    adv_estimator: str = "grpo_valid_only"
    model: str | None = None
    siblings_per_expansion: int = 16
    expansions_per_round: int = 1
    tasks: tuple[str, ...] = field(default_factory=tuple)
    notes: str = ""
    # check 16 and the step-1 health gate (warehouse.quality.mismatch): the arm's limits on
    # sampler-vs-trainer logprob mismatch; None: the defaults there (a run's --set wins)
    mismatch_max: float | None = None
    mismatch_share_gt1_max: float | None = None

    def row(self) -> dict:
        """This arm as a row of the `arms` table."""
        row = dataclasses.asdict(self)
        row["tasks"] = list(self.tasks)
        return row

    def with_overrides(self, **overrides) -> "Arm":
        """A copy with some settings changed (`train run --set key=value`)."""
        unknown = set(overrides) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise KeyError(f"unknown arm setting(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **overrides)


def _q09(name: str, caps: tuple[int, int, int] | None, notes: str, util: float | None = None) -> Arm:
    prompt, response, total = caps if caps else (None, None, None)
    return Arm(
        name=name, question_id=Q09, prompt_cap=prompt, response_cap=response, total_cap=total,
        gpu_memory_utilization=util, model="qwen3_5_27b", expansions_per_round=1,
        tasks=TASKS_09, notes=notes,
    )


def _q02(name: str, task: str, notes: str) -> Arm:
    # Data root 002 states no token caps for its leaves: NULL, so cap-based metrics are NULL too.
    return Arm(
        name=name, question_id=Q02, prompt_cap=None, response_cap=None, total_cap=None,
        model="qwen3_5_9b", expansions_per_round=4, tasks=(task,), notes=notes,
    )


ARMS: tuple[Arm, ...] = (
    _q09("hr", (8192, 12288, 20480), "fresh start; crashed pre-rollout (W&B id burned)"),
    _q09("hr_b", (8192, 12288, 20480), "relaunch of hr under W&B id hr_b; logged steps 1-10"),
    _q09("hr16k", (8192, 16384, 24576), "resumed from hr step 5; rollout directory LOST"),
    _q09("hr32k", (12288, 32768, 45056), "resumed from hr step 5; update OOM at 45056, 0 steps"),
    _q09("hr24k", (12288, 24576, 36864), "resumed from hr step 5; killed mid round 6", util=0.3),
    _q09("hr24k_u6", (12288, 24576, 36864), "resumed from hr step 5; steps 6-13", util=0.6),
    _q09("hr24k_u6b", (12288, 24576, 36864),
         "resumed from hr24k_u6 step 10, per-tree seed fix; steps 11-15", util=0.6),
    _q09("hr24k_u6c", (12288, 24576, 36864), "resumed from hr24k_u6b step 15; 0 steps", util=0.6),
    _q09("hr_frozen", None, "frozen-actor control; never launched"),
    _q02("tree_grpo_9b_spooky", "spooky-author-identification",
         "runs spooky_1e4 (lr 1e-4), spooky_3e5 and spooky_3e5_k8s (lr 3e-5)"),
    _q02("tree_grpo_9b_spooky_gputest", "spooky-author-identification",
         "TREE_GPU_TEST_HINT=1 GPU-declaration probe; excluded from capability numbers"),
    _q02("tree_grpo_9b_cactus_gpu", "aerial-cactus-identification", "GPU declaration gate"),
    _q02("tree_grpo_9b_plant_gpu", "plant-pathology-2020-fgvc7", "GPU declaration gate"),
    _q02("tree_grpo_9b_dogscats_gpu", "dogs-vs-cats-redux-kernels-edition",
         "GPU declaration gate; round 1 partial, no W&B run"),
)

QUESTIONS: tuple[dict, ...] = (
    {"question_id": Q09, "title": "Multitask humanrank reward and the response-length cap",
     "data_root": "t2ance/mat-09-multitask-humanrank", "notes": "seed 000"},
    {"question_id": Q02, "title": "9B capability ceiling",
     "data_root": "t2ance/mat-02-9b-capability-ceiling", "notes": "seed 002"},
    {"question_id": "04-reward-model-rewardbench",
     "title": "Preference reward modeling: Bradley-Terry reward model scored by RewardBench",
     "data_root": None, "notes": "seed 004; reward-model runs (runs.kind = 'reward_model')"},
)

_BY_NAME = {arm.name: arm for arm in ARMS}


def get_arm(name: str) -> Arm:
    """The registered arm called `name`; a clear error lists the known ones otherwise."""
    try:
        return _BY_NAME[name]
    except KeyError:
        from warehouse.errors import TerminalError

        raise TerminalError(f"unknown arm {name!r}; known arms: {', '.join(_BY_NAME)}") from None
