"""Create the core schema: runs, rounds, task_rounds, sibling_groups, nodes (+ payloads), steps, sources.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('arms',
    sa.Column('name', sa.String(), nullable=False),
    sa.Column('question_id', sa.String(), nullable=True),
    sa.Column('prompt_cap', sa.Integer(), nullable=True, comment='max prompt tokens'),
    sa.Column('response_cap', sa.Integer(), nullable=True, comment='max response tokens (max_new_tokens)'),
    sa.Column('total_cap', sa.Integer(), nullable=True, comment='prompt + response token budget'),
    sa.Column('lora_rank', sa.Integer(), nullable=True),
    sa.Column('lora_alpha', sa.Integer(), nullable=True),
    sa.Column('learning_rate', sa.Double(), nullable=True),
    sa.Column('gpu_memory_utilization', sa.Double(), nullable=True),
    sa.Column('adv_estimator', sa.String(), nullable=True),
    sa.Column('model', sa.String(), nullable=True),
    sa.Column('siblings_per_expansion', sa.Integer(), nullable=True),
    sa.Column('expansions_per_round', sa.Integer(), nullable=True),
    sa.Column('tasks', sa.JSON(), nullable=True, comment='list of task slugs'),
    sa.Column('notes', sa.String(), nullable=True),
    sa.PrimaryKeyConstraint('name')
    )
    op.create_table('ingest_errors',
    sa.Column('source_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('line_no', sa.Integer(), autoincrement=False, nullable=False, comment='1-based line; 0 for an error about the whole file'),
    sa.Column('path', sa.String(), nullable=False),
    sa.Column('run_id', sa.String(), nullable=True),
    sa.Column('reason', sa.String(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('source_id', 'line_no')
    )
    op.create_table('node_payloads',
    sa.Column('source_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('line_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('prompt_messages', sa.JSON(), nullable=True),
    sa.Column('raw_completion', sa.String(), nullable=True),
    sa.Column('thinking', sa.String(), nullable=True),
    sa.Column('code', sa.String(), nullable=True),
    sa.Column('response_token_ids', sa.ARRAY(sa.Integer()), nullable=True),
    sa.Column('response_logprobs', sa.ARRAY(sa.Double()), nullable=True),
    sa.PrimaryKeyConstraint('source_id', 'line_no')
    )
    op.create_table('nodes',
    sa.Column('source_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('line_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('round', sa.Integer(), nullable=False, comment='from the round_<N> directory'),
    sa.Column('task', sa.String(), nullable=False, comment='from the file name'),
    sa.Column('node_id', sa.String(), nullable=False, comment="the record's `id`"),
    sa.Column('step', sa.Integer(), nullable=True, comment='as recorded (0 everywhere in 000)'),
    sa.Column('record_round', sa.Integer(), nullable=True, comment="the record's own `round` field"),
    sa.Column('exp_id', sa.String(), nullable=True),
    sa.Column('parent_id', sa.String(), nullable=True),
    sa.Column('sibling_group', sa.String(), nullable=True),
    sa.Column('mode', sa.String(), nullable=True),
    sa.Column('plan', sa.String(), nullable=True),
    sa.Column('exc_type', sa.String(), nullable=True),
    sa.Column('exec_time', sa.Double(), nullable=True),
    sa.Column('term_tail', sa.String(), nullable=True),
    sa.Column('is_buggy', sa.Boolean(), nullable=True),
    sa.Column('status', sa.String(), nullable=True),
    sa.Column('grade_error', sa.String(), nullable=True),
    sa.Column('test_metric', sa.Double(), nullable=True),
    sa.Column('oriented', sa.Double(), nullable=True),
    sa.Column('reward', sa.Double(), nullable=True),
    sa.Column('source', sa.String(), nullable=True),
    sa.Column('n_children', sa.Integer(), nullable=True),
    sa.Column('resources_cpu', sa.Double(), nullable=True),
    sa.Column('resources_mem', sa.Double(), nullable=True),
    sa.Column('resources_ephemeral', sa.Double(), nullable=True),
    sa.Column('resources_gpu', sa.Double(), nullable=True),
    sa.Column('decl_malformed', sa.Boolean(), nullable=True),
    sa.Column('decl_miss_reason', sa.String(), nullable=True),
    sa.Column('decl_deps_ignored', sa.Boolean(), nullable=True),
    sa.Column('where', sa.String(), nullable=True),
    sa.Column('exec_pending_s', sa.Double(), nullable=True, comment='exec_timings.pending'),
    sa.Column('exec_stage_s', sa.Double(), nullable=True, comment='exec_timings.stage'),
    sa.Column('exec_exec_s', sa.Double(), nullable=True, comment='exec_timings.exec'),
    sa.Column('exec_retrieve_s', sa.Double(), nullable=True, comment='exec_timings.retrieve'),
    sa.Column('gpu_util', sa.Double(), nullable=True),
    sa.Column('depth', sa.Integer(), nullable=True),
    sa.Column('returncode', sa.Integer(), nullable=True),
    sa.Column('parent_oriented', sa.Double(), nullable=True),
    sa.Column('parent_P', sa.Double(), nullable=True),
    sa.Column('parent_P_evidence', sa.JSON(), nullable=True),
    sa.Column('improve_delta', sa.Double(), nullable=True),
    sa.Column('group_best', sa.Boolean(), nullable=True),
    sa.Column('medal', sa.String(), nullable=True),
    sa.Column('attempt', sa.Integer(), nullable=True),
    sa.Column('cpu_util_mean', sa.Double(), nullable=True),
    sa.Column('cpu_util_peak', sa.Double(), nullable=True),
    sa.Column('gpu_util_peak', sa.Double(), nullable=True),
    sa.Column('gpu_mem_used_gi', sa.Double(), nullable=True),
    sa.Column('mem_peak_gi', sa.Double(), nullable=True),
    sa.Column('gpu_name', sa.String(), nullable=True),
    sa.Column('kube_node', sa.String(), nullable=True),
    sa.Column('schema_kind', sa.String(), nullable=True, comment='A, B or C by the keys present'),
    sa.Column('n_response_tokens', sa.Integer(), nullable=True, comment='len(response_token_ids)'),
    sa.Column('n_response_logprobs', sa.Integer(), nullable=True, comment='len(response_logprobs)'),
    sa.Column('code_chars', sa.Integer(), nullable=True, comment='len(code); 0 for empty code'),
    sa.Column('extra', sa.JSON(), nullable=True, comment='unknown keys, and values that fit no typed column'),
    sa.PrimaryKeyConstraint('source_id', 'line_no')
    )
    op.create_table('questions',
    sa.Column('question_id', sa.String(), nullable=False, comment='e.g. 09-multitask-humanrank'),
    sa.Column('title', sa.String(), nullable=True),
    sa.Column('data_root', sa.String(), nullable=True, comment='where the published data root lives'),
    sa.Column('notes', sa.String(), nullable=True),
    sa.PrimaryKeyConstraint('question_id')
    )
    op.create_table('rounds',
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('round', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('source_path', sa.String(), nullable=True, comment='the round_<N> directory'),
    sa.PrimaryKeyConstraint('run_id', 'round')
    )
    op.create_table('runs',
    sa.Column('run_id', sa.String(), nullable=False, comment="the run directory's name"),
    sa.Column('question_id', sa.String(), nullable=True),
    sa.Column('arm', sa.String(), nullable=True, comment='NULL when the arm is unknown'),
    sa.Column('kind', sa.String(), nullable=False, comment='training | probe | smoke | stress | unknown'),
    sa.Column('wandb_run', sa.String(), nullable=True),
    sa.Column('resumed_from_run', sa.String(), nullable=True),
    sa.Column('resumed_from_step', sa.Integer(), nullable=True),
    sa.Column('lost', sa.Boolean(), nullable=False, comment='run directory is a dangling link'),
    sa.Column('started_at', sa.DateTime(), nullable=True, comment='parsed from the run id when it is a timestamp'),
    sa.Column('source_path', sa.String(), nullable=True),
    sa.Column('model', sa.String(), nullable=True),
    sa.Column('seed', sa.Integer(), nullable=True),
    sa.Column('overrides', sa.JSON(), nullable=True, comment='per-run settings that differ from the arm'),
    sa.Column('notes', sa.String(), nullable=True),
    sa.PrimaryKeyConstraint('run_id')
    )
    op.create_table('sibling_groups',
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('round', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('task', sa.String(), nullable=False),
    sa.Column('sibling_group', sa.String(), nullable=False),
    sa.Column('expansion_step', sa.Integer(), nullable=True, comment='the expansion index within the round'),
    sa.Column('parent_id', sa.String(), nullable=True, comment='the parent all siblings expanded; NULL for drafts'),
    sa.Column('size', sa.Integer(), nullable=False),
    sa.Column('source_id', sa.Integer(), nullable=True),
    sa.PrimaryKeyConstraint('run_id', 'round', 'task', 'sibling_group')
    )
    op.create_table('sources',
    sa.Column('source_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('path', sa.String(), nullable=False),
    sa.Column('kind', sa.String(), nullable=False, comment='nodes | summary | timing | wandb_config | wandb_history | wandb_summary | train_round'),
    sa.Column('run_id', sa.String(), nullable=True),
    sa.Column('round', sa.Integer(), nullable=True),
    sa.Column('task', sa.String(), nullable=True),
    sa.Column('size_bytes', sa.BigInteger(), nullable=True),
    sa.Column('mtime_ns', sa.BigInteger(), nullable=True),
    sa.Column('content_hash', sa.String(), nullable=True),
    sa.Column('rows', sa.Integer(), nullable=True, comment='rows that landed'),
    sa.Column('rows_rejected', sa.Integer(), nullable=True),
    sa.Column('ingested_at', sa.DateTime(), nullable=True),
    sa.Column('error', sa.String(), nullable=True, comment='why the whole file failed, if it did'),
    sa.PrimaryKeyConstraint('source_id'),
    sa.UniqueConstraint('path')
    )
    op.create_table('steps',
    sa.Column('source_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('line_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('step', sa.Integer(), nullable=False, comment='step N is the update after round N'),
    sa.Column('total_s', sa.Double(), nullable=True),
    sa.Column('update_weights_s', sa.Double(), nullable=True),
    sa.Column('gen_s', sa.Double(), nullable=True),
    sa.Column('old_log_prob_s', sa.Double(), nullable=True),
    sa.Column('ref_s', sa.Double(), nullable=True),
    sa.Column('adv_s', sa.Double(), nullable=True),
    sa.Column('update_actor_s', sa.Double(), nullable=True),
    sa.Column('save_checkpoint_s', sa.Double(), nullable=True, comment='NULL on steps that did not save'),
    sa.Column('extra', sa.JSON(), nullable=True, comment='unknown phases and keys'),
    sa.PrimaryKeyConstraint('source_id', 'line_no')
    )
    op.create_table('task_rounds',
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('round', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('task', sa.String(), nullable=False),
    sa.Column('summary_present', sa.Boolean(), nullable=False),
    sa.Column('node_file_present', sa.Boolean(), nullable=False),
    sa.Column('has_tree', sa.Boolean(), nullable=False),
    sa.Column('has_transcript', sa.Boolean(), nullable=False),
    sa.Column('node_source_id', sa.Integer(), nullable=True),
    sa.Column('summary_source_id', sa.Integer(), nullable=True),
    sa.Column('exp_id', sa.String(), nullable=True),
    sa.Column('summary_round', sa.Integer(), nullable=True),
    sa.Column('model', sa.String(), nullable=True),
    sa.Column('exec_backend', sa.String(), nullable=True),
    sa.Column('adapter_path', sa.String(), nullable=True),
    sa.Column('nodes', sa.Integer(), nullable=True),
    sa.Column('valid', sa.Integer(), nullable=True),
    sa.Column('buffer_nodes', sa.Integer(), nullable=True),
    sa.Column('expansions', sa.Integer(), nullable=True),
    sa.Column('phase', sa.String(), nullable=True),
    sa.Column('best_test_metric', sa.Double(), nullable=True),
    sa.Column('best_node_id', sa.String(), nullable=True),
    sa.Column('honest_test_metric', sa.Double(), nullable=True),
    sa.Column('rollout_file', sa.String(), nullable=True),
    sa.Column('workspace', sa.String(), nullable=True),
    sa.Column('gen_llm_seconds', sa.Double(), nullable=True),
    sa.Column('gen_exec_seconds', sa.Double(), nullable=True),
    sa.Column('extra', sa.JSON(), nullable=True, comment='summary keys not listed above'),
    sa.PrimaryKeyConstraint('run_id', 'round', 'task')
    )
    op.create_index('ix_nodes_run_round_task', 'nodes', ['run_id', 'round', 'task'], unique=False)
    op.create_index('ix_nodes_node_id', 'nodes', ['run_id', 'node_id'], unique=False)
    op.create_index('ix_steps_run_step', 'steps', ['run_id', 'step'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_steps_run_step', table_name='steps')
    op.drop_index('ix_nodes_node_id', table_name='nodes')
    op.drop_index('ix_nodes_run_round_task', table_name='nodes')
    op.drop_table('task_rounds')
    op.drop_table('steps')
    op.drop_table('sources')
    op.drop_table('sibling_groups')
    op.drop_table('runs')
    op.drop_table('rounds')
    op.drop_table('questions')
    op.drop_table('nodes')
    op.drop_table('node_payloads')
    op.drop_table('ingest_errors')
    op.drop_table('arms')
