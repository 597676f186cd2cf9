"""Striped counters: the accounts every movement of a currency touches, without one hot row.

The outside world (``world:{CUR}``), FX liquidity (``fx:{CUR}``), fees and each company's
settlement account are never checked for funds (they are unguarded: see
:mod:`treasury_core.ledger.accounts`). Were their counters one row updated by every movement,
each movement would hold that row's lock to its commit, and all of a currency's movements on the
platform would queue behind one another. Instead, a movement adds its delta to one of
``stripes`` rows of ``ledger_account_stripes`` for the account, chosen per connection, and a read
sums the account's own row and its stripes in one statement (so a snapshot read stays exact).

Why this and not folding postings in the background: the rows are bounded (``stripes`` per hot
account, never more), a read is one indexed range of at most ``stripes`` rows, and there is no
job whose lag the balance would depend on. See docs/concepts/ledger.md.

Rules:

- Only accounts that are unguarded and not wallets are striped; a guarded account (every wallet)
  is checked for funds on its own row, under its lock, as before.
- An account is striped once this process has read it (its row says unguarded): the first
  movement after a start goes through the account's row, which tells which accounts qualify.
  ``guarded`` and ``kind`` never change after an account is opened, so the memo never goes stale.
- One stripe's pending counters may go below zero (a reservation added to one stripe, its
  release to another); their sum never does, since a release never exceeds what was reserved.
  Posted counters only grow, per stripe too.
- Connections take stripes in turn from a per-process counter starting at a random offset, so
  the connections of one pool never share a stripe while there are no more than ``stripes`` of
  them, and several processes rarely do.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.sql import Select

from treasury_core.ledger import Account, AccountKind
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.hot import LEDGER_COUNTERS

#: Stripes per hot account on PostgreSQL; SQLite has one writer at a time, so none there.
POSTGRES_STRIPES = 16


#: Keys of a pooled connection's ``info`` (they live as long as the DBAPI connection).
_STRIPE = "treasury_stripe"
_STRIPED = "treasury_striped"
_NEXT = itertools.count(secrets.randbelow(1 << 16))


class StripedAccounts:
    """One database's striped accounts, as this process has seen them: each account's identity
    (id, currency, kind, company) with zero counters, since the counters are never read back on
    the hot path."""

    def __init__(self, stripes: int) -> None:
        if stripes < 0:
            raise ValueError("stripes must be zero (none) or more")
        self.stripes = stripes
        self._accounts: dict[str, Account] = {}

    def on_connect(self, _dbapi_connection: Any, record: Any) -> None:
        """Engine ``connect`` listener: give the new connection its stripe and this memo."""
        record.info[_STRIPED] = self
        record.info[_STRIPE] = next(_NEXT) % self.stripes if self.stripes else None

    def note(self, row: Sequence[Any]) -> None:
        """Remember the account of ``row`` (table column order) if it qualifies."""
        if self.stripes and qualifies(row):
            self._accounts[row[0]] = Account(
                id=row[0],
                currency=row[1],
                kind=AccountKind(row[2]),
                company_id=row[3],
                guarded=False,
                overdraft_limit=row[5],
            )

    def account(self, account_id: str) -> Account | None:
        """The identity of a striped account, ``None`` for one that is not (or not yet)."""
        return self._accounts.get(account_id)


def striped_accounts(conn: Connection) -> tuple[StripedAccounts | None, int | None]:
    """The memo and the stripe of the transaction's connection (``None`` without stripes)."""
    info = conn.connection.info
    return info.get(_STRIPED), info.get(_STRIPE)


def _stripe_sums() -> Any:
    s = t.ledger_account_stripes
    return (
        select(s.c.account_id, *(func.sum(s.c[c]).label(c) for c in LEDGER_COUNTERS))
        .group_by(s.c.account_id)
        .subquery("stripe_sums")
    )


def summed_accounts() -> Select[Any]:
    """``ledger_accounts`` with each counter plus the sum of the account's stripes, in table
    column order: one statement, so a snapshot read sees row and stripes at one instant."""
    a = t.ledger_accounts
    sums = _stripe_sums()
    columns = [
        (a.c[c.name] + func.coalesce(sums.c[c.name], 0)).label(c.name)
        if c.name in LEDGER_COUNTERS
        else c
        for c in a.columns
    ]
    return select(*columns).select_from(a.outerjoin(sums, sums.c.account_id == a.c.id))


def as_ints(row: Sequence[Any]) -> tuple[Any, ...]:
    """A summed row with its counters as ``int`` (PostgreSQL's ``SUM`` of a bigint is numeric)."""
    fixed = len(row) - len(LEDGER_COUNTERS)
    return (*row[:fixed], *(int(v) for v in row[fixed:]))


def qualifies(row: Sequence[Any]) -> bool:
    """True when an account row (table column order) may have stripes: unguarded, not a wallet."""
    return not row[4] and row[2] != AccountKind.WALLET.value


def note_rows(memo: StripedAccounts | None, rows: Iterable[Sequence[Any]]) -> None:
    """Tell ``memo`` about the accounts in ``rows`` (table column order)."""
    if memo is None:
        return
    for row in rows:
        memo.note(row)
