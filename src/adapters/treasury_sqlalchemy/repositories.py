"""The storage port's repositories over one SQLAlchemy connection (one transaction)."""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Generic, TypeVar, overload

from pydantic_core import from_json, to_json
from sqlalchemy import (
    ColumnElement,
    Connection,
    Dialect,
    Row,
    and_,
    bindparam,
    delete,
    false,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from treasury_core.companies import ApiKey, Company, KeyKind, MerchantAccount
from treasury_core.errors import LedgerInvariantViolation
from treasury_core.events import Event, EventHead, EventType
from treasury_core.idempotency import IdempotencyRecord, IdempotencyState, StoredResponse
from treasury_core.jobs import Job, JobStatus
from treasury_core.ledger import (
    Account,
    AccountKind,
    Journal,
    LedgerPlan,
    PendingCategory,
    PendingMovement,
    PendingStatus,
    Posting,
    PostingKind,
    check_account,
    duplicate_journal,
    plan_journal,
    referenced_pendings,
)
from treasury_core.listing import RecordFilter
from treasury_core.notifications.deliveries import Delivery, DeliveryKind, DeliveryStatus, fair_pick
from treasury_core.notifications.status import DeliveryBacklog, FailingDestination, OutboxBacklog
from treasury_core.payments.intents import IntentFilter, PaymentIntent
from treasury_core.ports.storage import R
from treasury_core.treasury.records import TreasuryRecord
from treasury_core.wallets import Wallet, WalletStatus
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.delivery_records import UPDATE_DELIVERY, DeliveryRows
from treasury_sqlalchemy.history import SqlWalletHistory, record_entries
from treasury_sqlalchemy.hot import HotInsert, HotQuery
from treasury_sqlalchemy.metadata_filter import metadata_where
from treasury_sqlalchemy.record_lists import intent_field_where, record_page
from treasury_sqlalchemy.stripes import (
    as_ints,
    note_rows,
    qualifies,
    stripe_statements,
    striped_accounts,
    summed_accounts,
)
from treasury_sqlalchemy.wallet_metadata import (
    locked_wallet_row,
    stored_metadata,
    write_wallet_metadata,
)

_COUNTERS = (
    "debits_posted",
    "credits_posted",
    "debits_pending_holds",
    "debits_pending_out",
    "credits_pending",
)

_ACCOUNT_COLUMNS = tuple(c.name for c in t.ledger_accounts.c)
_POSTING_COLUMNS = tuple(c.name for c in t.ledger_postings.c)
_INTENT_WRITE_COLUMNS = tuple(c.name for c in t.payment_intents.c if c.name != "id")


_Events = list[Event]  # spelled here: inside the outbox classes, ``list`` is a method
_EventHeads = list[EventHead]


class _MovementStatements:
    """The ledger's hot path, rendered once per dialect and run on the DBAPI cursor.

    A movement is two account UPDATEs and one posting INSERT; through SQLAlchemy's execution
    machinery each statement cost more client time than the database spent on it (see
    CHANGELOG.md, "Performance history"). The SQL is built from the same table metadata, and
    timestamps are bound through the column type's own bind processor, so the rows are
    identical to what SQLAlchemy would write.
    """

    def __init__(self, dialect: Dialect) -> None:
        # Only table and column names from our own metadata are interpolated; values are bound.
        mark = "?" if dialect.paramstyle == "qmark" else "%s"
        bump = ", ".join(f"{c} = {c} + {mark}" for c in _COUNTERS)
        self.bump = (
            f"UPDATE ledger_accounts SET {bump} WHERE id = {mark} "  # noqa: S608
            f"RETURNING {', '.join(_ACCOUNT_COLUMNS)}"
        )
        self.insert_posting = (
            f"INSERT INTO ledger_postings ({', '.join(_POSTING_COLUMNS)}) "  # noqa: S608
            f"VALUES ({', '.join([mark] * len(_POSTING_COLUMNS))})"
        )
        # Each create of an intent writes one intent row (CHANGELOG.md, "Performance history": the
        # create-intent path); it goes the same way, with the id the database assigns.
        self.insert_intent = (
            f"INSERT INTO payment_intents ({', '.join(_INTENT_WRITE_COLUMNS)}) "  # noqa: S608
            f"VALUES ({', '.join([mark] * len(_INTENT_WRITE_COLUMNS))}) RETURNING id"
        )
        # dialect_impl: the type as this dialect stores it (SQLite: SQLAlchemy's own text format,
        # not sqlite3's deprecated default adapter). Every timestamp column has the same type.
        column_type = t.ledger_postings.c.created_at.type
        processor = column_type.dialect_impl(dialect).bind_processor(dialect)
        self.bind_time: Callable[[datetime | None], Any] = processor or (lambda value: value)


_STATEMENTS: dict[str, _MovementStatements] = {}


@contextmanager
def _raw_cursor(conn: Connection) -> Iterator[Any]:
    """A DBAPI cursor on the transaction's connection, for the statements of
    :class:`_MovementStatements`; closed on the way out."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        yield cursor
    finally:
        cursor.close()


def _statements(dialect: Dialect) -> _MovementStatements:
    statements = _STATEMENTS.get(dialect.name)
    if statements is None:
        statements = _STATEMENTS[dialect.name] = _MovementStatements(dialect)
    return statements


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
_RECORD_BY_ID = select(t.treasury_records.c.body).where(
    t.treasury_records.c.id == bindparam("record_id"),
    t.treasury_records.c.kind == bindparam("kind"),
)
_RECORD_OF_COMPANY = _RECORD_BY_ID.where(t.treasury_records.c.company_id == bindparam("company_id"))
#: Record lookups by (scoped to a company, FOR UPDATE).
_RECORD_QUERIES = {
    (scoped, locked): HotQuery(q.with_for_update() if locked else q)
    for scoped, q in ((False, _RECORD_BY_ID), (True, _RECORD_OF_COMPANY))
    for locked in (False, True)
}
_INTENT_COLUMNS = select(t.payment_intents.c.id, t.payment_intents.c.body)
_INTENT_BY_ID = _INTENT_COLUMNS.where(t.payment_intents.c.id == bindparam("intent_id"))
_INTENT_BY_LOOKUP_ID = _INTENT_COLUMNS.where(
    t.payment_intents.c.lookup_id == bindparam("lookup_id")
)
_INTENT_OF_COMPANY = t.payment_intents.c.company_id == bindparam("company_id")


def _intent_query(query: Any, scoped: bool, locked: bool) -> Any:
    query = query.where(_INTENT_OF_COMPANY) if scoped else query
    return query.with_for_update() if locked else query


#: The intent lookups by (query, scoped to a company, FOR UPDATE), built once each: a statement
#: built per call costs SQLAlchemy a cache-key walk over a new expression every time.
_INTENT_QUERIES: dict[tuple[Any, bool, bool], HotQuery] = {
    (query, scoped, locked): HotQuery(_intent_query(query, scoped, locked))
    for query in (_INTENT_BY_ID, _INTENT_BY_LOOKUP_ID)
    for scoped in (False, True)
    for locked in (False, True)
}
# Per-request lookups of the HTTP layer and the payment service, built once.
_MERCHANT_ACCOUNTS = (
    select(t.merchant_accounts)
    .where(t.merchant_accounts.c.company_id == bindparam("company_id"))
    .order_by(t.merchant_accounts.c.id)
)
# Rows every transfer, deposit, withdrawal and settlement writes (see hot.py).
_INSERT_RECORD = HotInsert(t.treasury_records)
_INSERT_JOB = HotInsert(t.jobs)
# An event is written undispatched: ``dispatched_at`` stays NULL until the dispatcher sets it.
_INSERT_EVENT = HotInsert(t.events, omit=("dispatched_at",))
# A delivery is written at the fan-out, and read and rewritten at its claim and its record:
# built once each (a statement built per call cost more than running it).
_INSERT_DELIVERY = HotInsert(t.deliveries)
_DELIVERY_BY_ID = select(t.deliveries.c.body, t.deliveries.c.lease_until).where(
    t.deliveries.c.id == bindparam("delivery_id")
)
_DELIVERY_QUERIES = {
    locked: HotQuery(_DELIVERY_BY_ID.with_for_update() if locked else _DELIVERY_BY_ID)
    for locked in (False, True)
}
_UPDATE_DELIVERY = UPDATE_DELIVERY
#: A claim sets the lease column alone; the column, not the body, is the lease (see _stored).
_LEASE_DELIVERY = _UPDATE_DELIVERY.values(lease_until=bindparam("lease"))
_API_KEY_COLUMNS = tuple(c.name for c in t.api_keys.c)
_API_KEY_BY_HASH = HotQuery(
    select(t.api_keys).where(t.api_keys.c.key_hash == bindparam("key_hash"))
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
    again, and an ``Account`` is immutable, so one instance serves every read of it (and lets
    :meth:`BalanceRecord.of` answer from its own memo). A changed counter is a new row, a new
    key, never a stale answer; the row holds no secret. (``guarded`` comes back as ``0``/``1``
    from SQLite and as a bool from PostgreSQL; equal keys either way, and ``bool()`` of both.)"""
    return _account(row)


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


def _newest_first(statement: Any, id_column: Any, limit: int, starting_after: str | None) -> Any:
    if starting_after is not None:
        statement = statement.where(id_column < starting_after)
    return statement.order_by(id_column.desc()).limit(limit)


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
        query = _newest_first(query, t.wallets.c.id, limit, starting_after)
        return [_wallet(tuple(r)) for r in self._conn.execute(query)]

    def lock(self, company_id: int, wallet_id: str) -> Wallet | None:
        row = locked_wallet_row(self._conn, company_id, wallet_id)
        return _wallet(row) if row else None

    def set_metadata(self, company_id: int, wallet_id: str, metadata: Mapping[str, str]) -> None:
        write_wallet_metadata(self._conn, company_id, wallet_id, metadata)


def _check_currency(account_id: str, currency: str, plan: LedgerPlan) -> None:
    """What :func:`check_account` checks of a striped account: the journal's currency."""
    if currency != plan.currencies[account_id]:
        raise LedgerInvariantViolation(
            f"account {account_id} holds {currency},"
            f" journal {plan.journal.id} moves {plan.currencies[account_id]}"
        )


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
            **dict.fromkeys(_COUNTERS, 0),
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
        query = _newest_first(query, t.ledger_accounts.c.id, limit, starting_after)
        return [_account_of_row(tuple(r)) for r in self._conn.execute(query)]

    def apply(self, journal: Journal, now: datetime) -> LedgerPlan:
        pending_ids = referenced_pendings(journal)
        pendings: dict[str, PendingMovement] = {}
        if pending_ids:
            query = select(t.ledger_pendings).where(t.ledger_pendings.c.id.in_(pending_ids))
            if self._lock_rows:
                query = query.order_by(t.ledger_pendings.c.id).with_for_update()
            pendings = {p.id: p for p in map(_pending, self._conn.execute(query))}
        plan = plan_journal(journal, pendings, now)
        sql = _statements(self._conn.dialect)
        striped, stripe = striped_accounts(self._conn)
        after: dict[str, Account] = {}
        with _raw_cursor(self._conn) as cursor:
            # Each UPDATE locks its row; taking them in sorted id order means two journals over
            # the same accounts queue behind each other instead of deadlocking. The check runs
            # on the row as updated, so it sees every movement committed before ours.
            for account_id in plan.account_ids:
                d = plan.deltas[account_id]
                known = striped.account(account_id) if striped is not None else None
                if known is not None and stripe is not None:
                    # Never checked for funds: the delta goes to this connection's stripe, whose
                    # row no other connection of the pool writes (stripes.py). Its counters are
                    # not read back: ``after`` gets its identity, which is all the wallet
                    # history asks of a counterparty (its kind).
                    _check_currency(account_id, known.currency, plan)
                    after[account_id] = known
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
                    raise LedgerInvariantViolation(f"unknown ledger account {account_id}")
                if striped is not None and striped.stripes and qualifies(row):
                    # The first movement of this process on a striped account: its row alone
                    # is not its counters (the stripes hold the rest, and a pending counter may
                    # be reserved on a stripe and released here), so only the currency is
                    # checked; an unguarded account has no funds to check.
                    striped.note(row)
                    _check_currency(account_id, row[1], plan)
                    after[account_id] = _account(row)
                    continue
                after[account_id] = _account(row)
                check_account(after[account_id], plan)
            # One execute per posting: psycopg's executemany enters pipeline mode, which costs
            # more than it saves for the one or two postings a journal usually has.
            try:
                for p in plan.postings:
                    cursor.execute(
                        sql.insert_posting,
                        (
                            p.id,
                            p.journal_id,
                            journal.operation,
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
                        ),
                    )
            except Exception as exc:
                if _is_unique_violation(exc):
                    raise duplicate_journal(journal) from exc
                raise
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
        record_entries(self._conn, plan, after)
        return plan

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


class SqlCompanies:
    """Companies, merchant accounts, API keys."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def add_company(self, name: str, created_at: datetime) -> Company:
        result = self._conn.execute(
            insert(t.companies).values(name=name, created_at=created_at).returning(t.companies.c.id)
        )
        return Company(id=result.scalar_one(), name=name, created_at=created_at)

    def get_company(self, company_id: int) -> Company | None:
        row = self._conn.execute(select(t.companies).where(t.companies.c.id == company_id)).first()
        return Company.model_validate(dict(row._mapping)) if row else None

    def add_merchant_account(
        self, company_id: int, name: str, created_at: datetime
    ) -> MerchantAccount:
        result = self._conn.execute(
            insert(t.merchant_accounts)
            .values(company_id=company_id, name=name, created_at=created_at)
            .returning(t.merchant_accounts.c.id)
        )
        return MerchantAccount(
            id=result.scalar_one(), company_id=company_id, name=name, created_at=created_at
        )

    def merchant_accounts(self, company_id: int) -> list[MerchantAccount]:
        rows = self._conn.execute(_MERCHANT_ACCOUNTS, {"company_id": company_id})
        return [MerchantAccount.model_validate(dict(r._mapping)) for r in rows]

    def add_api_key(self, key: ApiKey) -> None:
        self._conn.execute(insert(t.api_keys), [key.model_dump(mode="python")])

    def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        row = _API_KEY_BY_HASH.first(self._conn, {"key_hash": key_hash})
        if row is None:
            return None
        values = dict(zip(_API_KEY_COLUMNS, row, strict=True))
        values["kind"] = KeyKind(values["kind"])
        return ApiKey.model_validate(values)

    def revoke_api_key(self, key_id: str, revoked_at: datetime) -> bool:
        result = self._conn.execute(
            update(t.api_keys)
            .where(t.api_keys.c.id == key_id, t.api_keys.c.revoked_at.is_(None))
            .values(revoked_at=revoked_at)
        )
        return result.rowcount == 1

    def list_companies(self) -> list[Company]:
        rows = self._conn.execute(select(t.companies).order_by(t.companies.c.id))
        return [Company.model_validate(dict(r._mapping)) for r in rows]

    def api_keys(self, company_id: int) -> list[ApiKey]:
        rows = self._conn.execute(
            select(t.api_keys)
            .where(t.api_keys.c.company_id == company_id)
            .order_by(t.api_keys.c.created_at, t.api_keys.c.id)
        )
        return [
            ApiKey.model_validate({**r._mapping, "kind": KeyKind(r._mapping["kind"])}) for r in rows
        ]


class SqlOutbox:
    """The events table, written in the business transaction."""

    def __init__(self, conn: Connection, lock_rows: bool = False) -> None:
        self._conn = conn
        self._lock_rows = lock_rows

    def add(self, event: Event) -> None:
        _INSERT_EVENT.execute(
            self._conn,
            {
                "id": event.id,
                "company_id": event.company_id,
                "type": event.type.value,
                "created_at": event.created_at,
                # pydantic-core's encoder: the same JSON as json.dumps (non-ASCII as UTF-8
                # rather than escaped) in a fifth of the time, for every event written.
                "payload": to_json(event.data, fallback=str).decode(),
            },
        )

    @staticmethod
    def _event(row: Row[Any]) -> Event:
        return Event(
            id=row.id,
            type=EventType(row.type),
            company_id=row.company_id,
            created_at=row.created_at,
            data=from_json(row.payload),
        )

    def list(self, company_id: int | None = None) -> list[Event]:
        query = select(t.events).order_by(t.events.c.id)
        if company_id is not None:
            query = query.where(t.events.c.company_id == company_id)
        return [self._event(r) for r in self._conn.execute(query)]

    def undispatched(self, limit: int) -> _Events:
        query = (
            select(t.events)
            .where(t.events.c.dispatched_at.is_(None))
            .order_by(t.events.c.id)
            .limit(limit)
        )
        if self._lock_rows:
            query = query.with_for_update(skip_locked=True)
        return [self._event(r) for r in self._conn.execute(query)]

    def undispatched_heads(self, limit: int) -> _EventHeads:
        events = t.events
        query = (
            select(events.c.id, events.c.company_id, events.c.type)
            .where(events.c.dispatched_at.is_(None))
            .order_by(events.c.id)
            .limit(limit)
        )
        if self._lock_rows:
            query = query.with_for_update(skip_locked=True)
        return [EventHead(i, c, EventType(kind)) for i, c, kind in self._conn.execute(query)]

    def get_many(self, event_ids: Sequence[str]) -> _Events:
        if not event_ids:
            return []
        query = select(t.events).where(t.events.c.id.in_(list(event_ids))).order_by(t.events.c.id)
        return [self._event(r) for r in self._conn.execute(query)]

    def mark_dispatched(self, event_ids: Sequence[str], at: datetime) -> None:
        if event_ids:
            self._conn.execute(
                update(t.events).where(t.events.c.id.in_(event_ids)).values(dispatched_at=at)
            )

    def purge(self, created_before: datetime) -> int:
        events, deliveries = t.events, t.deliveries
        busy = (
            select(deliveries.c.id)
            .where(
                deliveries.c.event_id == events.c.id,
                deliveries.c.status == DeliveryStatus.PENDING.value,
            )
            .exists()
        )
        old = select(events.c.id).where(
            events.c.created_at < created_before,
            events.c.dispatched_at.is_not(None),
            ~busy,
        )
        ids = list(self._conn.execute(old).scalars())
        for start in range(0, len(ids), 500):  # bounded IN lists
            chunk = ids[start : start + 500]
            self._conn.execute(delete(deliveries).where(deliveries.c.event_id.in_(chunk)))
            self._conn.execute(delete(events).where(events.c.id.in_(chunk)))
        return len(ids)

    def get(self, event_id: str, company_id: int | None) -> Event | None:
        query = select(t.events).where(t.events.c.id == event_id)
        if company_id is not None:
            query = query.where(t.events.c.company_id == company_id)
        row = self._conn.execute(query).first()
        return self._event(row) if row is not None else None

    def page(
        self,
        company_id: int,
        *,
        type_: str | None,
        created_gte: datetime | None,
        limit: int,
        starting_after: str | None,
    ) -> _Events:
        events = t.events
        query = select(events).where(events.c.company_id == company_id)
        if type_ is not None:
            query = query.where(events.c.type == type_)
        if created_gte is not None:
            query = query.where(events.c.created_at >= created_gte)
        if starting_after is not None:
            query = query.where(events.c.id < starting_after)
        query = query.order_by(events.c.id.desc()).limit(limit)
        return [self._event(r) for r in self._conn.execute(query)]

    def backlog(self) -> OutboxBacklog:
        events = t.events
        # Both over the partial index of undispatched events (plus a row read each).
        count, oldest = self._conn.execute(
            select(func.count(), func.min(events.c.created_at)).where(
                events.c.dispatched_at.is_(None)
            )
        ).one()
        return OutboxBacklog(count, oldest)


class SqlDeliveries(DeliveryRows):
    """Deliveries: indexed columns plus the delivery as JSON; workers skip held rows."""

    def __init__(self, conn: Connection, lock_rows: bool) -> None:
        self._conn = conn
        self._lock_rows = lock_rows

    @staticmethod
    def _stored(body: str, lease_until: datetime | None) -> Delivery:
        # A claim writes the lease column only (rewriting the whole body, payload included, for
        # one field cost more than the rest of the claim), so the body's copy may be stale.
        delivery = Delivery.model_validate_json(body)
        if delivery.lease_until != lease_until:
            delivery = delivery.model_copy(update={"lease_until": lease_until})
        return delivery

    def _lease_all(self, deliveries: Sequence[Delivery]) -> None:
        self._conn.execute(
            _LEASE_DELIVERY,
            [{"delivery_id": d.id, "lease": d.lease_until} for d in deliveries],
        )

    def add(self, delivery: Delivery) -> None:
        _INSERT_DELIVERY.execute(self._conn, self._values(delivery))

    def claim_due(
        self, now: datetime, wall_now: datetime, lease_until: datetime, limit: int
    ) -> list[Delivery]:
        rows = t.deliveries
        query = (
            select(rows.c.body)
            .where(
                rows.c.status == DeliveryStatus.PENDING.value,
                rows.c.next_attempt_at <= now,
                or_(rows.c.lease_until.is_(None), rows.c.lease_until <= wall_now),
            )
            .order_by(rows.c.next_attempt_at, rows.c.id)
            .limit(limit)
        )
        if self._lock_rows:
            query = query.with_for_update(skip_locked=True)
        claimed = [
            Delivery.model_validate_json(body).model_copy(update={"lease_until": lease_until})
            for body in self._conn.execute(query).scalars()
        ]
        if claimed:
            self._lease_all(claimed)
        return claimed

    def claim_batch(
        self,
        now: datetime,
        wall_now: datetime,
        lease_until: datetime,
        limit: int,
        *,
        per_destination: int,
        room: Mapping[str, int],
    ) -> list[Delivery]:
        rows = t.deliveries
        due = (
            rows.c.status == DeliveryStatus.PENDING.value,
            rows.c.next_attempt_at <= now,
            or_(rows.c.lease_until.is_(None), rows.c.lease_until <= wall_now),
        )
        full = sorted(d for d, free in room.items() if free <= 0)
        wanted = [*due]
        if full:
            wanted.append(or_(rows.c.destination.is_(None), rows.c.destination.not_in(full)))
        # Each row's place within its (company, destination): taking the first of every pair,
        # then the second, … is the round robin. The window cannot carry FOR UPDATE on
        # PostgreSQL, so the rows are locked by the outer query, which checks again that they
        # are still due (another worker may have leased one since).
        ranked = (
            select(
                rows.c.id,
                rows.c.next_attempt_at,
                func.row_number()
                .over(
                    partition_by=(rows.c.company_id, rows.c.destination),
                    order_by=(rows.c.next_attempt_at, rows.c.id),
                )
                .label("turn"),
            )
            .where(*wanted)
            .subquery()
        )
        chosen = (
            select(ranked.c.id, ranked.c.turn, ranked.c.next_attempt_at)
            .where(ranked.c.turn <= per_destination)
            .order_by(ranked.c.turn, ranked.c.next_attempt_at, ranked.c.id)
            .limit(limit)
            .subquery()
        )
        query = (
            select(rows.c.body)
            .join(chosen, chosen.c.id == rows.c.id)
            .where(*due)
            .order_by(chosen.c.turn, chosen.c.next_attempt_at, chosen.c.id)
        )
        if self._lock_rows:
            query = query.with_for_update(skip_locked=True, of=rows)
        candidates = [Delivery.model_validate_json(b) for b in self._conn.execute(query).scalars()]
        claimed = fair_pick(candidates, limit, per_destination, room, lease_until)
        if claimed:
            self._lease_all(claimed)
        return claimed

    def get(self, delivery_id: str, *, for_update: bool = False) -> Delivery | None:
        row = _DELIVERY_QUERIES[for_update and self._lock_rows].first(
            self._conn, {"delivery_id": delivery_id}
        )
        return self._stored(row[0], row[1]) if row is not None else None

    def update(self, delivery: Delivery) -> None:
        values = self._values(delivery)
        values["delivery_id"] = values.pop("id")
        self._conn.execute(_UPDATE_DELIVERY, values)

    def for_event(self, event_id: str) -> list[Delivery]:
        query = (
            select(t.deliveries.c.body, t.deliveries.c.lease_until)
            .where(t.deliveries.c.event_id == event_id)
            .order_by(t.deliveries.c.id)
        )
        return [self._stored(body, lease) for body, lease in self._conn.execute(query)]

    def backlog(self, now: datetime, attempted_since: datetime) -> DeliveryBacklog:
        rows, events = t.deliveries, t.events
        pending = rows.c.status == DeliveryStatus.PENDING.value
        # Each over the partial index of pending deliveries (the due one a range of it).
        count = self._conn.execute(select(func.count()).where(pending)).scalar_one()
        due = self._conn.execute(
            select(func.count()).where(pending, rows.c.next_attempt_at <= now)
        ).scalar_one()
        oldest = self._conn.execute(
            select(func.min(events.c.created_at))
            .select_from(rows.join(events, events.c.id == rows.c.event_id))
            .where(pending)
        ).scalar()
        recent = self._conn.execute(
            select(func.count()).where(rows.c.last_attempt_at >= attempted_since)
        ).scalar_one()
        groups = self._conn.execute(
            select(
                rows.c.company_id,
                rows.c.endpoint_id,
                func.count(),
                func.max(rows.c.attempts),
                func.min(rows.c.next_attempt_at),
                func.max(rows.c.last_attempt_at),
            )
            .where(pending, rows.c.attempts > 0)
            .group_by(rows.c.company_id, rows.c.endpoint_id)
        ).all()
        failing = []
        for company_id, endpoint_id, failing_count, most, next_at, last_at in groups:
            # The group's delivery attempted last tells its kind and URL.
            latest = self._conn.execute(
                select(rows.c.body)
                .where(
                    pending,
                    rows.c.attempts > 0,
                    rows.c.company_id == company_id,
                    rows.c.endpoint_id.is_(None)
                    if endpoint_id is None
                    else rows.c.endpoint_id == endpoint_id,
                )
                .order_by(rows.c.last_attempt_at.desc(), rows.c.id.desc())
                .limit(1)
            ).scalar_one()
            sample = Delivery.model_validate_json(latest)
            failing.append(
                FailingDestination(
                    company_id=company_id,
                    endpoint_id=endpoint_id,
                    kind=DeliveryKind(sample.kind),
                    url=sample.url,
                    failing_deliveries=failing_count,
                    consecutive_failures=most,
                    next_attempt_at=next_at,
                    last_attempt_at=last_at,
                )
            )
        failing.sort(key=lambda f: (f.next_attempt_at, f.company_id, f.endpoint_id or ""))
        return DeliveryBacklog(
            pending=count,
            due=due,
            oldest_event_created_at=oldest,
            attempted_recently=recent,
            failing=tuple(failing),
        )


class SqlIdempotency:
    """Idempotency records."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    @staticmethod
    def _values(record: IdempotencyRecord) -> dict[str, Any]:
        return {
            "company_id": record.company_id,
            "key": record.key,
            "fingerprint": record.fingerprint,
            "state": record.state.value,
            "token": record.token,
            "created_at": record.created_at,
            "lease_until": record.lease_until,
            "response_status": record.response.status if record.response else None,
            "response_body": record.response.body if record.response else None,
        }

    def get(self, company_id: int, key: str) -> IdempotencyRecord | None:
        row = self._conn.execute(
            select(t.idempotency_keys).where(
                t.idempotency_keys.c.company_id == company_id, t.idempotency_keys.c.key == key
            )
        ).first()
        if row is None:
            return None
        m = row._mapping
        response = None
        if m["response_status"] is not None:
            response = StoredResponse(m["response_status"], bytes(m["response_body"]))
        return IdempotencyRecord(
            company_id=m["company_id"],
            key=m["key"],
            fingerprint=m["fingerprint"],
            state=IdempotencyState(m["state"]),
            token=m["token"],
            created_at=m["created_at"],
            lease_until=m["lease_until"],
            response=response,
        )

    def insert(self, record: IdempotencyRecord) -> bool:
        try:
            with self._conn.begin_nested():
                self._conn.execute(insert(t.idempotency_keys), [self._values(record)])
        except IntegrityError:
            return False
        return True

    def replace(self, record: IdempotencyRecord, expected_token: str) -> bool:
        values = self._values(record)
        result = self._conn.execute(
            update(t.idempotency_keys)
            .where(
                t.idempotency_keys.c.company_id == record.company_id,
                t.idempotency_keys.c.key == record.key,
                t.idempotency_keys.c.token == expected_token,
            )
            .values({k: v for k, v in values.items() if k not in ("company_id", "key")})
        )
        return result.rowcount == 1

    def delete(self, company_id: int, key: str, expected_token: str) -> bool:
        result = self._conn.execute(
            delete(t.idempotency_keys).where(
                t.idempotency_keys.c.company_id == company_id,
                t.idempotency_keys.c.key == key,
                t.idempotency_keys.c.token == expected_token,
                t.idempotency_keys.c.state == IdempotencyState.IN_FLIGHT.value,
            )
        )
        return result.rowcount == 1

    def purge(self, created_before: datetime) -> int:
        result = self._conn.execute(
            delete(t.idempotency_keys).where(t.idempotency_keys.c.created_at < created_before)
        )
        return int(result.rowcount)


def _is_unique_violation(error: Exception) -> bool:
    # Raw DBAPI errors from the hot path: sqlite3's IntegrityError, psycopg's SQLSTATE 23505.
    return isinstance(error, sqlite3.IntegrityError) or getattr(error, "sqlstate", None) == "23505"


def _record_json(record: TreasuryRecord) -> str:
    # Python-mode dump keeps rates as exact Decimals, which pydantic-core's encoder writes as
    # their str() (JSON mode would not do: the interface renders rates as JSON numbers, which
    # are floats). Datetimes are written in ISO 8601; anything else it cannot encode raises.
    return to_json(record.model_dump(mode="python")).decode()


class SqlRecords:
    """Treasury records: indexed columns plus the record as JSON."""

    def __init__(self, conn: Connection, lock_rows: bool) -> None:
        self._conn = conn
        self._lock_rows = lock_rows

    def _values(self, record: TreasuryRecord) -> dict[str, Any]:
        return {
            "status": record.status_value,
            "lookup_key": record.lookup_key,
            "body": _record_json(record),
        }

    def add(self, record: TreasuryRecord) -> None:
        _INSERT_RECORD.execute(
            self._conn,
            {
                "id": record.id,
                "kind": record.prefix,
                "company_id": record.company_id,
                "created_at": record.created_at,
                **self._values(record),
            },
        )

    def get(
        self, kind: type[R], record_id: str, company_id: int | None, *, for_update: bool = False
    ) -> R | None:
        query = _RECORD_QUERIES[company_id is not None, for_update and self._lock_rows]
        params: dict[str, Any] = {"record_id": record_id, "kind": kind.prefix}
        if company_id is not None:
            params["company_id"] = company_id
        row = query.first(self._conn, params)
        return kind.model_validate_json(row[0]) if row is not None else None

    def update(self, record: TreasuryRecord) -> None:
        records = t.treasury_records
        result = self._conn.execute(
            update(records).where(records.c.id == record.id).values(self._values(record))
        )
        if result.rowcount != 1:
            raise LookupError(f"no record {record.id}")

    def list(
        self,
        kind: type[R],
        company_id: int,
        limit: int,
        starting_after: str | None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> list[R]:
        records = t.treasury_records
        query = select(records.c.body).where(
            records.c.company_id == company_id,
            records.c.kind == kind.prefix,
            *metadata_where(records.c.body, metadata),
        )
        query = _newest_first(query, records.c.id, limit, starting_after)
        return [
            kind.model_validate(json.loads(body)) for body in self._conn.execute(query).scalars()
        ]

    def page(
        self,
        kind: type[R],
        company_id: int,
        filters: RecordFilter,
        limit: int,
        starting_after: str | None,
    ) -> builtins.list[R]:
        return record_page(self._conn, kind, company_id, filters, limit, starting_after)

    def find(self, kind: type[R], lookup_key: str) -> R | None:
        records = t.treasury_records
        body = self._conn.execute(
            select(records.c.body)
            .where(records.c.kind == kind.prefix, records.c.lookup_key == lookup_key)
            .limit(1)
        ).scalar_one_or_none()
        return kind.model_validate(json.loads(body)) if body is not None else None

    def with_status(
        self, kind: type[R], status: str, limit: int, after_id: str | None = None
    ) -> builtins.list[R]:
        records = t.treasury_records
        query = select(records.c.body).where(
            records.c.kind == kind.prefix, records.c.status == status
        )
        if after_id is not None:
            query = query.where(records.c.id > after_id)
        query = query.order_by(records.c.id).limit(limit)
        return [
            kind.model_validate(json.loads(body)) for body in self._conn.execute(query).scalars()
        ]


@lru_cache(maxsize=1024)
def _parsed_intent(intent_id: int, body: str) -> PaymentIntent:
    """The intent stored as ``body``, parsed and validated once per distinct body.

    An intent is read far more often than it changes (status polls, the hosted page), and
    parsing and validating its JSON was most of a read's own cost. The stored text determines
    the intent completely and ``PaymentIntent`` is immutable (frozen, tuples only), so one
    parsed instance serves every read of the same text; a change writes a new body, which is a
    new key, never a stale answer.
    """
    return PaymentIntent.model_validate({**json.loads(body), "id": intent_id})


class SqlIntents:
    """Payment intents: indexed columns plus the intent as JSON; the database assigns ids."""

    def __init__(self, conn: Connection, lock_rows: bool) -> None:
        self._conn = conn
        self._lock_rows = lock_rows

    @staticmethod
    def _values(intent: PaymentIntent) -> dict[str, Any]:
        return {
            "company_id": intent.company_id,
            "account_id": intent.account_id,
            "status": intent.status.value,
            "lookup_id": intent.payment_intent_lookup_id,
            "created_at": intent.created_at,
            "body": intent.model_dump_json(exclude={"id"}),
        }

    @staticmethod
    def _intent(row: Sequence[Any]) -> PaymentIntent:
        intent_id, body = row
        return _parsed_intent(intent_id, body)

    def add(self, intent: PaymentIntent) -> PaymentIntent:
        """Insert ``intent``; a taken ``payment_intent_lookup_id`` raises :class:`ValueError`
        (on PostgreSQL the transaction is then aborted and must end)."""
        sql = _statements(self._conn.dialect)
        values = self._values(intent)
        values["created_at"] = sql.bind_time(intent.created_at)
        try:
            with _raw_cursor(self._conn) as cursor:
                cursor.execute(sql.insert_intent, tuple(values[c] for c in _INTENT_WRITE_COLUMNS))
                row = cursor.fetchone()
        except Exception as exc:
            if _is_unique_violation(exc):
                raise ValueError(
                    f"duplicate payment intent lookup id {intent.payment_intent_lookup_id}"
                ) from exc
            raise
        assert row is not None  # RETURNING id answers one row
        return intent.model_copy(update={"id": row[0]})

    def _one(
        self, query: Any, params: dict[str, Any], company_id: int | None, for_update: bool
    ) -> PaymentIntent | None:
        if company_id is not None:
            params["company_id"] = company_id
        locked = for_update and self._lock_rows
        row = _INTENT_QUERIES[query, company_id is not None, locked].first(self._conn, params)
        return self._intent(row) if row is not None else None

    def get(
        self, intent_id: int, company_id: int | None, *, for_update: bool = False
    ) -> PaymentIntent | None:
        return self._one(_INTENT_BY_ID, {"intent_id": intent_id}, company_id, for_update)

    def by_lookup_id(
        self, lookup_id: str, company_id: int | None, *, for_update: bool = False
    ) -> PaymentIntent | None:
        return self._one(_INTENT_BY_LOOKUP_ID, {"lookup_id": lookup_id}, company_id, for_update)

    def update(self, intent: PaymentIntent) -> None:
        intents = t.payment_intents
        try:
            result = self._conn.execute(
                update(intents).where(intents.c.id == intent.id).values(self._values(intent))
            )
        except IntegrityError as exc:
            raise ValueError(
                f"duplicate payment intent lookup id {intent.payment_intent_lookup_id}"
            ) from exc
        if result.rowcount != 1:
            raise LookupError(f"no payment intent {intent.id}")

    def list(
        self, company_id: int, filters: IntentFilter, limit: int, starting_after: int | None
    ) -> list[PaymentIntent]:
        intents = t.payment_intents
        query = _INTENT_COLUMNS.where(*_intent_filter(company_id, filters))
        if starting_after is not None:
            query = query.where(intents.c.id < starting_after)
        query = query.order_by(intents.c.id.desc()).limit(limit)
        return [self._intent(r) for r in self._conn.execute(query)]

    def count(self, company_id: int, filters: IntentFilter) -> int:
        query = (
            select(func.count())
            .select_from(t.payment_intents)
            .where(*_intent_filter(company_id, filters))
        )
        return int(self._conn.execute(query).scalar_one())


_MAX_INT32 = 2**31 - 1


def _intent_filter(company_id: int, filters: IntentFilter) -> list[ColumnElement[bool]]:
    """The WHERE of :meth:`IntentFilter.matches`, for one company's intents."""
    intents = t.payment_intents
    where = [intents.c.company_id == company_id]
    if filters.status is not None:
        where.append(intents.c.status == filters.status.value)
    if filters.account_id is not None:
        # Account ids are 32-bit columns; a larger one names no account (and PostgreSQL would
        # refuse to compare it with an INTEGER parameter).
        where.append(
            intents.c.account_id == filters.account_id
            if filters.account_id <= _MAX_INT32
            else false()
        )
    if filters.created_gte is not None:
        where.append(intents.c.created_at >= filters.created_gte)
    if filters.created_lt is not None:
        where.append(intents.c.created_at < filters.created_lt)
    where.extend(intent_field_where(filters))
    where.extend(metadata_where(intents.c.body, filters.metadata))
    return where


class SqlJobs:
    """Scheduled jobs; PostgreSQL runners skip rows another runner holds."""

    def __init__(self, conn: Connection, lock_rows: bool) -> None:
        self._conn = conn
        self._lock_rows = lock_rows

    @staticmethod
    def _job(row: Row[Any]) -> Job:
        m = row._mapping
        return Job(
            id=m["id"],
            kind=m["kind"],
            resource_id=m["resource_id"],
            company_id=m["company_id"],
            due_at=m["due_at"],
            status=JobStatus(m["status"]),
        )

    def schedule(self, job: Job) -> None:
        _INSERT_JOB.execute(
            self._conn,
            {
                "id": job.id,
                "kind": job.kind,
                "resource_id": job.resource_id,
                "company_id": job.company_id,
                "due_at": job.due_at,
                "status": job.status.value,
            },
        )

    def due(self, now: datetime, limit: int) -> list[Job]:
        query = (
            select(t.jobs)
            .where(t.jobs.c.status == JobStatus.PENDING.value, t.jobs.c.due_at <= now)
            .order_by(t.jobs.c.due_at, t.jobs.c.id)
            .limit(limit)
        )
        return [self._job(r) for r in self._conn.execute(query)]

    def claim(self, job_id: str) -> Job | None:
        query = select(t.jobs).where(
            t.jobs.c.id == job_id, t.jobs.c.status == JobStatus.PENDING.value
        )
        if self._lock_rows:
            query = query.with_for_update(skip_locked=True)
        row = self._conn.execute(query).first()
        return self._job(row) if row else None

    def finish(self, job_id: str) -> None:
        self._conn.execute(
            update(t.jobs).where(t.jobs.c.id == job_id).values(status=JobStatus.DONE.value)
        )

    def finish_for(self, resource_id: str) -> int:
        result = self._conn.execute(
            update(t.jobs)
            .where(t.jobs.c.resource_id == resource_id, t.jobs.c.status == JobStatus.PENDING.value)
            .values(status=JobStatus.DONE.value)
        )
        return int(result.rowcount)


_MICROSECOND = timedelta(microseconds=1)


class SqlClockOffset:
    """The sandbox clock's offset: one row, created by the first advance."""

    _NAME = "sandbox"

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def get(self) -> timedelta:
        stored = self._conn.execute(
            select(t.clock_offsets.c.offset_us).where(t.clock_offsets.c.name == self._NAME)
        ).scalar()
        return timedelta(microseconds=stored or 0)

    def _add(self, micros: int) -> bool:
        # One statement that reads and writes the row: it waits for another transaction's
        # advance (PostgreSQL's row lock; SQLite's one writer) and then adds to its result.
        result = self._conn.execute(
            update(t.clock_offsets)
            .where(t.clock_offsets.c.name == self._NAME)
            .values(offset_us=t.clock_offsets.c.offset_us + micros)
        )
        return result.rowcount == 1

    def advance(self, by: timedelta) -> timedelta:
        if by < timedelta(0):
            raise ValueError("the clock offset only grows")
        micros = by // _MICROSECOND
        if not self._add(micros):
            # The first advance ever. A concurrent first advance may insert the row first; a
            # savepoint keeps the unique-key failure from aborting ours, and we add to its row.
            try:
                with self._conn.begin_nested():
                    self._conn.execute(
                        insert(t.clock_offsets), [{"name": self._NAME, "offset_us": micros}]
                    )
            except IntegrityError:
                if not self._add(micros):  # pragma: no cover - the row was just inserted
                    raise
        return self.get()


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
    or three of the ten, and a read on the request path is short enough for this to show)."""

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

    @_made_on_first_use
    def clock_offset(self) -> SqlClockOffset:
        return SqlClockOffset(self.connection)
