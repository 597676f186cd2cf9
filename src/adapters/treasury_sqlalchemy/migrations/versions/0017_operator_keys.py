"""The operator's keys.

Bank statements assert what money reached the treasury's accounts; they are the operator's to
import, never a merchant's. The operator's credential is its own: an ``ok_…`` key bound to no
company, stored as API keys are (its SHA-256 digest, unique), with a name that is unique among
live keys (a partial unique index, on both databases) so that revoking by name means one key.

A new, empty table: quick on any database. No key is written here; ``treasury operator-keys
create`` issues the first.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "operator_keys",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_operator_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_operator_keys_key_hash")),
    )
    op.create_index(
        "ix_operator_keys_live_name",
        "operator_keys",
        ["name"],
        unique=True,
        postgresql_where=sa.text("revoked_at IS NULL"),
        sqlite_where=sa.text("revoked_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_operator_keys_live_name", table_name="operator_keys")
    op.drop_table("operator_keys")
