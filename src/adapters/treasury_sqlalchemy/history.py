"""Wallet histories in SQL: written with each journal, read a page or a period at a time.

See :mod:`treasury_core.ledger.history` for what an entry is. Writing one costs, per wallet a
journal touches, one index probe for the wallet's latest entry (under the account row lock the
journal already holds, so the sequence cannot race; sent with the journal's first posting, see
``MovementStatements.insert_posting_with_heads``) and one insert for all of a journal's
entries. Every read is a
range of ``ix_wallet_entries_wallet_id_created_at_seq`` (or of the type-led index), walked from
its newest end and stopped after ``limit`` rows, so it costs the same whatever the history's
length.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, or_, select
from sqlalchemy.sql import ColumnElement

from treasury_core.ledger import EntryCounter, EntryQuery, EntryType, WalletEntry
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.hot import HotInsert, HotQuery

_E = t.wallet_entries.c
_COLUMNS = tuple(c.name for c in t.wallet_entries.c)
_INSERT = HotInsert(t.wallet_entries)
_BY_ID = HotQuery(
    select(t.wallet_entries).where(
        _E.wallet_id == bindparam("wallet_id"), _E.id == bindparam("entry_id")
    )
)


def record_entries(conn: Connection, entries: Sequence[WalletEntry]) -> None:
    """Write a journal's history entries (:func:`treasury_core.ledger.wallet_entries`) in one
    statement."""
    if entries:
        _INSERT.execute_rows(conn, [_values(e) for e in entries])


def _values(entry: WalletEntry) -> dict[str, Any]:
    return {
        "wallet_id": entry.wallet_id,
        "id": entry.id,
        "seq": entry.seq,
        "posting_id": entry.posting_id,
        "journal_id": entry.journal_id,
        "type": entry.type.value,
        "counter": entry.counter.value,
        "amount": entry.amount,
        "currency": entry.currency,
        "balance_after": entry.balance_after,
        "available_balance_after": entry.available_balance_after,
        "pending_in_after": entry.pending_in_after,
        "source_id": entry.source_id,
        "created_at": entry.created_at,
    }


def _entry(row: Sequence[Any]) -> WalletEntry:
    m = dict(zip(_COLUMNS, row, strict=True))
    return WalletEntry(
        id=m["id"],
        wallet_id=m["wallet_id"],
        seq=m["seq"],
        posting_id=m["posting_id"],
        journal_id=m["journal_id"],
        type=EntryType(m["type"]),
        counter=EntryCounter(m["counter"]),
        amount=m["amount"],
        currency=m["currency"],
        balance_after=m["balance_after"],
        available_balance_after=m["available_balance_after"],
        pending_in_after=m["pending_in_after"],
        source_id=m["source_id"],
        created_at=m["created_at"],
    )


class SqlWalletHistory:
    """The history reads of the SQL ledger repository (mixed into it)."""

    _conn: Connection

    def wallet_entries(self, query: EntryQuery) -> list[WalletEntry]:
        where: list[ColumnElement[bool]] = [_E.wallet_id == query.wallet_id]
        if query.type is not None:
            where.append(_E.type == query.type.value)
        if query.created_gte is not None:
            where.append(_E.created_at >= query.created_gte)
        if query.created_lt is not None:
            where.append(_E.created_at < query.created_lt)
        if query.before is not None:
            # The first condition alone bounds the index range; the second trims its edge.
            at, seq = query.before.created_at, query.before.seq
            where.append(_E.created_at <= at)
            where.append(or_(_E.created_at < at, and_(_E.created_at == at, _E.seq < seq)))
        statement = (
            select(t.wallet_entries)
            .where(*where)
            .order_by(_E.created_at.desc(), _E.seq.desc())
            .limit(query.limit)
        )
        return [_entry(tuple(r)) for r in self._conn.execute(statement)]

    def wallet_entry(self, wallet_id: str, entry_id: str) -> WalletEntry | None:
        row = _BY_ID.first(self._conn, {"wallet_id": wallet_id, "entry_id": entry_id})
        return _entry(row) if row else None

    def last_wallet_entry(self, wallet_id: str, before: datetime | None) -> WalletEntry | None:
        where: list[ColumnElement[bool]] = [_E.wallet_id == wallet_id]
        if before is not None:
            where.append(_E.created_at < before)
        statement = (
            select(t.wallet_entries)
            .where(*where)
            .order_by(_E.created_at.desc(), _E.seq.desc())
            .limit(1)
        )
        row = self._conn.execute(statement).first()
        return _entry(tuple(row)) if row else None
