"""Columns and indexes for ``treasury events status``: attempts, the latest one, the endpoint.

The status reports deliveries per second (deliveries attempted in the last minute) and the
endpoints whose pending deliveries keep failing. Attempts lived inside the JSON body only, so
either would have read every delivery ever made. Three columns, written from the delivery
itself with every insert and update, and two indexes make both reads follow what they report:

- ``last_attempt_at`` (real time of the latest attempt), indexed: the rate counts a range of it;
- ``attempts`` (how many) and ``endpoint_id``, with a partial index over the pending deliveries
  already attempted (every attempt of a pending delivery failed): the failing endpoints.

Existing pending rows are filled in from their bodies; finished ones keep no attempt time
(they were attempted before the upgrade, outside any window the status looks at).

On PostgreSQL a plain ``CREATE INDEX`` blocks writes to ``deliveries`` while it builds. On a
large table, add the columns and build the indexes by hand first, without blocking::

    ALTER TABLE deliveries ADD COLUMN endpoint_id VARCHAR(64),
        ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0,
        ADD COLUMN last_attempt_at TIMESTAMP WITH TIME ZONE;
    CREATE INDEX CONCURRENTLY ix_deliveries_last_attempt_at ON deliveries (last_attempt_at);
    CREATE INDEX CONCURRENTLY ix_deliveries_failing ON deliveries (company_id, endpoint_id)
        WHERE status = 'pending' AND attempts > 0;

This migration then finds them, skips them, and only fills in the pending rows.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("deliveries")}
    for column in (
        sa.Column("endpoint_id", sa.String(length=64), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
    ):
        if column.name not in present:  # added by hand beforehand (see above)
            op.add_column("deliveries", column)
    deliveries = sa.table(
        "deliveries",
        sa.column("id", sa.String),
        sa.column("status", sa.String),
        sa.column("body", sa.Text),
        sa.column("endpoint_id", sa.String),
        sa.column("attempts", sa.Integer),
    )
    conn = op.get_bind()
    pending = conn.execute(
        sa.select(deliveries.c.id, deliveries.c.body).where(deliveries.c.status == "pending")
    ).all()
    for row in pending:
        body = json.loads(row.body)
        conn.execute(
            sa.update(deliveries)
            .where(deliveries.c.id == row.id)
            .values(endpoint_id=body.get("endpoint_id"), attempts=len(body.get("attempts", ())))
        )
    op.create_index(
        "ix_deliveries_last_attempt_at", "deliveries", ["last_attempt_at"], if_not_exists=True
    )
    op.create_index(
        "ix_deliveries_failing",
        "deliveries",
        ["company_id", "endpoint_id"],
        postgresql_where=sa.text("status = 'pending' AND attempts > 0"),
        sqlite_where=sa.text("status = 'pending' AND attempts > 0"),
        if_not_exists=True,
    )


def downgrade() -> None:
    op.drop_index("ix_deliveries_failing", table_name="deliveries")
    op.drop_index("ix_deliveries_last_attempt_at", table_name="deliveries")
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("last_attempt_at")
        batch.drop_column("attempts")
        batch.drop_column("endpoint_id")
