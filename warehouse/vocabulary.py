"""The rollout vocabulary: the names and values every layer agrees on, defined once.

The trainer writes them (train.env), the ingest and the sample warehouse produce them
(ingest), the data-quality checks test them (warehouse.quality) and the SQL views filter on
them (sql/*.sql, which cannot import this module: tests/sql/test_vocabulary.py reads the
views' literals and compares them with these). Definitions: docs/data-roots.md (node fields),
docs/metrics.md (invariants 1 and 2) and docs/reward_model.md (the reward-model records).
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

# --- step phases: the keys of a timing.jsonl row's "phases_s" (the published data roots' names), each a
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


# --- record fields: each record kind's keys, their JSON kinds, columns and allowed values.
# The schema's columns (warehouse.schema), the normalization's typed SELECT (ingest.normalize),
# the loader's column lists (ingest.load) and the sample root's keys (ingest.sample) all come
# from these; tests/warehouse/test_vocabulary.py refuses a second copy of a list.
@dataclass(frozen=True)
class Field:
    """One key of a record and where it lands."""

    key: str  # the record's JSON key
    column: str | None  # its typed column (in `table` when set); None: a dict's parts, or the key in `table`
    kind: str  # str | id | int | bigint | float | bool | json | text | ints | floats | float32s | dict
    strict: bool = False  # a wrong type rejects the line
    required: bool = False  # missing or null rejects the line (the column is NOT NULL)
    parts: tuple[tuple[str, str], ...] = ()  # dict: (sub key, column), each a DOUBLE column
    values: tuple[str, ...] = ()  # the values the warehouse accepts (the checks test them); () any
    closed: bool = False  # another value than `values` rejects the line (else the checks report it)
    since: str = "A"  # node records: the published schema (A, B, C) that added it, or "train"
    table: str | None = None  # kept in another table (node_payloads, node_train_tokens)
    comment: str | None = None  # the column's comment; for a dict, a template with {sub}


def _f(key: str, kind: str, column: str | None = None, **kw) -> Field:
    return Field(key, key if column is None else column, kind, **kw)


def _kept_in(table: str, key: str, kind: str, column: str | None = None, **kw) -> Field:
    return Field(key, column, kind, table=table, **kw)


# the kinds held as lists: ints (INTEGER[]), floats (DOUBLE[]) and float32s (read as numbers,
# stored as FLOAT[]: the trainer's float32 tensors, at half the bytes)
ARRAY_KINDS = ("ints", "floats", "float32s")


# node_payloads, in its column order: the heavy per-node values, joined to nodes by
# (source_id, line_no), so analytic scans of nodes never read them
NODE_PAYLOAD_FIELDS: tuple[Field, ...] = (
    _kept_in("node_payloads", "prompt_messages", "json"),
    _kept_in("node_payloads", "raw_completion", "text"),
    _kept_in("node_payloads", "thinking", "text"),
    _kept_in("node_payloads", "code", "text"),
    _kept_in("node_payloads", "response_token_ids", "ints", strict=True),
    _kept_in("node_payloads", "response_logprobs", "floats", strict=True),
)
_PAYLOAD = {f.key: f for f in NODE_PAYLOAD_FIELDS}

# node_train_tokens' record columns, in its column order: what the trainer (train run) recorded
# of the GRPO step that trained on the node, aligned with its response_token_ids. The arrays are
# lenient: a diverged step's null (NaN) element keeps the node, the list also kept verbatim in
# `extra`
NODE_TRAIN_TOKEN_FIELDS: tuple[Field, ...] = (
    _kept_in("node_train_tokens", "train_step", "int", "step", since="train",
             comment="the GRPO step that trained on the node"),
    _kept_in("node_train_tokens", "advantage", "float", "advantage", since="train",
             comment="the node's advantage in that step's loss"),
    _kept_in("node_train_tokens", "trainer_logprobs", "float32s", "trainer_logprobs", since="train",
             comment="the learner's logprob of each response token before the update (old_log_prob)"),
    _kept_in("node_train_tokens", "ref_logprobs", "float32s", "ref_logprobs", since="train",
             comment="the reference model's (adapter disabled)"),
    _kept_in("node_train_tokens", "ratios", "float32s", "ratios", since="train",
             comment="exp(logprob - old_log_prob) in the last epoch's loss"),
)
# What the loader derives for each trained node from its arrays and the node's response_logprobs
# (node_train_tokens' last columns, in order), so round_metrics and check 16 never read the arrays
NODE_TRAIN_TOKEN_DERIVED_COLUMNS = ("compared_tokens", "mult_prob_error_sum", "mult_prob_error_max",
                                    "abs_delta_gt_1", "kl_to_ref_sum")

# A node record, in the published files' key order (docs/data-roots.md). Schema A has 25 keys.
NODE_FIELDS: tuple[Field, ...] = (
    _f("id", "id", "node_id", strict=True, required=True, comment="the record's `id`"),
    _f("step", "int", strict=True, comment="as recorded (0 everywhere in 000)"),
    _f("round", "int", "record_round", strict=True, comment="the record's own `round` field"),
    _f("exp_id", "str"),
    _f("parent_id", "id", strict=True),
    _f("sibling_group", "id", strict=True),
    _f("mode", "str", strict=True, values=MODES),
    _f("plan", "str"),
    _PAYLOAD["code"],
    _PAYLOAD["raw_completion"],
    _PAYLOAD["thinking"],
    _PAYLOAD["prompt_messages"],
    _PAYLOAD["response_token_ids"],
    _PAYLOAD["response_logprobs"],
    _f("exc_type", "str"),
    _f("exec_time", "float"),
    _f("term_tail", "str"),
    _f("is_buggy", "bool"),
    _f("status", "str", strict=True, values=STATUSES),
    _f("grade_error", "str"),
    _f("test_metric", "float", strict=True),
    _f("oriented", "float", strict=True),
    _f("reward", "float", strict=True),
    _f("source", "str"),
    _f("n_children", "int"),
    # schema B
    Field("resources", None, "dict", since="B", parts=(
        ("cpu", "resources_cpu"), ("mem", "resources_mem"), ("ephemeral", "resources_ephemeral"),
        ("gpu", "resources_gpu"))),
    _f("decl_malformed", "bool", since="B"),
    _f("decl_miss_reason", "str", since="B"),
    _f("decl_deps_ignored", "bool", since="B"),
    _f("where", "str", since="B"),
    Field("exec_timings", None, "dict", since="B", comment="exec_timings.{sub}", parts=(
        ("pending", "exec_pending_s"), ("stage", "exec_stage_s"), ("exec", "exec_exec_s"),
        ("retrieve", "exec_retrieve_s"))),
    _f("gpu_util", "float", since="B"),
    # schema C
    *(_f(key, kind, since="C") for key, kind in (
        ("depth", "int"), ("returncode", "int"), ("parent_oriented", "float"), ("parent_P", "float"),
        ("parent_P_evidence", "json"), ("improve_delta", "float"), ("group_best", "bool"),
        ("medal", "str"), ("attempt", "int"), ("cpu_util_mean", "float"), ("cpu_util_peak", "float"),
        ("gpu_util_peak", "float"), ("gpu_mem_used_gi", "float"), ("mem_peak_gi", "float"),
        ("gpu_name", "str"), ("kube_node", "str"))),
    # written by the trainer (train run): the weights that generated the node, and what the
    # GRPO step computed for its response tokens (node_train_tokens)
    _f("policy_version", "int", strict=True, since="train",
       comment="global step of the weights that generated the node (0: the base model)"),
    *NODE_TRAIN_TOKEN_FIELDS,
)


def node_keys(since: str) -> tuple[str, ...]:
    """The keys a published node schema added (A: the 25 every root has; B; C), in file order."""
    return tuple(f.key for f in NODE_FIELDS if f.since == since)


def node_columns() -> tuple[str, ...]:
    """The nodes columns a node record fills, in the table's order (dicts as their parts)."""
    return tuple(c for f in NODE_FIELDS if f.table is None
                 for c in ([col for _, col in f.parts] if f.kind == "dict" else [f.column]))


# A task-round summary (round_<N>/<task>_summary.json): the summary columns of task_rounds
SUMMARY_FIELDS: tuple[Field, ...] = (
    _f("exp_id", "str"), _f("round", "int", "summary_round"), _f("model", "str"),
    _f("exec_backend", "str"), _f("adapter_path", "str"), _f("nodes", "int"),
    _f("valid", "int"), _f("buffer_nodes", "int"), _f("expansions", "int"), _f("phase", "str"),
    _f("best_test_metric", "float"), _f("best_node_id", "id"),
    _f("honest_test_metric", "float"), _f("rollout_file", "str"), _f("workspace", "str"),
    _f("gen_llm_seconds", "float"), _f("gen_exec_seconds", "float"),
)

TIMING_FIELDS: tuple[Field, ...] = (
    _f("step", "int", strict=True, required=True),
    _f("total_s", "float", strict=True),
    Field("phases_s", None, "dict", parts=tuple(zip(STEP_PHASES, STEP_PHASE_COLUMNS))),
)

# The learner's per-step metrics (step_metrics): a value that is not a finite number of the
# column's type stays NULL there and is kept in `extra` (a NaN loss is a finding, not a bad line).
STEP_METRIC_FIELDS: tuple[Field, ...] = (
    _f("step", "int", strict=True, required=True),
    *(_f(k, "float") for k in ("loss", "pg_loss", "kl", "clip_frac", "grad_norm", "entropy")),
    _f("tokens", "bigint"), _f("micro_batches", "int"), _f("peak_mem_gib", "float"),
    _f("lr", "float"),
)


# What the loader derives for each node from the record (nodes' last columns, in order).
NODE_DERIVED_COLUMNS = ("schema_kind", "n_response_tokens", "n_response_logprobs", "code_chars", "extra")


# --- reward-model records (data root 004; docs/reward_model.md): the keys of a `train rm` run's
# files and records, each kept in its rm_* table's column of the same name. Every typed key is
# strict (a value of the wrong type, or not a finite number, rejects the record), and a key with
# `values` accepts only those (closed). ingest.rm_records types them through ingest.normalize, as
# every other record; warehouse.schema's rm_* tables and ingest.rm_layout's export read these lists.
RM_PHASES = ("exploration", "formal")
RM_SPLITS = ("proxy", "full", "proxy_rows")  # proxy_rows: the formal run's diagnostic on the proxy rows
RM_DIRECTIONS = ("maximize", "minimize")


def _rm(key: str, kind: str, comment: str | None = None, **kw) -> Field:
    return Field(key, key, kind, strict=True, comment=comment, closed=bool(kw.get("values")), **kw)


def _rm_phase(**kw) -> Field:
    return _rm("phase", "str", "exploration | formal", values=RM_PHASES, **kw)


# manifest.json: the rm_runs row (run_id, kind, question_id, seed, notes and reference go elsewhere)
RM_RUN_FIELDS: tuple[Field, ...] = (
    _rm("task", "str", "e.g. ultrafeedback_bt_rm_rewardbench"), _rm("agent", "str"), _rm("base_model", "str"),
    _rm("train_pairs", "int", "preference pairs the run may train on"), _rm("proxy_evaluator", "str"),
    _rm("final_evaluator", "str"),
    _rm("reference_id", "str", "-> rm_references: the same-protocol reference"),
)
# the manifest's `reference`: an rm_references row (its reference_id defaults to <task>/<evaluator>)
RM_REFERENCE_FIELDS: tuple[Field, ...] = (
    _rm("reference_id", "str"), _rm("task", "str"), _rm("evaluator", "str", required=True),
    _rm("split", "str", "proxy | full", values=RM_SPLITS), _rm("n", "int"), _rm("score", "float", required=True),
    _rm("direction", "str", "maximize | minimize", values=RM_DIRECTIONS),
    _rm("protocol", "str", "how the reference was produced"),
    _rm("train_s", "float", "the reference run's training seconds"),
    _rm("score_s", "float", "the reference run's scoring seconds"),
    _rm("peak_mem_mib", "float", "the reference run's peak training memory"),
    _rm("notes", "str"),
)
# outcome.json: per phase, an rm_budgets row
RM_BUDGET_FIELDS: tuple[Field, ...] = (
    _rm("wall_clock_s", "float", "the budget the harness injected"),
    _rm("reserve_s", "float", "held back from wall_clock_s for scoring/publishing"),
    _rm("train_s", "float", "seconds spent training"), _rm("elapsed_s", "float", "seconds the whole phase ran"),
    _rm("stop_reason", "str", "e.g. wall_clock_budget_exhausted, completed, submitted"),
    _rm("steps", "int", "optimizer steps completed (cumulative progress)"),
    _rm("members", "int", "soup members completed"), _rm("steps_per_member", "int"),
    _rm("snapshots_published", "int"), _rm("snapshots_retained", "int"),
)
# jobs.jsonl: one rm_jobs row per line
RM_JOB_FIELDS: tuple[Field, ...] = (
    _rm("job", "str", "unique within the run, e.g. U-03/len256, formal", required=True),
    _rm_phase(required=True), _rm("unit", "str", "U-01, U-02, ... (NULL for the formal replay)"),
    _rm("title", "str"), _rm("pairs", "int"), _rm("steps_planned", "int"), _rm("steps_done", "int"),
    _rm("micro_batch", "int"), _rm("grad_accum", "int"), _rm("learning_rate", "float"), _rm("seed", "int"),
    _rm("members", "int", "soup members this job averaged"), _rm("seconds", "float", "training seconds"),
    _rm("peak_mem_gb", "float", "peak GPU memory, GB as the run reports it"),
    _rm("status", "str", "completed | killed | oom | failed"),
    _rm("submitted", "bool", "the exploration evidence the submission rests on"), _rm("notes", "str"),
)
# steps.jsonl: one rm_steps row per line
RM_STEP_FIELDS: tuple[Field, ...] = (
    _rm("job", "str", required=True), _rm("step", "int", "cumulative optimizer step (progress)", required=True),
    _rm("member", "int", "soup member index m (seed 42+m); 0 without a soup"),
    _rm("loss", "float", "Bradley-Terry -log sigmoid(r_chosen - r_rejected)"),
    _rm("accuracy", "float", "share of pairs with r_chosen > r_rejected"), _rm("lr", "float"),
    _rm("grad_norm", "float"), _rm("seconds", "float", "wall seconds of the step"), _rm("peak_mem_gib", "float"),
)
# artifacts.jsonl: one rm_artifacts row per line
RM_ARTIFACT_FIELDS: tuple[Field, ...] = (
    _rm("job", "str", required=True),
    _rm("progress", "int", "optimizer steps behind the artifact", required=True),
    _rm("path", "str"), _rm("parameters", "bigint"), _rm("dtype", "str"), _rm("format", "str", "full | lora_delta"),
    _rm("loadable", "bool"), _rm("retained", "bool", "kept (at most three per run are accepted)"),
    _rm("members", "int", "soup members averaged into it"),
)
# evaluations/<id>.json: an rm_evaluations row (its receipt columns come from the summary's bytes
# and its receipt, never from the record) and, under `sections`, its rm_eval_sections rows
RM_EVALUATION_FIELDS: tuple[Field, ...] = (
    _rm("evaluation_id", "str", "the summary's file stem", required=True), _rm("job", "str"),
    _rm_phase(required=True), _rm("unit", "str"),
    _rm("progress", "int", "the evaluated artifact's progress"), _rm("evaluator", "str", required=True),
    _rm("split", "str", "proxy | full | proxy_rows (diagnostic)", required=True, values=RM_SPLITS),
    _rm("direction", "str", "maximize | minimize", values=RM_DIRECTIONS), _rm("n", "int"), _rm("score", "float"),
    _rm("se", "float", "descriptive weighted-binomial standard error"),
    _rm("seconds", "float", "scoring seconds"),
)
RM_SECTION_FIELDS: tuple[Field, ...] = (_rm("score", "float"), _rm("n", "int"))
