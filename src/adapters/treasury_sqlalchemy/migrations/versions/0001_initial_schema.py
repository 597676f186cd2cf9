"""Initial schema: tenancy, wallets, the ledger, the outbox and idempotency keys.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "companies",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_companies")),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("company_id", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=96), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    op.create_index("ix_events_company_id_id", "events", ["company_id", "id"], unique=False)

    op.create_table(
        "idempotency_keys",
        sa.Column("company_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("token", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_body", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("company_id", "key", name=op.f("pk_idempotency_keys")),
    )
    op.create_index(
        "ix_idempotency_keys_created_at", "idempotency_keys", ["created_at"], unique=False
    )

    op.create_table(
        "ledger_accounts",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("company_id", sa.Integer(), nullable=True),
        sa.Column("guarded", sa.Boolean(), nullable=False),
        sa.Column("overdraft_limit", sa.BigInteger(), nullable=False),
        sa.Column("debits_posted", sa.BigInteger(), nullable=False),
        sa.Column("credits_posted", sa.BigInteger(), nullable=False),
        sa.Column("debits_pending_holds", sa.BigInteger(), nullable=False),
        sa.Column("debits_pending_out", sa.BigInteger(), nullable=False),
        sa.Column("credits_pending", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_accounts")),
    )
    op.create_index(
        "ix_ledger_accounts_company_id_kind_id",
        "ledger_accounts",
        ["company_id", "kind", "id"],
        unique=False,
    )

    op.create_table(
        "ledger_pendings",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("debit_account_id", sa.String(length=64), nullable=False),
        sa.Column("credit_account_id", sa.String(length=64), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("category", sa.String(length=8), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("resolved_by", sa.String(length=80), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_pendings")),
    )
    op.create_index(
        "ix_ledger_pendings_due",
        "ledger_pendings",
        ["deadline"],
        unique=False,
        postgresql_where=sa.text("status = 'pending'"),
        sqlite_where=sa.text("status = 'pending'"),
    )

    op.create_table(
        "ledger_postings",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("journal_id", sa.String(length=64), nullable=False),
        sa.Column("operation", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("debit_account_id", sa.String(length=64), nullable=False),
        sa.Column("credit_account_id", sa.String(length=64), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("released", sa.BigInteger(), nullable=False),
        sa.Column("category", sa.String(length=8), nullable=True),
        sa.Column("pending_id", sa.String(length=80), nullable=True),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_postings")),
    )
    op.create_index(
        "ix_ledger_postings_journal_id", "ledger_postings", ["journal_id"], unique=False
    )

    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("company_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["company_id"], ["companies.id"], name=op.f("fk_api_keys_company_id_companies")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    op.create_index("ix_api_keys_company_id", "api_keys", ["company_id"], unique=False)

    op.create_table(
        "merchant_accounts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("company_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["company_id"], ["companies.id"], name=op.f("fk_merchant_accounts_company_id_companies")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_merchant_accounts")),
    )
    op.create_index(
        "ix_merchant_accounts_company_id", "merchant_accounts", ["company_id"], unique=False
    )

    op.create_table(
        "wallets",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("company_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["company_id"], ["companies.id"], name=op.f("fk_wallets_company_id_companies")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_wallets")),
    )
    op.create_index("ix_wallets_company_id_id", "wallets", ["company_id", "id"], unique=False)


def downgrade() -> None:
    op.drop_table("wallets")
    op.drop_table("merchant_accounts")
    op.drop_table("api_keys")
    op.drop_table("ledger_postings")
    op.drop_table("ledger_pendings")
    op.drop_table("ledger_accounts")
    op.drop_table("idempotency_keys")
    op.drop_table("events")
    op.drop_table("companies")
