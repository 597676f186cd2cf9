"""Wallet histories: ``wallet_entries``, one row per posting that changed a wallet.

The wallet transactions and statements read a page or a period of a wallet's history with the
figures after each posting; deriving those from ``ledger_postings`` would sum the history per
row. The ledger writes an entry with each posting from now on (``treasury_core.ledger.history``);
this migration creates the table and its indexes and replays the postings already written, in
time order, so existing wallets get their whole history (their source is the journal).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections import defaultdict

import sqlalchemy as sa
from alembic import op

from treasury_core.ledger import (
    Account,
    AccountKind,
    CounterDelta,
    EntryPosition,
    Journal,
    LedgerPlan,
    PendingCategory,
    Posting,
    PostingKind,
    wallet_entries,
)

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_COLUMNS = (
    "wallet_id",
    "id",
    "seq",
    "posting_id",
    "journal_id",
    "type",
    "counter",
    "amount",
    "currency",
    "balance_after",
    "available_balance_after",
    "pending_in_after",
    "source_id",
    "created_at",
)


def upgrade() -> None:
    op.create_table(
        "wallet_entries",
        sa.Column("wallet_id", sa.String(length=64), nullable=False),
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("posting_id", sa.String(length=80), nullable=False),
        sa.Column("journal_id", sa.String(length=64), nullable=False),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("counter", sa.String(length=8), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("balance_after", sa.BigInteger(), nullable=False),
        sa.Column("available_balance_after", sa.BigInteger(), nullable=False),
        sa.Column("pending_in_after", sa.BigInteger(), nullable=False),
        sa.Column("source_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("wallet_id", "id", name="pk_wallet_entries"),
    )
    op.create_index(
        "ix_wallet_entries_wallet_id_created_at_seq",
        "wallet_entries",
        ["wallet_id", "created_at", "seq"],
    )
    op.create_index(
        "ix_wallet_entries_wallet_id_type_created_at_seq",
        "wallet_entries",
        ["wallet_id", "type", "created_at", "seq"],
    )
    _backfill()


def downgrade() -> None:
    op.drop_table("wallet_entries")


def _backfill() -> None:
    """Replay every journal that touched a wallet, oldest first, through the same function the
    ledger writes entries with."""
    from treasury_sqlalchemy import schema as t  # the typed timestamps of the live schema

    bind = op.get_bind()
    accounts = {
        r.id: Account(r.id, r.currency, AccountKind(r.kind), r.company_id)
        for r in bind.execute(sa.select(t.ledger_accounts))
    }
    wallets = [i for i, a in accounts.items() if a.kind is AccountKind.WALLET]
    if not wallets:
        return
    p = t.ledger_postings.c
    rows = bind.execute(
        sa.select(t.ledger_postings)
        .where(sa.or_(p.debit_account_id.in_(wallets), p.credit_account_id.in_(wallets)))
        .order_by(p.created_at, p.journal_id, p.id)
    ).all()
    journals: dict[str, list[sa.Row[tuple[object, ...]]]] = defaultdict(list)
    for row in rows:
        journals[row.journal_id].append(row)
    last: dict[str, EntryPosition | None] = dict.fromkeys(wallets)
    for journal_id, legs in journals.items():
        legs.sort(key=lambda r: int(r.id.rsplit(".", 1)[-1]))
        postings = tuple(_posting(r) for r in legs)
        deltas: dict[str, CounterDelta] = {}
        for posting in postings:
            for side in (posting.debit_account_id, posting.credit_account_id):
                deltas[side] = deltas.get(side, CounterDelta()) + posting.delta_for(side)
        for account_id, delta in deltas.items():
            accounts[account_id] = accounts[account_id].with_delta(delta)
        plan = LedgerPlan(
            journal=Journal(journal_id, (), operation=legs[0].operation),
            postings=postings,
            deltas=deltas,
            currencies={},
            new_pendings=(),
            resolved_pendings=(),
        )
        touched = {i: accounts[i] for i in deltas}
        entries = wallet_entries(plan, touched, last)
        for entry in entries:
            last[entry.wallet_id] = EntryPosition(entry.created_at, entry.seq)
        if entries:
            bind.execute(
                sa.insert(t.wallet_entries),
                [
                    {
                        **{c: getattr(e, c) for c in _COLUMNS},
                        "type": e.type.value,
                        "counter": e.counter.value,
                    }
                    for e in entries
                ],
            )


def _posting(row: sa.Row[tuple[object, ...]]) -> Posting:
    m = row._mapping
    category = m["category"]
    return Posting(
        id=m["id"],
        journal_id=m["journal_id"],
        kind=PostingKind(m["kind"]),
        debit_account_id=m["debit_account_id"],
        credit_account_id=m["credit_account_id"],
        currency=m["currency"],
        amount=m["amount"],
        created_at=m["created_at"],
        released=m["released"],
        category=PendingCategory(category) if category else None,
        pending_id=m["pending_id"],
    )
