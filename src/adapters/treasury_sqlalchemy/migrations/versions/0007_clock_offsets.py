"""The sandbox clock's offset, kept in the database.

The sandbox clock is wall time plus an offset that ``POST /api/v1/sandbox/clock/advance`` grows.
The offset lived in the memory of the process that advanced it, so a restart set business time
back (holds, settlements and deliveries due "later" were suddenly in the future again), and a
``treasury worker`` never saw an advance made through ``treasury serve``. One row now holds it.

A new, empty table: quick on any database. No row is written here; the first advance creates
it, and until then the offset is zero, as it was at every start before.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "clock_offsets",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("offset_us", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_clock_offsets")),
    )


def downgrade() -> None:
    op.drop_table("clock_offsets")
