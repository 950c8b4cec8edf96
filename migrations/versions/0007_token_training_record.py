"""Add nodes.policy_version, node_train_tokens and the arms' mismatch limits: which weights wrote each node, the learner's logprobs per token, check 16's limits.

Revision ID: 0007
Revises: 0005
Create Date: 2026-12-06
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('arms', sa.Column('mismatch_max', sa.Double(), nullable=True,
                                    comment="check 16's limit on mult_prob_error; NULL: the default, 1.1"))
    op.add_column('arms', sa.Column('mismatch_share_gt1_max', sa.Double(), nullable=True,
                                    comment="check 16's limit on the share of tokens with |delta| > 1; NULL: the default, 0.01"))
    op.add_column('nodes', sa.Column('policy_version', sa.Integer(), nullable=True,
                                     comment='global step of the weights that generated the node (0: the base model)'))
    op.create_table('node_train_tokens',
    sa.Column('source_id', sa.Integer(), autoincrement=False, nullable=False, comment="the node's"),
    sa.Column('line_no', sa.Integer(), autoincrement=False, nullable=False, comment="the node's"),
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('step', sa.Integer(), nullable=True, comment='the GRPO step that trained on the node'),
    sa.Column('advantage', sa.Double(), nullable=True, comment="the node's advantage in that step's loss"),
    sa.Column('trainer_logprobs', sa.ARRAY(sa.Float()), nullable=True,
              comment="the learner's logprob of each response token before the update (old_log_prob)"),
    sa.Column('ref_logprobs', sa.ARRAY(sa.Float()), nullable=True,
              comment="the reference model's (adapter disabled)"),
    sa.Column('ratios', sa.ARRAY(sa.Float()), nullable=True,
              comment="exp(logprob - old_log_prob) in the last epoch's loss"),
    sa.Column('compared_tokens', sa.Integer(), nullable=True,
              comment="tokens with both the sampler's and the trainer's logprob"),
    sa.Column('mult_prob_error_sum', sa.Double(), nullable=True,
              comment='sum over those of exp(|trainer - sampler logprob|)'),
    sa.Column('mult_prob_error_max', sa.Double(), nullable=True,
              comment='max over those of exp(|trainer - sampler logprob|)'),
    sa.Column('abs_delta_gt_1', sa.Integer(), nullable=True,
              comment='of those, tokens with |trainer - sampler logprob| > 1'),
    sa.Column('kl_to_ref_sum', sa.Double(), nullable=True,
              comment="sum over trained tokens of the loss's k3 KL to the reference"),
    sa.PrimaryKeyConstraint('source_id', 'line_no')
    )


def downgrade() -> None:
    op.drop_column('arms', 'mismatch_share_gt1_max')
    op.drop_column('arms', 'mismatch_max')
    op.drop_table('node_train_tokens')
    # DuckDB drops no column of a table with indexes: drop them, then make them again
    op.drop_index('ix_nodes_run_round_task', table_name='nodes')
    op.drop_index('ix_nodes_node_id', table_name='nodes')
    op.drop_column('nodes', 'policy_version')
    op.create_index('ix_nodes_run_round_task', 'nodes', ['run_id', 'round', 'task'], unique=False)
    op.create_index('ix_nodes_node_id', 'nodes', ['run_id', 'node_id'], unique=False)
