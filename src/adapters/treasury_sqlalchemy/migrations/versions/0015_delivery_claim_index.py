"""The fair delivery claim's index on PostgreSQL (issue 22, item 4).

The claim took its batch by numbering every due delivery within its (company, destination)
with a window function: PostgreSQL read and sorted the whole due backlog for every batch. It
now skips from one (company, destination) to the next and reads each one's first due rows
(``treasury_sqlalchemy.delivery_claim``), both through this index: pending deliveries by
company, destination (a NULL one, from before migration 0008, as ``''``), then due time and id.
SQLite keeps the window function and gets no index.

On PostgreSQL a plain ``CREATE INDEX`` blocks writes to the table while it builds. On a large
deliveries table build it by hand first, without blocking::

    CREATE INDEX CONCURRENTLY ix_deliveries_claim ON deliveries
        (company_id, (COALESCE(destination, '')), next_attempt_at, id)
        WHERE status = 'pending';

This migration then finds it and leaves it.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_deliveries_claim ON deliveries "
        "(company_id, (COALESCE(destination, '')), next_attempt_at, id) "
        "WHERE status = 'pending'"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_deliveries_claim")
