"""Deliveries of outbox events, and which events were fanned out.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True))
    # Events written before this revision were already reported the old way (or not meant for
    # delivery at all): they are not sent again.
    op.execute(sa.text("UPDATE events SET dispatched_at = CURRENT_TIMESTAMP"))
    op.create_index(
        "ix_events_undispatched",
        "events",
        ["id"],
        unique=False,
        postgresql_where=sa.text("dispatched_at IS NULL"),
        sqlite_where=sa.text("dispatched_at IS NULL"),
    )
    op.create_table(
        "deliveries",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("company_id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deliveries")),
    )
    op.create_index("ix_deliveries_event_id", "deliveries", ["event_id"], unique=False)
    op.create_index(
        "ix_deliveries_due",
        "deliveries",
        ["next_attempt_at"],
        unique=False,
        postgresql_where=sa.text("status = 'pending'"),
        sqlite_where=sa.text("status = 'pending'"),
    )


def downgrade() -> None:
    op.drop_table("deliveries")
    op.drop_index("ix_events_undispatched", table_name="events")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("dispatched_at")
