"""Wallet histories for the in-memory storage: a list of entries per wallet, in write order.

Kept apart from :mod:`treasury_core.memory.storage` so that module stays small; the ledger of
the memory storage calls these with its transaction's state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from treasury_core.ledger import EntryPosition, EntryQuery, WalletEntry

#: Wallet id -> its entries, oldest first (``seq`` 1, 2, …).
Histories = dict[str, list[WalletEntry]]


def heads(histories: Histories, wallet_ids: Sequence[str]) -> dict[str, EntryPosition | None]:
    """The position of each wallet's latest entry (``None``: no history yet)."""
    last: dict[str, EntryPosition | None] = {}
    for wallet_id in wallet_ids:
        rows = histories.get(wallet_id)
        last[wallet_id] = EntryPosition(rows[-1].created_at, rows[-1].seq) if rows else None
    return last


def append_entries(
    histories: Histories,
    entries: Sequence[WalletEntry],
    append: Callable[[list[Any], Any], None],
) -> None:
    """Add ``entries`` through ``append``, the transaction's undoable list append."""
    for entry in entries:
        # A new wallet's list stays behind on rollback; empty, it reads as no history.
        append(histories.setdefault(entry.wallet_id, []), entry)


def page(histories: Histories, query: EntryQuery) -> list[WalletEntry]:
    """``query``'s entries, newest first."""
    rows: list[WalletEntry] = []
    for entry in reversed(histories.get(query.wallet_id, [])):
        if len(rows) == query.limit:
            break
        if query.before is not None and (entry.created_at, entry.seq) >= (
            query.before.created_at,
            query.before.seq,
        ):
            continue
        if query.created_lt is not None and entry.created_at >= query.created_lt:
            continue
        if query.created_gte is not None and entry.created_at < query.created_gte:
            break
        if query.type is not None and entry.type is not query.type:
            continue
        rows.append(entry)
    return rows


def find(histories: Histories, wallet_id: str, entry_id: str) -> WalletEntry | None:
    """The wallet's entry with id ``entry_id``."""
    return next((e for e in histories.get(wallet_id, []) if e.id == entry_id), None)


def last_before(
    histories: Histories, wallet_id: str, before: datetime | None
) -> WalletEntry | None:
    """The wallet's latest entry created before ``before`` (or of all)."""
    for entry in reversed(histories.get(wallet_id, [])):
        if before is None or entry.created_at < before:
            return entry
    return None
