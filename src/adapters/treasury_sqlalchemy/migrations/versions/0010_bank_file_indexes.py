"""Indexes of the bank-file rail over ``treasury_records``.

- ``(kind, status, id)``: the rail's work lists across companies (pending withdrawals to export,
  pending deposits a statement may settle, unmatched statement lines), read oldest first.
- A unique index on ``lookup_key`` for statement lines (kind ``bsl``): a line is remembered by
  its company, account and the bank's entry reference, and two imports of one statement racing
  each other must not both apply a line; the second's insert fails and its transaction rolls
  back whole. Partial, so the other kinds' lookup keys keep their rules.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_treasury_records_kind_status_id", "treasury_records", ["kind", "status", "id"]
    )
    op.create_index(
        "ux_treasury_records_bank_line",
        "treasury_records",
        ["lookup_key"],
        unique=True,
        postgresql_where=sa.text("kind = 'bsl'"),
        sqlite_where=sa.text("kind = 'bsl'"),
    )


def downgrade() -> None:
    op.drop_index("ux_treasury_records_bank_line", table_name="treasury_records")
    op.drop_index("ix_treasury_records_kind_status_id", table_name="treasury_records")
