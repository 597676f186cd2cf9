"""Dashboard sessions kept on the server.

A dashboard sign-in was a cookie alone, so a copy of it outlived sign-out. Each sign-in is now
a row: the digest of the browser's random token, the company (none for the operator), the key
it was opened with, when it began, was last seen and ended. Sign-out and the key's rotation or
revocation end it for every copy of the cookie.

A new, empty table: quick on any database. Cookies issued before it name no row, so their
browsers sign in again.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dashboard_sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("company_id", sa.Integer(), nullable=True),
        sa.Column("key_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["company_id"],
            ["companies.id"],
            name=op.f("fk_dashboard_sessions_company_id_companies"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dashboard_sessions")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_dashboard_sessions_token_hash")),
    )
    op.create_index("ix_dashboard_sessions_key_id", "dashboard_sessions", ["key_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_dashboard_sessions_key_id", table_name="dashboard_sessions")
    op.drop_table("dashboard_sessions")
