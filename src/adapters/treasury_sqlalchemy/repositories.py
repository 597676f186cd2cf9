"""The storage port's repositories over one SQLAlchemy connection (one transaction)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, Generic, TypeVar, overload

from sqlalchemy import Connection, Row, and_, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from treasury_core.errors import LedgerInvariantViolation
from treasury_core.ledger import (
    Account,
    AccountKind,
    EntryPosition,
    Journal,
    LedgerPlan,
    PendingCategory,
    PendingMovement,
    PendingStatus,
    Posting,
    PostingExists,
    PostingKind,
    WalletEntry,
    apply_journal,
)
from treasury_core.wallets import Wallet, WalletStatus
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.companies import SqlCompanies
from treasury_sqlalchemy.dashboard_sessions import SqlDashboardSessions
from treasury_sqlalchemy.deliveries import SqlDeliveries
from treasury_sqlalchemy.history import SqlWalletHistory, record_entries
from treasury_sqlalchemy.hot import (
    LEDGER_COUNTERS,
    HotQuery,
    movement_statements,
    raw_cursor,
    stripe_statements,
)
from treasury_sqlalchemy.idempotency import SqlIdempotency
from treasury_sqlalchemy.integrity import is_unique_violation
from treasury_sqlalchemy.intents import SqlIntents
from treasury_sqlalchemy.jobs import SqlJobs
from treasury_sqlalchemy.metadata_filter import metadata_where
from treasury_sqlalchemy.operator_keys import SqlOperatorKeys
from treasury_sqlalchemy.outbox import SqlOutbox
from treasury_sqlalchemy.record_lists import newest_first
from treasury_sqlalchemy.records import SqlRecords
from treasury_sqlalchemy.stripes import (
    as_ints,
    note_rows,
    qualifies,
    striped_accounts,
    summed_accounts,
)
from treasury_sqlalchemy.wallet_metadata import (
    locked_wallet_row,
    stored_metadata,
    write_wallet_metadata,
)

_PENDING_INSERT = insert(t.ledger_pendings)
_PENDING_RESOLVE = (
    update(t.ledger_pendings)
    .where(
        and_(
            t.ledger_pendings.c.id == bindparam("pending_id"),
            t.ledger_pendings.c.status == PendingStatus.PENDING.value,
        )
    )
    .values(status=bindparam("new_status"), resolved_by=bindparam("resolved_by"))
)
# Hot lookups built once (building a statement per call cost more than running it) and run on
# the DBAPI cursor (see hot.py).
_ACCOUNT_BY_ID = HotQuery(
    select(t.ledger_accounts).where(t.ledger_accounts.c.id == bindparam("account_id"))
)
#: The same, with the account's stripes summed in (for the accounts that may have them).
_SUMMED_ACCOUNT_BY_ID = HotQuery(
    summed_accounts().where(t.ledger_accounts.c.id == bindparam("account_id"))
)
_WALLET_COLUMNS = tuple(c.name for c in t.wallets.c)
_WALLET_BY_ID = HotQuery(
    select(t.wallets).where(
        t.wallets.c.id == bindparam("wallet_id"), t.wallets.c.company_id == bindparam("company_id")
    )
)


#: Account kinds by stored value: a dict lookup costs a fifth of ``AccountKind(value)``, and
#: every balance read and ledger movement makes accounts from rows.
_ACCOUNT_KINDS = {kind.value: kind for kind in AccountKind}


def _account(row: Sequence[Any]) -> Account:
    # Positional, in table column order: works for SQLAlchemy rows and DBAPI tuples alike.
    (id_, currency, kind, company_id, guarded, overdraft, *counters) = row
    (debits_posted, credits_posted, holds, pending_out, credits_pending) = counters
    return Account(
        id=id_,
        currency=currency,
        kind=_ACCOUNT_KINDS.get(kind) or AccountKind(kind),
        company_id=company_id,
        guarded=bool(guarded),
        overdraft_limit=overdraft,
        debits_posted=debits_posted,
        credits_posted=credits_posted,
        debits_pending_holds=holds,
        debits_pending_out=pending_out,
        credits_pending=credits_pending,
    )


@lru_cache(maxsize=1024)
def _account_of_row(row: tuple[Any, ...]) -> Account:
    """:func:`_account`, once per distinct row, for the reads that answer balances
    (``get_account``, ``wallet_accounts``): a polled balance reads the same row again and
    again, and an ``Account`` is immutable, so one instance serves every read of it. A changed
    counter is a new row, a new key, never a stale answer; the row holds no secret.
    (``guarded`` comes back as ``0``/``1`` from SQLite and as a bool from PostgreSQL; equal
    keys either way, and ``bool()`` of both.)"""
    return _account(row)


def _heads(
    wallet_ids: Sequence[str], row: Sequence[Any] | None, read_time: Callable[[Any], Any]
) -> dict[str, EntryPosition | None]:
    """Each wallet's latest history position from a row of ``insert_posting_with_heads``."""
    if row is None:  # pragma: no cover - an INSERT ... RETURNING of one row gives one row
        raise LedgerInvariantViolation("the posting insert returned no row")
    heads: dict[str, EntryPosition | None] = {}
    for n, wallet_id in enumerate(wallet_ids):
        created_at, seq = row[2 * n], row[2 * n + 1]
        heads[wallet_id] = EntryPosition(read_time(created_at), seq) if seq is not None else None
    return heads


def _pending(row: Row[Any]) -> PendingMovement:
    m = row._mapping
    return PendingMovement(
        id=m["id"],
        debit_account_id=m["debit_account_id"],
        credit_account_id=m["credit_account_id"],
        currency=m["currency"],
        amount=m["amount"],
        category=PendingCategory(m["category"]),
        deadline=m["deadline"],
        status=PendingStatus(m["status"]),
        resolved_by=m["resolved_by"],
    )


def _posting(row: Row[Any]) -> Posting:
    m = row._mapping
    return Posting(
        id=m["id"],
        journal_id=m["journal_id"],
        kind=PostingKind(m["kind"]),
        debit_account_id=m["debit_account_id"],
        credit_account_id=m["credit_account_id"],
        currency=m["currency"],
        amount=m["amount"],
        released=m["released"],
        category=PendingCategory(m["category"]) if m["category"] else None,
        pending_id=m["pending_id"],
        deadline=m["deadline"],
        created_at=m["created_at"],
    )


@lru_cache(maxsize=1024)
def _wallet(row: tuple[Any, ...]) -> Wallet:
    """The wallet stored as ``row``, made and validated once per distinct row: every transfer
    reads both its wallets, and a ``Wallet`` is immutable (a change of its metadata makes a new
    row, so a new key), so one instance serves every read of it. The row holds no secret."""
    m = dict(zip(_WALLET_COLUMNS, row, strict=True))
    return Wallet(
        id=m["id"],
        company_id=m["company_id"],
        name=m["name"],
        description=m["description"],
        currency=m["currency"],
        status=WalletStatus(m["status"]),
        created_at=m["created_at"],
        metadata=json.loads(m["metadata"]) if m["metadata"] else {},
    )


class SqlWallets:
    """Wallet rows."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def add(self, wallet: Wallet) -> None:
        values = wallet.model_dump(mode="python")
        values["metadata"] = stored_metadata(wallet.metadata)
        self._conn.execute(insert(t.wallets), [values])

    def get(self, company_id: int, wallet_id: str) -> Wallet | None:
        params = {"wallet_id": wallet_id, "company_id": company_id}
        row = _WALLET_BY_ID.first(self._conn, params)
        return _wallet(tuple(row)) if row else None

    def list(
        self,
        company_id: int,
        limit: int,
        starting_after: str | None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> list[Wallet]:
        query = select(t.wallets).where(
            t.wallets.c.company_id == company_id,
            *metadata_where(t.wallets.c.metadata, metadata, path=None),
        )
        query = newest_first(query, t.wallets.c.id, limit, starting_after)
        return [_wallet(tuple(r)) for r in self._conn.execute(query)]

    def lock(self, company_id: int, wallet_id: str) -> Wallet | None:
        row = locked_wallet_row(self._conn, company_id, wallet_id)
        return _wallet(row) if row else None

    def set_metadata(self, company_id: int, wallet_id: str, metadata: Mapping[str, str]) -> None:
        write_wallet_metadata(self._conn, company_id, wallet_id, metadata)


class SqlLedger(SqlWalletHistory):
    """Accounts, postings and pending movements (and, from the mixin, wallet histories)."""

    def __init__(self, conn: Connection, lock_rows: bool) -> None:
        self._conn = conn
        self._lock_rows = lock_rows

    def _account_values(self, account: Account) -> dict[str, Any]:
        return {
            "id": account.id,
            "currency": account.currency,
            "kind": account.kind.value,
            "company_id": account.company_id,
            "guarded": account.guarded,
            "overdraft_limit": account.overdraft_limit,
            **dict.fromkeys(LEDGER_COUNTERS, 0),
        }

    def open_account(self, account: Account) -> None:
        self._conn.execute(insert(t.ledger_accounts), [self._account_values(account)])

    def ensure_account(self, account: Account) -> None:
        # Existence only: the counters (and their stripes) are not needed here.
        if _ACCOUNT_BY_ID.first(self._conn, {"account_id": account.id}) is not None:
            return
        # A concurrent transaction may create the same system account; a savepoint keeps the
        # unique-key failure from aborting ours.
        try:
            with self._conn.begin_nested():
                self.open_account(account)
        except IntegrityError:
            pass

    def get_account(self, account_id: str) -> Account | None:
        row = _ACCOUNT_BY_ID.first(self._conn, {"account_id": account_id})
        if row is None:
            return None
        if qualifies(row):
            # Counters may be striped (stripes.py): read again, summed, in one statement.
            note_rows(striped_accounts(self._conn)[0], (row,))
            row = _SUMMED_ACCOUNT_BY_ID.first(self._conn, {"account_id": account_id})
            if row is None:  # pragma: no cover - accounts are never deleted
                return None
            row = as_ints(row)
        return _account_of_row(tuple(row))

    def get_accounts(self, account_ids: Sequence[str]) -> dict[str, Account]:
        if not account_ids:
            return {}
        rows = [
            as_ints(r)
            for r in self._conn.execute(
                summed_accounts().where(t.ledger_accounts.c.id.in_(list(account_ids)))
            )
        ]
        note_rows(striped_accounts(self._conn)[0], rows)
        return {a.id: a for a in map(_account, rows)}

    def wallet_accounts(
        self, company_id: int, limit: int, starting_after: str | None
    ) -> list[Account]:
        query = select(t.ledger_accounts).where(
            t.ledger_accounts.c.company_id == company_id,
            t.ledger_accounts.c.kind == AccountKind.WALLET.value,
        )
        query = newest_first(query, t.ledger_accounts.c.id, limit, starting_after)
        return [_account_of_row(tuple(r)) for r in self._conn.execute(query)]

    def apply(self, journal: Journal, now: datetime) -> LedgerPlan:
        return apply_journal(self, journal, now)

    # The primitive steps of apply_journal (treasury_core.ledger.apply.LedgerSteps): the same
    # round trips as a hand-written movement, on the DBAPI cursor (hot.py).

    def lock_pendings(self, pending_ids: Sequence[str]) -> dict[str, PendingMovement]:
        query = select(t.ledger_pendings).where(t.ledger_pendings.c.id.in_(list(pending_ids)))
        if self._lock_rows:
            query = query.order_by(t.ledger_pendings.c.id).with_for_update()
        return {p.id: p for p in map(_pending, self._conn.execute(query))}

    def add_deltas(self, plan: LedgerPlan) -> tuple[dict[str, Account], set[str]]:
        sql = movement_statements(self._conn.dialect)
        striped, stripe = striped_accounts(self._conn)
        after: dict[str, Account] = {}
        unread: set[str] = set()
        with raw_cursor(self._conn) as cursor:
            # Each UPDATE locks its row, in the order the plan gives (sorted ids).
            for account_id in plan.account_ids:
                d = plan.deltas[account_id]
                known = striped.account(account_id) if striped is not None else None
                if known is not None and stripe is not None:
                    # The delta goes to this connection's stripe, whose row no other connection
                    # of the pool writes (stripes.py). Its counters are not read back: the
                    # account's identity is all the ledger asks of an unguarded counterparty.
                    after[account_id] = known
                    unread.add(account_id)
                    stripes = stripe_statements(self._conn.dialect)
                    cursor.execute(stripes.add, stripes.params(account_id, stripe, d))
                    continue
                cursor.execute(
                    sql.bump,
                    (
                        d.debits_posted,
                        d.credits_posted,
                        d.debits_pending_holds,
                        d.debits_pending_out,
                        d.credits_pending,
                        account_id,
                    ),
                )
                row = cursor.fetchone()
                if row is None:
                    continue  # not stored: apply_journal refuses the journal
                after[account_id] = _account(row)
                if striped is not None and striped.stripes and qualifies(row):
                    # The first movement of this process on a striped account: its row alone
                    # is not its counters (the stripes hold the rest, and a pending counter may
                    # be reserved on a stripe and released here).
                    striped.note(row)
                    unread.add(account_id)
        return after, unread

    def write_postings(
        self, plan: LedgerPlan, wallet_ids: Sequence[str]
    ) -> dict[str, EntryPosition | None]:
        sql = movement_statements(self._conn.dialect)
        operation = plan.journal.operation
        last: dict[str, EntryPosition | None] = {}
        # One execute per posting: psycopg's executemany enters pipeline mode, which costs more
        # than it saves for the one or two postings a journal usually has. The wallets' history
        # positions come back with the first posting (no round trip of their own; see
        # insert_posting_with_heads), their rows being locked by now.
        with raw_cursor(self._conn) as cursor:
            try:
                for p in plan.postings:
                    params = (
                        p.id,
                        p.journal_id,
                        operation,
                        p.kind.value,
                        p.debit_account_id,
                        p.credit_account_id,
                        p.currency,
                        p.amount,
                        p.released,
                        p.category.value if p.category else None,
                        p.pending_id,
                        sql.bind_time(p.deadline),
                        sql.bind_time(p.created_at),
                    )
                    if wallet_ids and not last:
                        cursor.execute(
                            sql.insert_posting_with_heads(len(wallet_ids)),
                            params + sql.heads_params(wallet_ids),
                        )
                        last = _heads(wallet_ids, cursor.fetchone(), sql.read_time)
                    else:
                        cursor.execute(sql.insert_posting, params)
            except Exception as exc:
                if is_unique_violation(exc):
                    raise PostingExists(plan.journal.id) from exc
                raise
        return last

    def write_pendings(self, plan: LedgerPlan) -> None:
        if plan.new_pendings:
            self._conn.execute(
                _PENDING_INSERT,
                [
                    {
                        "id": p.id,
                        "debit_account_id": p.debit_account_id,
                        "credit_account_id": p.credit_account_id,
                        "currency": p.currency,
                        "amount": p.amount,
                        "category": p.category.value,
                        "deadline": p.deadline,
                        "status": p.status.value,
                        "resolved_by": None,
                    }
                    for p in plan.new_pendings
                ],
            )
        for resolved in plan.resolved_pendings:
            result = self._conn.execute(
                _PENDING_RESOLVE,
                {
                    "pending_id": resolved.id,
                    "new_status": resolved.status.value,
                    "resolved_by": resolved.resolved_by,
                },
            )
            if result.rowcount != 1:  # pragma: no cover - the row was locked above
                raise LedgerInvariantViolation(f"pending movement {resolved.id} changed underneath")

    def write_entries(self, entries: Sequence[WalletEntry]) -> None:
        record_entries(self._conn, entries)

    def get_pending(self, pending_id: str) -> PendingMovement | None:
        row = self._conn.execute(
            select(t.ledger_pendings).where(t.ledger_pendings.c.id == pending_id)
        ).first()
        return _pending(row) if row else None

    def due_pendings(self, now: datetime, limit: int) -> list[PendingMovement]:
        query = (
            select(t.ledger_pendings)
            .where(
                t.ledger_pendings.c.status == PendingStatus.PENDING.value,
                t.ledger_pendings.c.deadline <= now,
            )
            .order_by(t.ledger_pendings.c.deadline, t.ledger_pendings.c.id)
            .limit(limit)
        )
        return [_pending(r) for r in self._conn.execute(query)]

    def all_accounts(self) -> Iterator[Account]:
        query = summed_accounts().order_by(t.ledger_accounts.c.id)
        return (_account(as_ints(row)) for row in self._conn.execute(query))

    def postings(self) -> Iterator[Posting]:
        return map(
            _posting, self._conn.execute(select(t.ledger_postings).order_by(t.ledger_postings.c.id))
        )

    def pendings(self) -> Iterator[PendingMovement]:
        return map(
            _pending, self._conn.execute(select(t.ledger_pendings).order_by(t.ledger_pendings.c.id))
        )

    def postings_page(self, after_id: str | None, limit: int) -> list[Posting]:
        # Keyset paging on the primary key: each page is one index range scan, however deep.
        query = select(t.ledger_postings).order_by(t.ledger_postings.c.id).limit(limit)
        if after_id is not None:
            query = query.where(t.ledger_postings.c.id > after_id)
        return [_posting(r) for r in self._conn.execute(query)]

    def count_postings(self) -> int:
        count = select(func.count()).select_from(t.ledger_postings)
        return int(self._conn.execute(count).scalar_one())


_R = TypeVar("_R")


class _made_on_first_use(Generic[_R]):  # lower case: a decorator, like cached_property
    """A unit of work's repository, made when first used and then kept on the instance.

    ``functools.cached_property`` without its lock (Python 3.11 takes a lock on every first
    use; Python 3.12 dropped it): a unit of work belongs to one thread, and making two
    repositories would be harmless anyway. A non-data descriptor, so the instance's own
    attribute answers every later use.
    """

    def __init__(self, make: Callable[[SqlUnitOfWork], _R]) -> None:
        self._make = make
        self._name = make.__name__
        self.__doc__ = make.__doc__

    @overload
    def __get__(self, uow: None, owner: type[SqlUnitOfWork]) -> _made_on_first_use[_R]: ...
    @overload
    def __get__(self, uow: SqlUnitOfWork, owner: type[SqlUnitOfWork]) -> _R: ...
    def __get__(
        self, uow: SqlUnitOfWork | None, owner: type[SqlUnitOfWork]
    ) -> _R | _made_on_first_use[_R]:
        if uow is None:
            return self
        repository = uow.__dict__[self._name] = self._make(uow)
        return repository


class SqlUnitOfWork:
    """One transaction's repositories, each made when first used (most transactions touch two
    or three of the eleven, and a read on the request path is short enough for this to show)."""

    def __init__(self, conn: Connection, *, lock_rows: bool) -> None:
        self.connection = conn
        self._lock_rows = lock_rows

    @_made_on_first_use
    def wallets(self) -> SqlWallets:
        return SqlWallets(self.connection)

    @_made_on_first_use
    def ledger(self) -> SqlLedger:
        return SqlLedger(self.connection, self._lock_rows)

    @_made_on_first_use
    def companies(self) -> SqlCompanies:
        return SqlCompanies(self.connection)

    @_made_on_first_use
    def operator_keys(self) -> SqlOperatorKeys:
        return SqlOperatorKeys(self.connection)

    @_made_on_first_use
    def dashboard_sessions(self) -> SqlDashboardSessions:
        return SqlDashboardSessions(self.connection)

    @_made_on_first_use
    def outbox(self) -> SqlOutbox:
        return SqlOutbox(self.connection, self._lock_rows)

    @_made_on_first_use
    def idempotency(self) -> SqlIdempotency:
        return SqlIdempotency(self.connection)

    @_made_on_first_use
    def records(self) -> SqlRecords:
        return SqlRecords(self.connection, self._lock_rows)

    @_made_on_first_use
    def jobs(self) -> SqlJobs:
        return SqlJobs(self.connection, self._lock_rows)

    @_made_on_first_use
    def intents(self) -> SqlIntents:
        return SqlIntents(self.connection, self._lock_rows)

    @_made_on_first_use
    def deliveries(self) -> SqlDeliveries:
        return SqlDeliveries(self.connection, self._lock_rows)
