"""Indexes for the filtered record lists: status and creation time per company and kind.

The lists of deposits, withdrawals, transfers, bank and virtual accounts, refunds, chargebacks,
payouts and saved cards filter by ``status`` and by a ``created_gte``/``created_lt`` window
(issue 24). Without these indexes a filtered list read every record of the company's kind.

On PostgreSQL a plain ``CREATE INDEX`` blocks writes to ``treasury_records`` while it builds.
On a large table, create them first by hand without blocking (``CREATE INDEX CONCURRENTLY
ix_treasury_records_company_id_kind_status_id ON treasury_records (company_id, kind, status,
id)`` and ``… ix_treasury_records_company_id_kind_created_at ON treasury_records (company_id,
kind, created_at)``); this migration then finds them and skips them.

Revision ID: 0012
Revises: 0013
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_treasury_records_company_id_kind_status_id",
        "treasury_records",
        ["company_id", "kind", "status", "id"],
        unique=False,
        if_not_exists=True,
    )
    op.create_index(
        "ix_treasury_records_company_id_kind_created_at",
        "treasury_records",
        ["company_id", "kind", "created_at"],
        unique=False,
        if_not_exists=True,
    )


def downgrade() -> None:
    op.drop_index("ix_treasury_records_company_id_kind_created_at", table_name="treasury_records")
    op.drop_index("ix_treasury_records_company_id_kind_status_id", table_name="treasury_records")
