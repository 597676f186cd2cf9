"""An index on ``events.created_at`` for the retention purge.

Without it the worker loop's purge of events past the retention window scanned the whole events
table (58 ms at 100,000 events, linear in the table), inside a write transaction that holds
SQLite's one writer.

On PostgreSQL a plain ``CREATE INDEX`` blocks writes to ``events`` while it builds. On a large
events table, create it first by hand without blocking (``CREATE INDEX CONCURRENTLY
ix_events_created_at ON events (created_at)``); this migration then finds it and skips it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_events_created_at", "events", ["created_at"], unique=False, if_not_exists=True
    )


def downgrade() -> None:
    op.drop_index("ix_events_created_at", table_name="events")
