"""The rollout vocabulary: the names and values every layer agrees on, defined once.

The trainer writes them (train.env), the ingest and the sample warehouse produce them
(ingest), the data-quality checks test them (warehouse.quality) and the SQL views filter on
them (sql/*.sql, which cannot import this module: tests/sql/test_vocabulary.py reads the
views' literals and compares them with these). Definitions: docs/data-roots.md (node fields)
and docs/metrics.md (invariants 1 and 2).
"""
from __future__ import annotations

from dataclasses import dataclass

# --- node statuses: the six the warehouse accepts (invariant 2)
OK = "ok"
CRASHED = "crashed"
TIMEOUT = "timeout"
NO_CODE = "no_code"
NO_SUBMISSION = "no_submission"
INVALID_SUBMISSION = "invalid_submission"
STATUSES = (OK, CRASHED, TIMEOUT, NO_CODE, NO_SUBMISSION, INVALID_SUBMISSION)

# --- run states (the run_state view's "state"): a trainer records how its run ended (the
# first three); the view derives the rest from its heartbeat, a dangling run directory, or no
# trainer record at all
FINISHED, FAILED, STOPPED_RUN = "finished", "failed", "stopped"
RUNNING, LOST, IMPORTED = "running", "lost", "imported"
END_STATES = (FINISHED, FAILED, STOPPED_RUN)
RUN_STATES = (RUNNING, FINISHED, FAILED, STOPPED_RUN, LOST, IMPORTED)

# --- step phases: the keys of a timing.jsonl row's "phases_s" (the seeds' names), each a
# `<phase>_s` column of `steps`, in the order the steps table, the reports and the sample
# warehouse list them. Only steps that save a checkpoint have the last.
CHECKPOINT_PHASE = "save_checkpoint"
STEP_PHASES = ("update_weights", "gen", "old_log_prob", "ref", "adv", "update_actor", CHECKPOINT_PHASE)
STEP_PHASE_COLUMNS = tuple(f"{phase}_s" for phase in STEP_PHASES)

# --- expansion modes (invariant 2: draft exactly when the node has no parent)
DRAFT, IMPROVE, DEBUG = "draft", "improve", "debug"
MODES = (DRAFT, IMPROVE, DEBUG)

# --- sentinel rewards: a node that is not ok gets one of these (invariant 1); an ok node gets
# its humanrank in [0, 1]
FAILED_REWARD = -0.5  # crashed, timeout, no_code, no_submission, invalid_submission
IDLE_REWARD = -0.2  # killed for leaving its CPU or GPU idle: exactly the idle exc types
INFRASTRUCTURE_REWARD = -1.0  # the sandbox itself failed, not the node's code
SENTINEL_REWARDS = (FAILED_REWARD, IDLE_REWARD, INFRASTRUCTURE_REWARD)

# --- exc_type names the trainer gives a node it judged without a traceback of its own
CPU_IDLE_ERROR = "CpuIdleError"  # left its CPU under idle_cpu_pct for the idle window
GPU_IDLE_ERROR = "GpuIdleError"  # a node given GPUs left them under idle_gpu_pct instead
IDLE_EXC_TYPES = (CPU_IDLE_ERROR, GPU_IDLE_ERROR)  # the only exc types with IDLE_REWARD
# The sandbox failed (staging, spawn, namespaces): status crashed, INFRASTRUCTURE_REWARD. Data
# roots from other harnesses name their infrastructure failures otherwise (the sample
# warehouse's PodEvictedError), so the checks go by the reward, never by this name.
INFRASTRUCTURE_EXC_TYPE = "InfrastructureError"
TIMEOUT_EXC_TYPE = "TimeoutError"  # status timeout: the wall-clock or CPU-time limit
MEMORY_EXC_TYPE = "MemoryError"  # status crashed: a GPU node over its memory (RLIMIT_AS's stand-in)
# Per-node memory and disk limits (the node's tree with its tmpfs, the workspace's total;
# docs/sandbox.md): status crashed, FAILED_REWARD.
MEMORY_LIMIT_ERROR = "MemoryLimitError"
DISK_LIMIT_ERROR = "DiskLimitError"
# A prompt over the arm's caps: the node is recorded without being generated or executed
# (status crashed, INFRASTRUCTURE_REWARD: not the policy's doing).
PROMPT_ERROR_EXC_TYPE = "PromptTooLongError"

# --- sandbox outcomes: how a node's process ended (train.env.sandbox's ExecResult.outcome)
EXITED = "exited"  # it ended by itself: its exit status and submission decide the node
TIME_LIMIT = "timeout"  # killed at the time limit (the node's own clock: train.env.meter); status TIMEOUT
IDLE = "idle"  # killed for an idle CPU
GPU_IDLE = "gpu_idle"  # killed for idle GPUs
MEMORY = "memory"  # killed over its memory (a GPU node's RSS, before memory_limit; kept for old rows)
INFRA = "infra"  # the sandbox failed before or around the run
MEMORY_LIMIT = "memory_limit"  # killed at the per-node memory limit (its tree and tmpfs)
DISK_LIMIT = "disk_limit"  # killed at the per-node disk quota (its workspace)
NOT_RUN = "none"  # no code to run: no sandbox at all
OUTCOMES = (EXITED, TIME_LIMIT, IDLE, GPU_IDLE, MEMORY, INFRA, MEMORY_LIMIT, DISK_LIMIT, NOT_RUN)


@dataclass(frozen=True)
class Verdict:
    """What a node is when the sandbox, not its own exit, ended it."""

    status: str
    exc_type: str


# The one mapping from a stopped node's outcome to its status and exc_type (the reward follows
# from those: train.env.reward). An outcome not listed (exited) is judged by its exit status,
# traceback and submission.
VERDICTS = {
    TIME_LIMIT: Verdict(TIMEOUT, TIMEOUT_EXC_TYPE),
    IDLE: Verdict(CRASHED, CPU_IDLE_ERROR),
    GPU_IDLE: Verdict(CRASHED, GPU_IDLE_ERROR),
    MEMORY: Verdict(CRASHED, MEMORY_EXC_TYPE),
    INFRA: Verdict(CRASHED, INFRASTRUCTURE_EXC_TYPE),
    MEMORY_LIMIT: Verdict(CRASHED, MEMORY_LIMIT_ERROR),
    DISK_LIMIT: Verdict(CRASHED, DISK_LIMIT_ERROR),
}

