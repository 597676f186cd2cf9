"""``deliveries.destination``: where each delivery goes, for the fair claim.

The worker claims deliveries round-robin over (company, destination) and leaves out the
destinations that already have their limit of sends in flight, so a dead receiver's backlog
never stands in front of the others'. The destination (``scheme://host:port`` of the URL) was
inside the JSON body only; this column lets the claim's query group and filter by it.

Existing pending rows are filled in from their bodies (finished ones are never claimed again
and keep NULL, which the claim treats as a destination of its own).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from treasury_core.notifications.deliveries import destination_of

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("deliveries", sa.Column("destination", sa.String(length=255), nullable=True))
    deliveries = sa.table(
        "deliveries",
        sa.column("id", sa.String),
        sa.column("status", sa.String),
        sa.column("body", sa.Text),
        sa.column("destination", sa.String),
    )
    conn = op.get_bind()
    pending = conn.execute(
        sa.select(deliveries.c.id, deliveries.c.body).where(deliveries.c.status == "pending")
    ).all()
    for row in pending:
        destination = destination_of(json.loads(row.body)["url"])
        conn.execute(
            sa.update(deliveries).where(deliveries.c.id == row.id).values(destination=destination)
        )


def downgrade() -> None:
    op.drop_column("deliveries", "destination")
