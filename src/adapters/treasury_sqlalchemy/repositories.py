"""The storage port's repositories over one SQLAlchemy connection (one transaction)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, Generic, TypeVar, overload

from pydantic_core import from_json, to_json
from sqlalchemy import Connection, Row, and_, bindparam, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from treasury_core.errors import LedgerInvariantViolation
from treasury_core.events import Event, EventHead, EventType
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
from treasury_core.notifications.deliveries import Delivery, DeliveryKind, DeliveryStatus, fair_pick
from treasury_core.notifications.status import DeliveryBacklog, FailingDestination, OutboxBacklog
from treasury_core.wallets import Wallet, WalletStatus
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.companies import SqlCompanies
from treasury_sqlalchemy.delivery_claim import claim_candidates
from treasury_sqlalchemy.delivery_records import UPDATE_DELIVERY, DeliveryRows
from treasury_sqlalchemy.history import SqlWalletHistory, record_entries
from treasury_sqlalchemy.hot import (
    LEDGER_COUNTERS,
    HotInsert,
    HotQuery,
    movement_statements,
    raw_cursor,
)
from treasury_sqlalchemy.idempotency import SqlIdempotency
from treasury_sqlalchemy.integrity import is_unique_violation
from treasury_sqlalchemy.intents import SqlIntents
from treasury_sqlalchemy.jobs import SqlClockOffset, SqlJobs
from treasury_sqlalchemy.metadata_filter import metadata_where
from treasury_sqlalchemy.record_lists import newest_first
from treasury_sqlalchemy.records import SqlRecords
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

_Events = list[Event]  # spelled here: inside the outbox classes, ``list`` is a method
_EventHeads = list[EventHead]


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
        pending_ids = referenced_pendings(journal)
        pendings: dict[str, PendingMovement] = {}
        if pending_ids:
            query = select(t.ledger_pendings).where(t.ledger_pendings.c.id.in_(pending_ids))
            if self._lock_rows:
                query = query.order_by(t.ledger_pendings.c.id).with_for_update()
            pendings = {p.id: p for p in map(_pending, self._conn.execute(query))}
        plan = plan_journal(journal, pendings, now)
        sql = movement_statements(self._conn.dialect)
        striped, stripe = striped_accounts(self._conn)
        after: dict[str, Account] = {}
        with raw_cursor(self._conn) as cursor:
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
                if is_unique_violation(exc):
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
        full = sorted(d for d, free in room.items() if free <= 0)
        if self._conn.dialect.name == "postgresql":
            # One destination at a time through an index, not a sort of the whole backlog.
            bodies = claim_candidates(
                self._conn, now, wall_now, limit, per_destination=per_destination, full=full
            )
            candidates = [Delivery.model_validate_json(b) for b in bodies]
        else:
            candidates = self._ranked_candidates(now, wall_now, limit, per_destination, full)
        claimed = fair_pick(candidates, limit, per_destination, room, lease_until)
        if claimed:
            self._lease_all(claimed)
        return claimed

    def _ranked_candidates(
        self,
        now: datetime,
        wall_now: datetime,
        limit: int,
        per_destination: int,
        full: Sequence[str],
    ) -> list[Delivery]:
        """The claim's candidates on any SQL database (SQLite here): every due delivery
        numbered within its (company, destination) by a window function."""
        rows = t.deliveries
        due = (
            rows.c.status == DeliveryStatus.PENDING.value,
            rows.c.next_attempt_at <= now,
            or_(rows.c.lease_until.is_(None), rows.c.lease_until <= wall_now),
        )
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
        return [Delivery.model_validate_json(b) for b in self._conn.execute(query).scalars()]

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
