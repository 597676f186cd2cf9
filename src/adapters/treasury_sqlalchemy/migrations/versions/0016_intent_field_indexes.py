"""Indexes for the intents' reference and e-mail filters (issue 27, the dashboard at volume).

``merchant_reference`` and ``customer_email`` live in each intent's JSON ``body``; the list
filter compares ``CAST(json_extract(body, '$."merchant_reference"') AS TEXT)`` (SQLite) or
``(CAST(body AS JSON) ->> 'merchant_reference')`` (PostgreSQL) with the wanted value. Without an
index on that same expression the filter read every intent body of the company, so its cost
grew with the company's intents (docs/performance.md, "Dashboard pages at volume", has the
figures). One index per field, ``(company_id, <field>)``.

On PostgreSQL a plain ``CREATE INDEX`` blocks writes to the table while it builds. On a large
table build them by hand first, without blocking::

    CREATE INDEX CONCURRENTLY ix_payment_intents_company_id_merchant_reference
        ON payment_intents (company_id, (CAST(body AS JSON) ->> 'merchant_reference'));
    CREATE INDEX CONCURRENTLY ix_payment_intents_company_id_customer_email
        ON payment_intents (company_id, (CAST(body AS JSON) ->> 'customer_email'));

This migration then finds them and leaves them.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

MEMBERS = ("merchant_reference", "customer_email")


def _expression(dialect: str, member: str) -> str:
    # Exactly as treasury_sqlalchemy.record_lists.DocumentField writes the filter.
    if dialect == "postgresql":
        return f"(CAST(body AS JSON) ->> '{member}')"
    return f"CAST(json_extract(body, '$.\"{member}\"') AS TEXT)"


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    for member in MEMBERS:
        op.execute(
            f"CREATE INDEX IF NOT EXISTS ix_payment_intents_company_id_{member}"
            f" ON payment_intents (company_id, {_expression(dialect, member)})"
        )


def downgrade() -> None:
    for member in MEMBERS:
        op.execute(f"DROP INDEX IF EXISTS ix_payment_intents_company_id_{member}")
