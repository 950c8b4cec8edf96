"""The relational schema, as SQLAlchemy Core tables.

This module is the single description of the warehouse's tables. Production databases are
created only by the Alembic migrations in `migrations/`; `tests/warehouse/test_migrations.py`
proves that upgrading an empty database to head yields exactly these tables.

Design notes
------------
* Every row that came from a file carries `source_id` (-> `sources`) and, for line-based
  files, `line_no`: every row can be traced to its file and line. Rows written by the
  trainer get a `sources` row too (kind `train_round`), so lineage works the same way.
* Row identity is `(source_id, line_no)`, not the record's own id: a data root can hold
  duplicate node ids or repeated timing steps, and the warehouse must keep them so the
  invariant checks can report them (docs/metrics.md: ingest never drops a row silently).
* The heavy per-node payloads (prompt, completion, thinking, code, token ids, logprobs) live
  in `node_payloads`, joined by `(source_id, line_no)`, so analytic scans of `nodes` stay
  fast. The lengths the metrics need (`n_response_tokens`, `code_chars`, ...) are kept on
  `nodes` so no metric has to touch the payloads. What the learner computed for each trained
  node's tokens (its logprob, the reference's, the ratio) is in `node_train_tokens`, the same
  key, aligned with `response_token_ids`.
* No foreign-key constraints: DuckDB checks them eagerly on delete-and-reinsert, which is
  how a changed file replaces its rows. The relationships are enforced by the data-quality
  gate instead (invariant 8 and friends).
* Dict-valued record fields with a fixed documented shape (`resources`, `exec_timings`) are
  flattened into typed columns. Anything that does not fit its typed column, and every
  unknown key, is kept verbatim in the `extra` JSON column: nothing is lost.
"""
from __future__ import annotations

import sqlalchemy as sa

from warehouse.vocabulary import (NODE_FIELDS, NODE_PAYLOAD_FIELDS, NODE_TRAIN_TOKEN_FIELDS, RM_ARTIFACT_FIELDS,
                                  RM_BUDGET_FIELDS, RM_EVALUATION_FIELDS, RM_JOB_FIELDS, RM_REFERENCE_FIELDS,
                                  RM_RUN_FIELDS, RM_SECTION_FIELDS, RM_STEP_FIELDS, STEP_METRIC_FIELDS, SUMMARY_FIELDS,
                                  Field)

metadata = sa.MetaData()

Text = sa.String  # DuckDB VARCHAR has no length limit
Double = sa.Double
BigInt = sa.BigInteger


#: the column type of each JSON kind of warehouse.vocabulary.Field (a dict's parts are DOUBLE)
COLUMN_TYPES = {"str": Text, "id": Text, "text": Text, "int": sa.Integer, "bigint": BigInt,
                "float": Double, "bool": sa.Boolean, "json": sa.JSON,
                "ints": sa.ARRAY(sa.Integer), "floats": sa.ARRAY(Double), "float32s": sa.ARRAY(sa.Float)}


def record_columns(fields: tuple[Field, ...], table: str | None = None) -> list[sa.Column]:
    """The columns of the record fields kept in `table` (None: the kind's own table), in order."""
    columns = []
    for f in fields:
        if f.table != table:
            continue
        if f.kind == "dict":
            columns += [sa.Column(col, Double, comment=f.comment and f.comment.format(sub=sub)) for sub, col in f.parts]
        else:
            columns.append(sa.Column(f.column or f.key, COLUMN_TYPES[f.kind], nullable=not f.required, comment=f.comment))
    return columns


def _pk_int(name: str) -> sa.Column:
    # autoincrement=False: DuckDB has no SERIAL; ids are assigned by the writers.
    return sa.Column(name, sa.Integer, primary_key=True, autoincrement=False)


questions = sa.Table(
    "questions",
    metadata,
    sa.Column("question_id", Text, primary_key=True, comment="e.g. 09-multitask-humanrank"),
    sa.Column("title", Text),
    sa.Column("data_root", Text, comment="where the published data root lives"),
    sa.Column("notes", Text),
)

arms = sa.Table(
    "arms",
    metadata,
    sa.Column("name", Text, primary_key=True),
    sa.Column("question_id", Text),
    sa.Column("prompt_cap", sa.Integer, comment="max prompt tokens"),
    sa.Column("response_cap", sa.Integer, comment="max response tokens (max_new_tokens)"),
    sa.Column("total_cap", sa.Integer, comment="prompt + response token budget"),
    sa.Column("lora_rank", sa.Integer),
    sa.Column("lora_alpha", sa.Integer),
    sa.Column("learning_rate", Double),
    sa.Column("gpu_memory_utilization", Double),
    sa.Column("adv_estimator", Text),
    sa.Column("model", Text),
    sa.Column("siblings_per_expansion", sa.Integer),
    sa.Column("expansions_per_round", sa.Integer),
    sa.Column("tasks", sa.JSON, comment="list of task slugs"),
    sa.Column("notes", Text),
    sa.Column("mismatch_max", Double, comment="check 16's limit on mult_prob_error; NULL: the default, 1.1"),
    sa.Column("mismatch_share_gt1_max", Double,
              comment="check 16's limit on the share of tokens with |delta| > 1; NULL: the default, 0.01"),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("run_id", Text, primary_key=True, comment="the run directory's name"),
    sa.Column("question_id", Text),
    sa.Column("arm", Text, comment="NULL when the arm is unknown"),
    sa.Column("kind", Text, nullable=False, comment="training | probe | smoke | stress | unknown"),
    sa.Column("wandb_run", Text),
    sa.Column("resumed_from_run", Text),
    sa.Column("resumed_from_step", sa.Integer),
    sa.Column("lost", sa.Boolean, nullable=False, comment="run directory is a dangling link"),
    sa.Column("started_at", sa.DateTime, comment="parsed from the run id when it is a timestamp"),
    sa.Column("source_path", Text),
    sa.Column("model", Text),
    sa.Column("seed", sa.Integer),
    sa.Column("overrides", sa.JSON, comment="per-run settings that differ from the arm"),
    sa.Column("notes", Text),
    sa.Column("settings_sources", sa.JSON,
              comment="setting -> where its value came from: arm, --set, run, default or flag "
                      "(train.settings.settings_of); NULL: not recorded (ingested data roots)"),
)

rounds = sa.Table(
    "rounds",
    metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("round", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("source_path", Text, comment="the round_<N> directory"),
)

task_rounds = sa.Table(
    "task_rounds",
    metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("round", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("task", Text, primary_key=True),
    sa.Column("summary_present", sa.Boolean, nullable=False),
    sa.Column("node_file_present", sa.Boolean, nullable=False),
    sa.Column("has_tree", sa.Boolean, nullable=False),
    sa.Column("has_transcript", sa.Boolean, nullable=False),
    sa.Column("node_source_id", sa.Integer),
    sa.Column("summary_source_id", sa.Integer),
    # The round summary's fields, verbatim (NULL when there is no summary).
    *record_columns(SUMMARY_FIELDS),
    sa.Column("extra", sa.JSON, comment="summary keys not listed above"),
)

sibling_groups = sa.Table(
    "sibling_groups",
    metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("round", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("task", Text, primary_key=True),
    sa.Column("sibling_group", Text, primary_key=True),
    sa.Column("expansion_step", sa.Integer, comment="the expansion index within the round"),
    sa.Column("parent_id", Text, comment="the parent all siblings expanded; NULL for drafts"),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("source_id", sa.Integer),
)

nodes = sa.Table(
    "nodes",
    metadata,
    sa.Column("source_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("line_no", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("run_id", Text, nullable=False),
    sa.Column("round", sa.Integer, nullable=False, comment="from the round_<N> directory"),
    sa.Column("task", Text, nullable=False, comment="from the file name"),
    # the node record's typed keys (warehouse.vocabulary.NODE_FIELDS); payloads live in node_payloads
    *record_columns(NODE_FIELDS),
    # Derived at load time so metrics never read the payloads.
    sa.Column("schema_kind", Text, comment="A, B or C by the keys present"),
    sa.Column("n_response_tokens", sa.Integer, comment="len(response_token_ids)"),
    sa.Column("n_response_logprobs", sa.Integer, comment="len(response_logprobs)"),
    sa.Column("code_chars", sa.Integer, comment="len(code); 0 for empty code"),
    sa.Column("extra", sa.JSON, comment="unknown keys, and values that fit no typed column"),
    sa.Index("ix_nodes_run_round_task", "run_id", "round", "task"),
    sa.Index("ix_nodes_node_id", "run_id", "node_id"),
)

node_payloads = sa.Table(
    "node_payloads",
    metadata,
    sa.Column("source_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("line_no", sa.Integer, primary_key=True, autoincrement=False),
    *record_columns(NODE_PAYLOAD_FIELDS, "node_payloads"),
)

# For each write of payloads and each distinct response token id in it, the nodes of that
# write whose response holds it, sorted by token id within the write: DuckDB's per-row-group
# min/max (zone maps) then skips every row group that cannot hold an id, so finding a token
# id across all runs reads a few row groups here and only the payloads that hold it
# (warehouse/tokens.py), never every token array. Derived: an export leaves it out and a
# restore builds it again.
node_token_index = sa.Table(
    "node_token_index",
    metadata,
    sa.Column("token_id", sa.Integer, nullable=False),
    sa.Column("write_id", sa.Integer, nullable=False, comment="node_token_index_writes.write_id"),
    sa.Column("source_ids", sa.ARRAY(sa.Integer), nullable=False,
              comment="the nodes holding the token in this write: source_ids[i], line_nos[i]"),
    sa.Column("line_nos", sa.ARRAY(sa.Integer), nullable=False,
              comment="read in step with source_ids"),
)

# The sources each write of node_token_index covered; a source's row goes when it is
# reloaded, and the index reads a source's entries only in the write its row names.
node_token_index_writes = sa.Table(
    "node_token_index_writes",
    metadata,
    sa.Column("write_id", sa.Integer, nullable=False),
    sa.Column("source_id", sa.Integer, nullable=False),
)

node_train_tokens = sa.Table(
    "node_train_tokens",
    metadata,
    sa.Column("source_id", sa.Integer, primary_key=True, autoincrement=False, comment="the node's"),
    sa.Column("line_no", sa.Integer, primary_key=True, autoincrement=False, comment="the node's"),
    sa.Column("run_id", Text, nullable=False),
    *record_columns(NODE_TRAIN_TOKEN_FIELDS, "node_train_tokens"),
    # derived at load time (NODE_TRAIN_TOKEN_DERIVED_COLUMNS) from the arrays and the node's
    # response_logprobs, so round_metrics and check 16 never read the arrays
    sa.Column("compared_tokens", sa.Integer, comment="tokens with both the sampler's and the trainer's logprob"),
    sa.Column("mult_prob_error_sum", Double, comment="sum over those of exp(|trainer - sampler logprob|)"),
    sa.Column("mult_prob_error_max", Double, comment="max over those of exp(|trainer - sampler logprob|)"),
    sa.Column("abs_delta_gt_1", sa.Integer, comment="of those, tokens with |trainer - sampler logprob| > 1"),
    sa.Column("kl_to_ref_sum", Double, comment="sum over trained tokens of the loss's k3 KL to the reference"),
)

steps = sa.Table(
    "steps",
    metadata,
    sa.Column("source_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("line_no", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("run_id", Text, nullable=False),
    sa.Column("step", sa.Integer, nullable=False, comment="step N is the update after round N"),
    sa.Column("total_s", Double),
    sa.Column("update_weights_s", Double),
    sa.Column("gen_s", Double),
    sa.Column("old_log_prob_s", Double),
    sa.Column("ref_s", Double),
    sa.Column("adv_s", Double),
    sa.Column("update_actor_s", Double),
    sa.Column("save_checkpoint_s", Double, comment="NULL on steps that did not save"),
    sa.Column("extra", sa.JSON, comment="unknown phases and keys"),
    sa.Index("ix_steps_run_step", "run_id", "step"),
)

step_metrics = sa.Table(
    "step_metrics",
    metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True, autoincrement=False),
    *(c for c in record_columns(STEP_METRIC_FIELDS) if c.name != "step"),  # step: the key above
    sa.Column("extra", sa.JSON),
)

sources = sa.Table(
    "sources",
    metadata,
    _pk_int("source_id"),
    sa.Column("path", Text, nullable=False, unique=True),
    sa.Column("kind", Text, nullable=False,
              comment="nodes | summary | timing | wandb_config | wandb_history | wandb_summary | train_round"),
    sa.Column("run_id", Text),
    sa.Column("round", sa.Integer),
    sa.Column("task", Text),
    sa.Column("size_bytes", BigInt),
    sa.Column("mtime_ns", BigInt),
    sa.Column("content_hash", Text),
    sa.Column("rows", sa.Integer, comment="rows that landed"),
    sa.Column("rows_rejected", sa.Integer),
    sa.Column("ingested_at", sa.DateTime),
    sa.Column("error", Text, comment="why the whole file failed, if it did"),
)

ingest_errors = sa.Table(
    "ingest_errors",
    metadata,
    sa.Column("source_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("line_no", sa.Integer, primary_key=True, autoincrement=False,
              comment="1-based line; 0 for an error about the whole file"),
    sa.Column("path", Text, nullable=False),
    sa.Column("run_id", Text),
    sa.Column("reason", Text, nullable=False),
    sa.Column("created_at", sa.DateTime),
)

wandb_runs = sa.Table(
    "wandb_runs",
    metadata,
    sa.Column("wandb_run", Text, primary_key=True),
    sa.Column("config", sa.JSON),
    sa.Column("summary", sa.JSON),
    sa.Column("config_source_id", sa.Integer),
    sa.Column("summary_source_id", sa.Integer),
)

wandb_history = sa.Table(
    "wandb_history",
    metadata,
    sa.Column("source_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("line_no", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("wandb_run", Text, nullable=False),
    sa.Column("step", sa.Integer, comment="the row's `_step` or `step`"),
    sa.Column("row", sa.JSON, nullable=False, comment="the whole history row"),
)


# --- reward-model runs (data root 004; docs/reward_model.md) ------------------------------------
# One `runs` row (kind 'reward_model') per run; these tables hold what the run's files (or
# the `train rm` writer, through ingest/rm_records.py) say. Like the tables above, every row
# carries the `source_id` of the file (or trainer write) it came from, so a changed file
# replaces exactly its rows.

def _rm_columns(fields: tuple[Field, ...], *, without: tuple[str, ...] = ()) -> list[sa.Column]:
    """The rm_* columns of a reward-model record kind's fields (warehouse.vocabulary), in order."""
    return [c for c in record_columns(fields) if c.name not in without]


rm_runs = sa.Table(
    "rm_runs",
    metadata,
    sa.Column("run_id", Text, primary_key=True),
    *_rm_columns(RM_RUN_FIELDS),
    sa.Column("source_id", sa.Integer),
    sa.Column("extra", sa.JSON, comment="manifest keys not listed above"),
)

rm_references = sa.Table(
    "rm_references",
    metadata,
    sa.Column("reference_id", Text, primary_key=True),
    *_rm_columns(RM_REFERENCE_FIELDS, without=("reference_id", "notes")),
    sa.Column("source_id", sa.Integer),
    *_rm_columns(RM_REFERENCE_FIELDS[-1:]),  # notes, after source_id as 0004 made it
)

rm_budgets = sa.Table(
    "rm_budgets",
    metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("phase", Text, primary_key=True, comment="exploration | formal"),
    *_rm_columns(RM_BUDGET_FIELDS),
    sa.Column("source_id", sa.Integer),
    sa.Column("extra", sa.JSON),
)

rm_jobs = sa.Table(
    "rm_jobs",
    metadata,
    sa.Column("source_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("line_no", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("run_id", Text, nullable=False),
    *_rm_columns(RM_JOB_FIELDS),
    sa.Column("extra", sa.JSON),
    sa.Index("ix_rm_jobs_run_job", "run_id", "job"),
)

rm_steps = sa.Table(
    "rm_steps",
    metadata,
    sa.Column("source_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("line_no", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("run_id", Text, nullable=False),
    *_rm_columns(RM_STEP_FIELDS),
    sa.Column("extra", sa.JSON),
    sa.Index("ix_rm_steps_run_job_step", "run_id", "job", "step"),
)

rm_artifacts = sa.Table(
    "rm_artifacts",
    metadata,
    sa.Column("source_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("line_no", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("run_id", Text, nullable=False),
    *_rm_columns(RM_ARTIFACT_FIELDS),
    sa.Column("extra", sa.JSON),
    sa.Index("ix_rm_artifacts_run_job", "run_id", "job", "progress"),
)

#: rm_evaluations' columns that the write derives from the summary's bytes and its receipt
RM_RECEIPT_COLUMNS = (
    sa.Column("official", sa.Boolean, nullable=False, comment="a receipt matches the summary"),
    sa.Column("receipt_status", Text, nullable=False, comment="match | missing | mismatch"),
    sa.Column("summary_path", Text),
    sa.Column("summary_sha256", Text),
    sa.Column("summary_size", BigInt),
    sa.Column("receipt_path", Text),
    sa.Column("receipt_sha256", Text, comment="as the receipt states it"),
    sa.Column("receipt_size", BigInt, comment="as the receipt states it"),
)

rm_evaluations = sa.Table(
    "rm_evaluations",
    metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("evaluation_id", Text, primary_key=True, comment="the summary's file stem"),
    *_rm_columns(RM_EVALUATION_FIELDS, without=("evaluation_id", "seconds")),
    *RM_RECEIPT_COLUMNS,
    *_rm_columns(RM_EVALUATION_FIELDS[-1:]),  # seconds, after the receipt as 0004 made it
    sa.Column("source_id", sa.Integer),
    sa.Column("extra", sa.JSON),
)

rm_eval_sections = sa.Table(
    "rm_eval_sections",
    metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("evaluation_id", Text, primary_key=True),
    sa.Column("section", Text, primary_key=True, comment="Chat | Chat Hard | Safety | Reasoning"),
    *_rm_columns(RM_SECTION_FIELDS),
    sa.Column("source_id", sa.Integer),
)

run_lifecycle = sa.Table(
    "run_lifecycle",
    metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("trainer", Text, comment="train run | train rm"),
    sa.Column("started_at", sa.DateTime, nullable=False, comment="UTC, when the trainer recorded the run"),
    sa.Column("heartbeat_at", sa.DateTime, comment="UTC, the last beat of a live trainer"),
    sa.Column("heartbeat_every_s", Double, comment="how often the trainer beats"),
    sa.Column("ended_at", sa.DateTime, comment="UTC; NULL while running or when the trainer died unseen"),
    sa.Column("end_status", Text, comment="finished | failed | stopped"),
    sa.Column("exit_reason", Text, comment="why it ended: completed, the exception, KeyboardInterrupt"),
    sa.Column("host", Text),
    sa.Column("pid", sa.Integer),
)

#: Table names in dependency-free creation order (also the order `tables` lists them).
TABLE_NAMES = [t.name for t in metadata.sorted_tables]
