"""A GIN index for the ``metadata[key]=value`` filter of the payment intent list (PostgreSQL).

Metadata lives inside each intent's JSON ``body`` (decisions.md, "Metadata"); the list filter is
``(CAST(body AS JSONB) -> 'metadata') @> :wanted``, which this index over the same expression
answers for any key (``jsonb_path_ops``: containment only, smaller than the default operator
class). SQLite has no such index; there the filter reads the company's rows.

The index is an expression index, which SQLAlchemy's metadata (schema.py) does not hold: it is
made here only, and ``test_migrations`` checks it exists.

On PostgreSQL a plain ``CREATE INDEX`` blocks writes to ``payment_intents`` while it builds. On
a large table build it by hand first, without blocking::

    CREATE INDEX CONCURRENTLY ix_payment_intents_metadata ON payment_intents
        USING gin ((CAST(body AS JSONB) -> 'metadata') jsonb_path_ops);

This migration then finds it and leaves it.

Revision ID: 0013
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0009"
branch_labels = None
depends_on = None

INDEX = "ix_payment_intents_metadata"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {INDEX} ON payment_intents "
        "USING gin ((CAST(body AS JSONB) -> 'metadata') jsonb_path_ops)"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP INDEX IF EXISTS {INDEX}")
