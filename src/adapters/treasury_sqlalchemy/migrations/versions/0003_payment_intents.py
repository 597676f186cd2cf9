"""Payment intents.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "payment_intents",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("company_id", sa.Integer(), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("lookup_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_payment_intents")),
        sa.UniqueConstraint("lookup_id", name=op.f("uq_payment_intents_lookup_id")),
    )
    op.create_index(
        "ix_payment_intents_company_id_id",
        "payment_intents",
        ["company_id", "id"],
        unique=False,
    )
    op.create_index(
        "ix_payment_intents_company_id_status_id",
        "payment_intents",
        ["company_id", "status", "id"],
        unique=False,
    )
    op.create_index(
        "ix_payment_intents_company_id_created_at",
        "payment_intents",
        ["company_id", "created_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_table("payment_intents")
