"""The SQL of a wallet's metadata change (decisions.md, "Metadata"): the locked read and the
write of the ``wallets.metadata`` column (migration 0013), a JSON object or NULL when empty.

Kept out of ``repositories.py``; ``SqlWallets.lock`` and ``set_metadata`` call these.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, select, update

from treasury_sqlalchemy import schema as t


def stored_metadata(metadata: Mapping[str, str]) -> str | None:
    """The column's value for ``metadata``: its JSON, or NULL when there is none."""
    return json.dumps(dict(metadata)) if metadata else None


def locked_wallet_row(conn: Connection, company_id: int, wallet_id: str) -> tuple[Any, ...] | None:
    """The company's wallet row, locked until the transaction ends (``FOR UPDATE``; SQLite's
    one writer needs no lock)."""
    query = select(t.wallets).where(
        t.wallets.c.id == wallet_id, t.wallets.c.company_id == company_id
    )
    row = conn.execute(query.with_for_update()).first()
    return tuple(row) if row else None


def write_wallet_metadata(
    conn: Connection, company_id: int, wallet_id: str, metadata: Mapping[str, str]
) -> None:
    """Replace the company's wallet's metadata; :class:`LookupError` if there is no such wallet."""
    wallets = t.wallets
    result = conn.execute(
        update(wallets)
        .where(wallets.c.id == wallet_id, wallets.c.company_id == company_id)
        .values(metadata=stored_metadata(metadata))
    )
    if result.rowcount != 1:
        raise LookupError(f"no wallet {wallet_id}")
