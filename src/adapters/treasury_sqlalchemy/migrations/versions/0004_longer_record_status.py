"""Longer record statuses: payment method token intents are ``requires_payment_method``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # batch mode: SQLite cannot ALTER a column's type in place, so the table is copied there
    # (PostgreSQL widens a varchar without rewriting the table).
    with op.batch_alter_table("treasury_records") as batch:
        batch.alter_column("status", existing_type=sa.String(length=16), type_=sa.String(length=32))


def downgrade() -> None:
    with op.batch_alter_table("treasury_records") as batch:
        batch.alter_column("status", existing_type=sa.String(length=32), type_=sa.String(length=16))
