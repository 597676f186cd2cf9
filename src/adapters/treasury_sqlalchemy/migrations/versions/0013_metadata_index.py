"""Metadata (issue 24): the wallets' column, and the list filter's indexes on PostgreSQL.

Metadata lives inside each intent's and treasury record's JSON ``body`` (decisions.md,
"Metadata"), and in a new nullable ``wallets.metadata`` column (a JSON object; wallets are
rows, not documents). The list filter is ``(CAST(body AS JSONB) -> 'metadata') @> :wanted``,
which a GIN index over the same expression answers for any key (``jsonb_path_ops``:
containment only, smaller than the default operator class): one on ``payment_intents``, one on
``treasury_records``. SQLite has no such index; there the filter reads the company's rows.
Wallets get none: a company has few.

On PostgreSQL a plain ``CREATE INDEX`` blocks writes to the table while it builds. On large
tables build them by hand first, without blocking::

    CREATE INDEX CONCURRENTLY ix_payment_intents_metadata ON payment_intents
        USING gin ((CAST(body AS JSONB) -> 'metadata') jsonb_path_ops);
    CREATE INDEX CONCURRENTLY ix_treasury_records_metadata ON treasury_records
        USING gin ((CAST(body AS JSONB) -> 'metadata') jsonb_path_ops);

This migration then finds them and leaves them. Adding the nullable column does not rewrite
the wallets table.

Revision ID: 0013
Revises: 0011
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0011"
branch_labels = None
depends_on = None

#: Index name → table.
INDEXES = {
    "ix_payment_intents_metadata": "payment_intents",
    "ix_treasury_records_metadata": "treasury_records",
}


def upgrade() -> None:
    op.add_column("wallets", sa.Column("metadata", sa.Text(), nullable=True))
    if op.get_bind().dialect.name != "postgresql":
        return
    for index, table in INDEXES.items():
        op.execute(
            f"CREATE INDEX IF NOT EXISTS {index} ON {table} "
            "USING gin ((CAST(body AS JSONB) -> 'metadata') jsonb_path_ops)"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for index in INDEXES:
            op.execute(f"DROP INDEX IF EXISTS {index}")
    with op.batch_alter_table("wallets") as batch:
        batch.drop_column("metadata")
