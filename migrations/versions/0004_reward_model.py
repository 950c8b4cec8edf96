"""Add the reward-model tables (seed 004): runs, references, budgets, jobs, steps, artifacts, evaluations.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('rm_runs',
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('task', sa.String(), nullable=True, comment="e.g. ultrafeedback_bt_rm_rewardbench"),
    sa.Column('agent', sa.String(), nullable=True),
    sa.Column('base_model', sa.String(), nullable=True),
    sa.Column('train_pairs', sa.Integer(), nullable=True, comment="preference pairs the run may train on"),
    sa.Column('proxy_evaluator', sa.String(), nullable=True),
    sa.Column('final_evaluator', sa.String(), nullable=True),
    sa.Column('reference_id', sa.String(), nullable=True, comment="-> rm_references: the same-protocol reference"),
    sa.Column('source_id', sa.Integer(), nullable=True),
    sa.Column('extra', sa.JSON(), nullable=True, comment="manifest keys not listed above"),
    sa.PrimaryKeyConstraint('run_id')
    )
    op.create_table('rm_references',
    sa.Column('reference_id', sa.String(), nullable=False),
    sa.Column('task', sa.String(), nullable=True),
    sa.Column('evaluator', sa.String(), nullable=False),
    sa.Column('split', sa.String(), nullable=True, comment="proxy | full"),
    sa.Column('n', sa.Integer(), nullable=True),
    sa.Column('score', sa.Double(), nullable=False),
    sa.Column('direction', sa.String(), nullable=True, comment="maximize | minimize"),
    sa.Column('protocol', sa.String(), nullable=True, comment="how the reference was produced"),
    sa.Column('train_s', sa.Double(), nullable=True, comment="the reference run's training seconds"),
    sa.Column('score_s', sa.Double(), nullable=True, comment="the reference run's scoring seconds"),
    sa.Column('peak_mem_mib', sa.Double(), nullable=True, comment="the reference run's peak training memory"),
    sa.Column('source_id', sa.Integer(), nullable=True),
    sa.Column('notes', sa.String(), nullable=True),
    sa.PrimaryKeyConstraint('reference_id')
    )
    op.create_table('rm_budgets',
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('phase', sa.String(), nullable=False, comment="exploration | formal"),
    sa.Column('wall_clock_s', sa.Double(), nullable=True, comment="the budget the harness injected"),
    sa.Column('reserve_s', sa.Double(), nullable=True, comment="held back from wall_clock_s for scoring/publishing"),
    sa.Column('train_s', sa.Double(), nullable=True, comment="seconds spent training"),
    sa.Column('elapsed_s', sa.Double(), nullable=True, comment="seconds the whole phase ran"),
    sa.Column('stop_reason', sa.String(), nullable=True, comment="e.g. wall_clock_budget_exhausted, completed, submitted"),
    sa.Column('steps', sa.Integer(), nullable=True, comment="optimizer steps completed (cumulative progress)"),
    sa.Column('members', sa.Integer(), nullable=True, comment="soup members completed"),
    sa.Column('steps_per_member', sa.Integer(), nullable=True),
    sa.Column('snapshots_published', sa.Integer(), nullable=True),
    sa.Column('snapshots_retained', sa.Integer(), nullable=True),
    sa.Column('source_id', sa.Integer(), nullable=True),
    sa.Column('extra', sa.JSON(), nullable=True),
    sa.PrimaryKeyConstraint('run_id', 'phase')
    )
    op.create_table('rm_jobs',
    sa.Column('source_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('line_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('job', sa.String(), nullable=False, comment="unique within the run, e.g. U-03/len256, formal"),
    sa.Column('phase', sa.String(), nullable=False, comment="exploration | formal"),
    sa.Column('unit', sa.String(), nullable=True, comment="U-01, U-02, ... (NULL for the formal replay)"),
    sa.Column('title', sa.String(), nullable=True),
    sa.Column('pairs', sa.Integer(), nullable=True),
    sa.Column('steps_planned', sa.Integer(), nullable=True),
    sa.Column('steps_done', sa.Integer(), nullable=True),
    sa.Column('micro_batch', sa.Integer(), nullable=True),
    sa.Column('grad_accum', sa.Integer(), nullable=True),
    sa.Column('learning_rate', sa.Double(), nullable=True),
    sa.Column('seed', sa.Integer(), nullable=True),
    sa.Column('members', sa.Integer(), nullable=True, comment="soup members this job averaged"),
    sa.Column('seconds', sa.Double(), nullable=True, comment="training seconds"),
    sa.Column('peak_mem_gb', sa.Double(), nullable=True, comment="peak GPU memory, GB as the run reports it"),
    sa.Column('status', sa.String(), nullable=True, comment="completed | killed | oom | failed"),
    sa.Column('submitted', sa.Boolean(), nullable=True, comment="the exploration evidence the submission rests on"),
    sa.Column('notes', sa.String(), nullable=True),
    sa.Column('extra', sa.JSON(), nullable=True),
    sa.PrimaryKeyConstraint('source_id', 'line_no')
    )
    op.create_table('rm_steps',
    sa.Column('source_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('line_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('job', sa.String(), nullable=False),
    sa.Column('step', sa.Integer(), nullable=False, comment="cumulative optimizer step (progress)"),
    sa.Column('member', sa.Integer(), nullable=True, comment="soup member index m (seed 42+m); 0 without a soup"),
    sa.Column('loss', sa.Double(), nullable=True, comment="Bradley-Terry -log sigmoid(r_chosen - r_rejected)"),
    sa.Column('accuracy', sa.Double(), nullable=True, comment="share of pairs with r_chosen > r_rejected"),
    sa.Column('lr', sa.Double(), nullable=True),
    sa.Column('grad_norm', sa.Double(), nullable=True),
    sa.Column('seconds', sa.Double(), nullable=True, comment="wall seconds of the step"),
    sa.Column('peak_mem_gib', sa.Double(), nullable=True),
    sa.Column('extra', sa.JSON(), nullable=True),
    sa.PrimaryKeyConstraint('source_id', 'line_no')
    )
    op.create_table('rm_artifacts',
    sa.Column('source_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('line_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('job', sa.String(), nullable=False),
    sa.Column('progress', sa.Integer(), nullable=False, comment="optimizer steps behind the artifact"),
    sa.Column('path', sa.String(), nullable=True),
    sa.Column('parameters', sa.BigInteger(), nullable=True),
    sa.Column('dtype', sa.String(), nullable=True),
    sa.Column('format', sa.String(), nullable=True, comment="full | lora_delta"),
    sa.Column('loadable', sa.Boolean(), nullable=True),
    sa.Column('retained', sa.Boolean(), nullable=True, comment="kept (at most three per run are accepted)"),
    sa.Column('members', sa.Integer(), nullable=True, comment="soup members averaged into it"),
    sa.Column('extra', sa.JSON(), nullable=True),
    sa.PrimaryKeyConstraint('source_id', 'line_no')
    )
    op.create_table('rm_evaluations',
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('evaluation_id', sa.String(), nullable=False, comment="the summary's file stem"),
    sa.Column('job', sa.String(), nullable=True),
    sa.Column('phase', sa.String(), nullable=False, comment="exploration | formal"),
    sa.Column('unit', sa.String(), nullable=True),
    sa.Column('progress', sa.Integer(), nullable=True, comment="the evaluated artifact's progress"),
    sa.Column('evaluator', sa.String(), nullable=False),
    sa.Column('split', sa.String(), nullable=False, comment="proxy | full | proxy_rows (diagnostic)"),
    sa.Column('direction', sa.String(), nullable=True, comment="maximize | minimize"),
    sa.Column('n', sa.Integer(), nullable=True),
    sa.Column('score', sa.Double(), nullable=True),
    sa.Column('se', sa.Double(), nullable=True, comment="descriptive weighted-binomial standard error"),
    sa.Column('official', sa.Boolean(), nullable=False, comment="a receipt matches the summary"),
    sa.Column('receipt_status', sa.String(), nullable=False, comment="match | missing | mismatch"),
    sa.Column('summary_path', sa.String(), nullable=True),
    sa.Column('summary_sha256', sa.String(), nullable=True),
    sa.Column('summary_size', sa.BigInteger(), nullable=True),
    sa.Column('receipt_path', sa.String(), nullable=True),
    sa.Column('receipt_sha256', sa.String(), nullable=True, comment="as the receipt states it"),
    sa.Column('receipt_size', sa.BigInteger(), nullable=True, comment="as the receipt states it"),
    sa.Column('seconds', sa.Double(), nullable=True, comment="scoring seconds"),
    sa.Column('source_id', sa.Integer(), nullable=True),
    sa.Column('extra', sa.JSON(), nullable=True),
    sa.PrimaryKeyConstraint('run_id', 'evaluation_id')
    )
    op.create_table('rm_eval_sections',
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('evaluation_id', sa.String(), nullable=False),
    sa.Column('section', sa.String(), nullable=False, comment="Chat | Chat Hard | Safety | Reasoning"),
    sa.Column('score', sa.Double(), nullable=True),
    sa.Column('n', sa.Integer(), nullable=True),
    sa.Column('source_id', sa.Integer(), nullable=True),
    sa.PrimaryKeyConstraint('run_id', 'evaluation_id', 'section')
    )
    op.create_index('ix_rm_jobs_run_job', 'rm_jobs', ['run_id', 'job'], unique=False)
    op.create_index('ix_rm_steps_run_job_step', 'rm_steps', ['run_id', 'job', 'step'], unique=False)
    op.create_index('ix_rm_artifacts_run_job', 'rm_artifacts', ['run_id', 'job', 'progress'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_rm_artifacts_run_job', table_name='rm_artifacts')
    op.drop_index('ix_rm_steps_run_job_step', table_name='rm_steps')
    op.drop_index('ix_rm_jobs_run_job', table_name='rm_jobs')
    op.drop_table('rm_eval_sections')
    op.drop_table('rm_evaluations')
    op.drop_table('rm_artifacts')
    op.drop_table('rm_steps')
    op.drop_table('rm_jobs')
    op.drop_table('rm_budgets')
    op.drop_table('rm_references')
    op.drop_table('rm_runs')
