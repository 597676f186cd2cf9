"""Statement lines keyed by their account and identity, no longer by the importing company.

A line used to be remembered per company, so the same booking imported by the operator and
pushed by a company counted twice. Each stored line (kind ``bsl``) gets the key the code now
gives it: SHA-256 of the account and ``ref:`` plus the bank's reference without white space in
upper case (every line stored so far had a reference). Where that makes two rows one booking,
the oldest keeps the key and the others lose theirs (``NULL``): they stay as history, and the
booking is not applied a third time.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def _key(body: dict[str, object]) -> str:
    account = str(body.get("account") or "")
    reference = "".join(str(body.get("entry_reference") or "").split()).upper()
    return hashlib.sha256(f"{account}\x1fref:{reference}".encode()).hexdigest()


def _rekey(conn: sa.Connection, key_of: Callable[[int, dict[str, object]], str]) -> None:
    """Give every statement line ``key_of(company_id, body)``; where two lines get one key, the
    oldest keeps it and the others lose theirs (``NULL``)."""
    rows = conn.execute(
        sa.text("SELECT id, company_id, body FROM treasury_records WHERE kind = 'bsl' ORDER BY id")
    ).all()
    keys: dict[str, str | None] = {}
    taken: set[str] = set()
    for row_id, company_id, body in rows:
        key = key_of(company_id, json.loads(body))
        keys[row_id] = None if key in taken else key
        taken.add(key)
    # Cleared first, then set: the unique index must never see two rows with one key, nor a
    # key still held by a row not yet rewritten.
    conn.execute(sa.text("UPDATE treasury_records SET lookup_key = NULL WHERE kind = 'bsl'"))
    for row_id, kept in keys.items():
        if kept is not None:
            conn.execute(
                sa.text("UPDATE treasury_records SET lookup_key = :key WHERE id = :id"),
                {"key": kept, "id": row_id},
            )


def _old_key(company_id: int, body: dict[str, object]) -> str:
    raw = f"{company_id}\x1f{body.get('account')}\x1f{body.get('entry_reference') or ''}"
    return hashlib.sha256(raw.encode()).hexdigest()


def upgrade() -> None:
    _rekey(op.get_bind(), lambda _company_id, body: _key(body))


def downgrade() -> None:
    # Lines told apart only by what the new identities see (no reference, a batch's
    # transactions) share one old key: the oldest keeps it, as on the way up.
    _rekey(op.get_bind(), _old_key)
