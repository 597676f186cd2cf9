"""Treasury records (deposits, withdrawals, transfers, bank and virtual accounts) and jobs.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("resource_id", sa.String(length=64), nullable=False),
        sa.Column("company_id", sa.Integer(), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index(
        "ix_jobs_due",
        "jobs",
        ["due_at"],
        unique=False,
        postgresql_where=sa.text("status = 'pending'"),
        sqlite_where=sa.text("status = 'pending'"),
    )
    op.create_index("ix_jobs_resource_id", "jobs", ["resource_id"], unique=False)

    op.create_table(
        "treasury_records",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("company_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("lookup_key", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_treasury_records")),
    )
    op.create_index(
        "ix_treasury_records_company_id_kind_id",
        "treasury_records",
        ["company_id", "kind", "id"],
        unique=False,
    )
    op.create_index(
        "ix_treasury_records_kind_lookup_key",
        "treasury_records",
        ["kind", "lookup_key"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_table("treasury_records")
    op.drop_table("jobs")
