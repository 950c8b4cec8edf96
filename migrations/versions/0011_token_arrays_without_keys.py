"""node_payloads and node_train_tokens without a primary key, so that a small write logs and checkpoints only what it adds.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06

DuckDB (1.5) logs a commit's rows appended to a table that has both an index and LIST columns
by writing the table's whole open row group to the WAL: two payloads added to a row group of
1,500 wrote 327 MB of WAL and took 3.8 s; without the key, 0.43 MB and 0.2 s. Those are the
two tables of token arrays; their key (source_id, line_no) stays NOT NULL and unique by how
they are written (a source's rows are deleted before it is loaded again) and is checked by
the quality gate. A small write then stays in the WAL (warehouse/db.py, LAZY_CHECKPOINT_BYTES).
The rows are copied, in their order, into tables without the key, which take the old names.
DuckLake has no keys: nothing to do there.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def _payloads(name: str, keyed: bool) -> None:
    op.create_table(name,
    sa.Column('source_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('line_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('prompt_messages', sa.JSON(), nullable=True),
    sa.Column('raw_completion', sa.String(), nullable=True),
    sa.Column('thinking', sa.String(), nullable=True),
    sa.Column('code', sa.String(), nullable=True),
    sa.Column('response_token_ids', sa.ARRAY(sa.Integer()), nullable=True),
    sa.Column('response_logprobs', sa.ARRAY(sa.Double()), nullable=True),
    *([sa.PrimaryKeyConstraint('source_id', 'line_no')] if keyed else []),
    )


def _train_tokens(name: str, keyed: bool) -> None:
    op.create_table(name,
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
    *([sa.PrimaryKeyConstraint('source_id', 'line_no')] if keyed else []),
    )


# Rows copied per committed chunk: a whole row group (warehouse/db.py, ROW_GROUP_SIZE), which
# DuckDB writes straight into the file. Smaller chunks each rewrote the new table's open row
# group, and one statement (or one transaction) of a warehouse's payloads ran out of a 1.8 GB
# budget at ten copies of the 1.3 GB root (48,000 payloads).
_ROWS_PER_CHUNK = 2048


def _replace(table: str, create, keyed: bool) -> None:
    """`table`'s rows, in their order, into a new table (`keyed` or not) that takes its name.

    Copied _ROWS_PER_CHUNK rows at a time (row-id ranges holding that many rows), each chunk
    committed: memory stays bounded, and an interrupted upgrade (still at 0010, `table`
    untouched) goes on after the rows the new table already holds when run again. The swap
    of the two tables is the last transaction, with the revision's.
    """
    bind = op.get_bind()
    new = f"{table}_rekeyed"
    if not sa.inspect(bind).has_table(new):
        create(new, keyed)
    done = bind.exec_driver_sql(f'SELECT count(*) FROM "{new}"').scalar()
    # the first row id of every chunk, and the last row id of all
    starts = [r for (r,) in bind.exec_driver_sql(
        f'SELECT rowid FROM (SELECT rowid, row_number() OVER (ORDER BY rowid) - 1 AS "n" FROM "{table}") '
        f'WHERE "n" % {_ROWS_PER_CHUNK} = 0 ORDER BY 1').fetchall()]
    last = bind.exec_driver_sql(f'SELECT max(rowid) FROM "{table}"').scalar()
    for k, low in enumerate(starts):
        if k * _ROWS_PER_CHUNK < done:
            continue
        high = starts[k + 1] - 1 if k + 1 < len(starts) else last
        bind.exec_driver_sql(f'INSERT INTO "{new}" BY NAME SELECT * FROM "{table}" '
                             f'WHERE rowid BETWEEN {int(low)} AND {int(high)}')
        bind.exec_driver_sql("COMMIT")  # DuckDB's transaction; Alembic's goes on in the next
        bind.exec_driver_sql("BEGIN TRANSACTION")
    op.drop_table(table)
    op.rename_table(new, table)


def upgrade() -> None:
    if getattr(op.get_bind().dialect, "warehouse_ducklake", False):
        return
    _replace("node_payloads", _payloads, keyed=False)
    _replace("node_train_tokens", _train_tokens, keyed=False)


def downgrade() -> None:
    if getattr(op.get_bind().dialect, "warehouse_ducklake", False):
        return
    _replace("node_payloads", _payloads, keyed=True)
    _replace("node_train_tokens", _train_tokens, keyed=True)
