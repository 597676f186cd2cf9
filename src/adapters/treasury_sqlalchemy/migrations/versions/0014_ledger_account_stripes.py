"""Striped counters: ``ledger_account_stripes`` for the accounts never checked for funds.

The outside world, FX liquidity, fee and settlement accounts take their movements' deltas on
one of several stripe rows instead of their own row, so concurrent movements of a currency no
longer queue behind one row lock (issue 26; ``treasury_sqlalchemy.stripes``). An account's
counters are its row plus the sum of its stripes. Existing counters stay on the account rows;
the table starts empty, so nothing is moved.

Revision ID: 0014
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0012"
branch_labels = None
depends_on = None

_COUNTERS = (
    "debits_posted",
    "credits_posted",
    "debits_pending_holds",
    "debits_pending_out",
    "credits_pending",
)


def upgrade() -> None:
    op.create_table(
        "ledger_account_stripes",
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("stripe", sa.Integer, nullable=False, autoincrement=False),
        *(sa.Column(name, sa.BigInteger, nullable=False) for name in _COUNTERS),
        sa.PrimaryKeyConstraint("account_id", "stripe"),
    )


def downgrade() -> None:
    # Fold the stripes back into the account rows first, so no movement is lost.
    # Only our own column names are interpolated.
    added = ", ".join(
        f"{c} = {c} + COALESCE((SELECT SUM(s.{c}) FROM ledger_account_stripes s"  # noqa: S608
        f" WHERE s.account_id = ledger_accounts.id), 0)"
        for c in _COUNTERS
    )
    op.execute(f"UPDATE ledger_accounts SET {added}")  # noqa: S608
    op.drop_table("ledger_account_stripes")
