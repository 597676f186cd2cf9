"""An in-memory storage adapter: the reference implementation of the storage port.

It keeps state in dicts of immutable values under one lock. A transaction records an undo entry
for every write and replays them backwards on rollback, so a refused operation leaves nothing
behind, exactly as on a database. It is fast, dependency-free, and what the contract tests hold
the SQL adapter to.
"""

from __future__ import annotations

import builtins
import itertools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from treasury_core.companies import ApiKey, Company, MerchantAccount
from treasury_core.events import Event, EventHead
from treasury_core.idempotency import IdempotencyRecord, IdempotencyState
from treasury_core.jobs import Job, JobStatus
from treasury_core.ledger import (
    Account,
    AccountKind,
    EntryQuery,
    Journal,
    LedgerPlan,
    PendingMovement,
    PendingStatus,
    Posting,
    WalletEntry,
    apply_plan,
    duplicate_journal,
    plan_journal,
    referenced_pendings,
)
from treasury_core.listing import RecordFilter
from treasury_core.metadata import metadata_matches
from treasury_core.notifications.deliveries import Delivery, DeliveryStatus, fair_pick
from treasury_core.notifications.status import DeliveryBacklog, FailingDestination, OutboxBacklog
from treasury_core.payments.intents import IntentFilter, PaymentIntent
from treasury_core.ports.storage import R, Storage, UnitOfWork
from treasury_core.testing import memory_history
from treasury_core.treasury.records import TreasuryRecord
from treasury_core.wallets import Wallet

_MISSING: Any = object()


_Events = list[Event]  # spelled here: inside the outbox classes, ``list`` is a method
_EventHeads = list[EventHead]


@dataclass
class _State:
    wallets: dict[str, Wallet] = field(default_factory=dict)
    accounts: dict[str, Account] = field(default_factory=dict)
    postings: list[Posting] = field(default_factory=list)
    posting_ids: dict[str, bool] = field(default_factory=dict)
    pendings: dict[str, PendingMovement] = field(default_factory=dict)
    histories: memory_history.Histories = field(default_factory=dict)
    companies: dict[int, Company] = field(default_factory=dict)
    merchant_accounts: dict[int, MerchantAccount] = field(default_factory=dict)
    api_keys: dict[str, ApiKey] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    dispatched: dict[str, datetime] = field(default_factory=dict)
    deliveries: dict[str, Delivery] = field(default_factory=dict)
    idempotency: dict[tuple[int, str], IdempotencyRecord] = field(default_factory=dict)
    records: dict[str, TreasuryRecord] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)
    intents: dict[int, PaymentIntent] = field(default_factory=dict)
    # payment_intent_lookup_id -> intent id, the unique index of the SQL table.
    intent_lookup_ids: dict[str, int] = field(default_factory=dict)
    sequences: dict[str, itertools.count[int]] = field(default_factory=dict)
    # The sandbox clock's offset under one key, so put() can undo an advance.
    clock_offset: dict[str, timedelta] = field(default_factory=dict)


class _Tx:
    """Write access to the state that can be undone."""

    def __init__(self, state: _State, write: bool) -> None:
        self.state = state
        self.write = write
        self._undo: list[Callable[[], None]] = []

    def put(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        self._require_write()
        old = table.get(key, _MISSING)
        table[key] = value
        self._undo.append(
            lambda: table.pop(key) if old is _MISSING else table.__setitem__(key, old)
        )

    def remove(self, table: dict[Any, Any], key: Any) -> None:
        self._require_write()
        old = table.pop(key)
        self._undo.append(lambda: table.__setitem__(key, old))

    def append(self, items: list[Any], value: Any) -> None:
        self._require_write()
        items.append(value)
        self._undo.append(items.pop)

    def next_id(self, sequence: str) -> int:
        self._require_write()
        counter = self.state.sequences.setdefault(sequence, itertools.count(1))
        return next(counter)  # like a database sequence, not given back on rollback

    def on_rollback(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` if the transaction rolls back (for changes put() cannot express)."""
        self._require_write()
        self._undo.append(undo)

    def rollback(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def _require_write(self) -> None:
        if not self.write:
            raise RuntimeError("write in a read-only transaction")


class _Wallets:
    def __init__(self, tx: _Tx) -> None:
        self._tx = tx

    def add(self, wallet: Wallet) -> None:
        if wallet.id in self._tx.state.wallets:
            raise ValueError(f"duplicate wallet id {wallet.id}")
        self._tx.put(self._tx.state.wallets, wallet.id, wallet)

    def get(self, company_id: int, wallet_id: str) -> Wallet | None:
        wallet = self._tx.state.wallets.get(wallet_id)
        return wallet if wallet is not None and wallet.company_id == company_id else None

    def list(
        self,
        company_id: int,
        limit: int,
        starting_after: str | None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> list[Wallet]:
        rows = [
            w
            for w in self._tx.state.wallets.values()
            if w.company_id == company_id and metadata_matches(w.metadata, metadata)
        ]
        return _newest_first(rows, lambda w: w.id, limit, starting_after)

    def lock(self, company_id: int, wallet_id: str) -> Wallet | None:
        # One writer at a time already: nothing more to lock.
        return self.get(company_id, wallet_id)

    def set_metadata(self, company_id: int, wallet_id: str, metadata: Mapping[str, str]) -> None:
        wallet = self.get(company_id, wallet_id)
        if wallet is None:
            raise LookupError(f"no wallet {wallet_id}")
        updated = wallet.model_copy(update={"metadata": dict(metadata)})
        self._tx.put(self._tx.state.wallets, wallet.id, updated)


class _Ledger:
    def __init__(self, tx: _Tx) -> None:
        self._tx = tx

    def open_account(self, account: Account) -> None:
        if account.id in self._tx.state.accounts:
            raise ValueError(f"duplicate account id {account.id}")
        self._tx.put(self._tx.state.accounts, account.id, _zeroed(account))

    def ensure_account(self, account: Account) -> None:
        if account.id not in self._tx.state.accounts:
            self._tx.put(self._tx.state.accounts, account.id, _zeroed(account))

    def get_account(self, account_id: str) -> Account | None:
        return self._tx.state.accounts.get(account_id)

    def get_accounts(self, account_ids: Sequence[str]) -> dict[str, Account]:
        accounts = self._tx.state.accounts
        return {i: accounts[i] for i in account_ids if i in accounts}

    def wallet_accounts(
        self, company_id: int, limit: int, starting_after: str | None
    ) -> list[Account]:
        rows = [
            a
            for a in self._tx.state.accounts.values()
            if a.company_id == company_id and a.kind is AccountKind.WALLET
        ]
        return _newest_first(rows, lambda a: a.id, limit, starting_after)

    def apply(self, journal: Journal, now: datetime) -> LedgerPlan:
        state = self._tx.state
        referenced = {
            i: state.pendings[i] for i in referenced_pendings(journal) if i in state.pendings
        }
        plan = plan_journal(journal, referenced, now)
        if any(p.id in state.posting_ids for p in plan.postings):
            raise duplicate_journal(journal)
        updated = apply_plan(state.accounts, plan)
        for account_id, account in updated.items():
            self._tx.put(state.accounts, account_id, account)
        for posting in plan.postings:
            self._tx.append(state.postings, posting)
            self._tx.put(state.posting_ids, posting.id, True)
        for pending in (*plan.new_pendings, *plan.resolved_pendings):
            self._tx.put(state.pendings, pending.id, pending)
        memory_history.record(state.histories, plan, updated, self._tx.append)
        return plan

    def wallet_entries(self, query: EntryQuery) -> list[WalletEntry]:
        return memory_history.page(self._tx.state.histories, query)

    def wallet_entry(self, wallet_id: str, entry_id: str) -> WalletEntry | None:
        return memory_history.find(self._tx.state.histories, wallet_id, entry_id)

    def last_wallet_entry(self, wallet_id: str, before: datetime | None) -> WalletEntry | None:
        return memory_history.last_before(self._tx.state.histories, wallet_id, before)

    def get_pending(self, pending_id: str) -> PendingMovement | None:
        return self._tx.state.pendings.get(pending_id)

    def due_pendings(self, now: datetime, limit: int) -> list[PendingMovement]:
        due = [
            p
            for p in self._tx.state.pendings.values()
            if p.status is PendingStatus.PENDING and p.deadline is not None and p.deadline <= now
        ]
        due.sort(key=lambda p: (p.deadline, p.id))
        return due[:limit]

    def all_accounts(self) -> Iterator[Account]:
        return iter(sorted(self._tx.state.accounts.values(), key=lambda a: a.id))

    def postings(self) -> Iterator[Posting]:
        return iter(sorted(self._tx.state.postings, key=lambda p: p.id))

    def pendings(self) -> Iterator[PendingMovement]:
        return iter(sorted(self._tx.state.pendings.values(), key=lambda p: p.id))

    def postings_page(self, after_id: str | None, limit: int) -> list[Posting]:
        # Sorting per page is quadratic over a whole audit; fine for a test double's sizes.
        rows = sorted(self._tx.state.postings, key=lambda p: p.id)
        if after_id is not None:
            rows = [p for p in rows if p.id > after_id]
        return rows[:limit]

    def count_postings(self) -> int:
        return len(self._tx.state.postings)


class _Companies:
    def __init__(self, tx: _Tx) -> None:
        self._tx = tx

    def add_company(self, name: str, created_at: datetime) -> Company:
        company = Company(id=self._tx.next_id("company"), name=name, created_at=created_at)
        self._tx.put(self._tx.state.companies, company.id, company)
        return company

    def get_company(self, company_id: int) -> Company | None:
        return self._tx.state.companies.get(company_id)

    def add_merchant_account(
        self, company_id: int, name: str, created_at: datetime
    ) -> MerchantAccount:
        account = MerchantAccount(
            id=self._tx.next_id("merchant_account"),
            company_id=company_id,
            name=name,
            created_at=created_at,
        )
        self._tx.put(self._tx.state.merchant_accounts, account.id, account)
        return account

    def merchant_accounts(self, company_id: int) -> list[MerchantAccount]:
        rows = [m for m in self._tx.state.merchant_accounts.values() if m.company_id == company_id]
        return sorted(rows, key=lambda m: m.id)

    def add_api_key(self, key: ApiKey) -> None:
        if any(k.key_hash == key.key_hash for k in self._tx.state.api_keys.values()):
            raise ValueError("duplicate API key")
        self._tx.put(self._tx.state.api_keys, key.id, key)

    def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        return next((k for k in self._tx.state.api_keys.values() if k.key_hash == key_hash), None)

    def revoke_api_key(self, key_id: str, revoked_at: datetime) -> bool:
        key = self._tx.state.api_keys.get(key_id)
        if key is None or key.revoked_at is not None:
            return False
        self._tx.put(
            self._tx.state.api_keys, key_id, key.model_copy(update={"revoked_at": revoked_at})
        )
        return True

    def list_companies(self) -> list[Company]:
        return sorted(self._tx.state.companies.values(), key=lambda c: c.id)

    def api_keys(self, company_id: int) -> list[ApiKey]:
        rows = [k for k in self._tx.state.api_keys.values() if k.company_id == company_id]
        return sorted(rows, key=lambda k: (k.created_at, k.id))


class _Outbox:
    def __init__(self, tx: _Tx) -> None:
        self._tx = tx

    def add(self, event: Event) -> None:
        self._tx.append(self._tx.state.events, event)

    def list(self, company_id: int | None = None) -> list[Event]:
        events = self._tx.state.events
        return [e for e in events if company_id is None or e.company_id == company_id]

    def undispatched(self, limit: int) -> _Events:
        done = self._tx.state.dispatched
        return [e for e in self._tx.state.events if e.id not in done][:limit]

    def undispatched_heads(self, limit: int) -> _EventHeads:
        return [EventHead(e.id, e.company_id, e.type) for e in self.undispatched(limit)]

    def get_many(self, event_ids: Sequence[str]) -> _Events:
        wanted = set(event_ids)
        return [e for e in self._tx.state.events if e.id in wanted]

    def mark_dispatched(self, event_ids: Sequence[str], at: datetime) -> None:
        for event_id in event_ids:
            self._tx.put(self._tx.state.dispatched, event_id, at)

    def purge(self, created_before: datetime) -> int:
        state = self._tx.state
        busy = {d.event_id for d in state.deliveries.values() if d.status is DeliveryStatus.PENDING}
        gone = {
            e.id
            for e in state.events
            if e.created_at < created_before and e.id in state.dispatched and e.id not in busy
        }
        for delivery in [d for d in state.deliveries.values() if d.event_id in gone]:
            self._tx.remove(state.deliveries, delivery.id)
        kept = [e for e in state.events if e.id not in gone]
        old = list(state.events)
        state.events[:] = kept
        self._tx.on_rollback(lambda: state.events.__setitem__(slice(None), old))
        return len(gone)

    def get(self, event_id: str, company_id: int | None) -> Event | None:
        for event in self._tx.state.events:
            if event.id == event_id and company_id in (None, event.company_id):
                return event
        return None

    def page(
        self,
        company_id: int,
        *,
        type_: str | None,
        created_gte: datetime | None,
        limit: int,
        starting_after: str | None,
    ) -> _Events:
        rows = [
            e
            for e in self._tx.state.events
            if e.company_id == company_id
            and (type_ is None or e.type.value == type_)
            and (created_gte is None or e.created_at >= created_gte)
        ]
        return _newest_first(rows, lambda e: e.id, limit, starting_after)

    def backlog(self) -> OutboxBacklog:
        done = self._tx.state.dispatched
        waiting = [e.created_at for e in self._tx.state.events if e.id not in done]
        return OutboxBacklog(len(waiting), min(waiting, default=None))


class _Deliveries:
    def __init__(self, tx: _Tx) -> None:
        self._tx = tx

    def add(self, delivery: Delivery) -> None:
        self._tx.put(self._tx.state.deliveries, delivery.id, delivery)

    def claim_due(
        self, now: datetime, wall_now: datetime, lease_until: datetime, limit: int
    ) -> list[Delivery]:
        due = [
            d
            for d in self._tx.state.deliveries.values()
            if d.status is DeliveryStatus.PENDING
            and d.next_attempt_at <= now
            and (d.lease_until is None or d.lease_until <= wall_now)
        ]
        due.sort(key=lambda d: (d.next_attempt_at, d.id))
        claimed = [d.model_copy(update={"lease_until": lease_until}) for d in due[:limit]]
        for delivery in claimed:
            self.update(delivery)
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
        pairs: dict[tuple[int, str], list[Delivery]] = {}
        for d in self._tx.state.deliveries.values():
            if (
                d.status is DeliveryStatus.PENDING
                and d.next_attempt_at <= now
                and (d.lease_until is None or d.lease_until <= wall_now)
                and room.get(d.destination, per_destination) > 0
            ):
                pairs.setdefault((d.company_id, d.destination), []).append(d)
        ranked: list[tuple[int, datetime, str, Delivery]] = []
        for queue in pairs.values():
            queue.sort(key=lambda d: (d.next_attempt_at, d.id))
            ranked += [
                (n, d.next_attempt_at, d.id, d) for n, d in enumerate(queue[:per_destination])
            ]
        ranked.sort(key=lambda r: r[:3])
        candidates = [r[3] for r in ranked[:limit]]
        claimed = fair_pick(candidates, limit, per_destination, room, lease_until)
        for delivery in claimed:
            self.update(delivery)
        return claimed

    def get(self, delivery_id: str, *, for_update: bool = False) -> Delivery | None:
        return self._tx.state.deliveries.get(delivery_id)

    def record_attempts(self, attempted: Sequence[tuple[Delivery, Delivery]]) -> list[Delivery]:
        changed = []
        for claimed, new in attempted:
            stored = self._tx.state.deliveries.get(claimed.id)
            if stored is None:
                continue
            if (
                stored.status is DeliveryStatus.PENDING
                and stored.lease_until == claimed.lease_until
                and len(stored.attempts) == len(claimed.attempts)
            ):
                self.update(new)
            else:
                changed.append(claimed)
        return changed

    def update(self, delivery: Delivery) -> None:
        self._tx.put(self._tx.state.deliveries, delivery.id, delivery)

    def for_event(self, event_id: str) -> list[Delivery]:
        found = [d for d in self._tx.state.deliveries.values() if d.event_id == event_id]
        return sorted(found, key=lambda d: d.id)

    def backlog(self, now: datetime, attempted_since: datetime) -> DeliveryBacklog:
        state = self._tx.state
        pending = [d for d in state.deliveries.values() if d.status is DeliveryStatus.PENDING]
        waiting = {d.event_id for d in pending}
        created = [e.created_at for e in state.events if e.id in waiting]
        recent = sum(
            1
            for d in state.deliveries.values()
            if d.attempts and d.attempts[-1].attempted_at >= attempted_since
        )
        groups: dict[tuple[int, str | None], list[Delivery]] = {}
        for delivery in sorted(pending, key=lambda d: d.id):
            if delivery.attempts:
                groups.setdefault((delivery.company_id, delivery.endpoint_id), []).append(delivery)
        failing = []
        for (company_id, endpoint_id), rows in groups.items():
            latest = max(rows, key=lambda d: (d.attempts[-1].attempted_at, d.id))
            failing.append(
                FailingDestination(
                    company_id=company_id,
                    endpoint_id=endpoint_id,
                    kind=latest.kind,
                    url=latest.url,
                    failing_deliveries=len(rows),
                    consecutive_failures=max(len(d.attempts) for d in rows),
                    next_attempt_at=min(d.next_attempt_at for d in rows),
                    last_attempt_at=latest.attempts[-1].attempted_at,
                )
            )
        failing.sort(key=lambda f: (f.next_attempt_at, f.company_id, f.endpoint_id or ""))
        return DeliveryBacklog(
            pending=len(pending),
            due=sum(1 for d in pending if d.next_attempt_at <= now),
            oldest_event_created_at=min(created, default=None),
            attempted_recently=recent,
            failing=tuple(failing),
        )


class _Idempotency:
    def __init__(self, tx: _Tx) -> None:
        self._tx = tx

    def get(self, company_id: int, key: str) -> IdempotencyRecord | None:
        return self._tx.state.idempotency.get((company_id, key))

    def insert(self, record: IdempotencyRecord) -> bool:
        table = self._tx.state.idempotency
        if (record.company_id, record.key) in table:
            return False
        self._tx.put(table, (record.company_id, record.key), record)
        return True

    def replace(self, record: IdempotencyRecord, expected_token: str) -> bool:
        table = self._tx.state.idempotency
        current = table.get((record.company_id, record.key))
        if current is None or current.token != expected_token:
            return False
        self._tx.put(table, (record.company_id, record.key), record)
        return True

    def delete(self, company_id: int, key: str, expected_token: str) -> bool:
        table = self._tx.state.idempotency
        current = table.get((company_id, key))
        if (
            current is None
            or current.token != expected_token
            or current.state is not IdempotencyState.IN_FLIGHT
        ):
            return False
        self._tx.remove(table, (company_id, key))
        return True

    def purge(self, created_before: datetime) -> int:
        table = self._tx.state.idempotency
        old = [k for k, r in table.items() if r.created_at < created_before]
        for k in old:
            self._tx.remove(table, k)
        return len(old)


class _Records:
    def __init__(self, tx: _Tx) -> None:
        self._tx = tx

    def add(self, record: TreasuryRecord) -> None:
        if record.id in self._tx.state.records:
            raise ValueError(f"duplicate record id {record.id}")
        if (
            record.unique_lookup_key
            and self.find(type(record), record.lookup_key or "") is not None
        ):
            raise ValueError(f"duplicate {record.prefix} lookup key {record.lookup_key}")
        self._tx.put(self._tx.state.records, record.id, record)

    def get(
        self, kind: type[R], record_id: str, company_id: int | None, *, for_update: bool = False
    ) -> R | None:
        record = self._tx.state.records.get(record_id)
        if not isinstance(record, kind) or (
            company_id is not None and record.company_id != company_id
        ):
            return None
        return record

    def update(self, record: TreasuryRecord) -> None:
        if record.id not in self._tx.state.records:
            raise ValueError(f"no record {record.id}")
        self._tx.put(self._tx.state.records, record.id, record)

    def list(
        self,
        kind: type[R],
        company_id: int,
        limit: int,
        starting_after: str | None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> list[R]:
        rows = [
            r
            for r in self._tx.state.records.values()
            if isinstance(r, kind)
            and r.company_id == company_id
            and metadata_matches(r.metadata, metadata)
        ]
        return _newest_first(rows, lambda r: r.id, limit, starting_after)

    def page(
        self,
        kind: type[R],
        company_id: int,
        filters: RecordFilter,
        limit: int,
        starting_after: str | None,
    ) -> builtins.list[R]:
        rows = [
            r
            for r in self._tx.state.records.values()
            if isinstance(r, kind) and r.company_id == company_id and filters.matches(r)
        ]
        return _newest_first(rows, lambda r: r.id, limit, starting_after)

    def find(self, kind: type[R], lookup_key: str) -> R | None:
        return next(
            (
                r
                for r in self._tx.state.records.values()
                if isinstance(r, kind) and r.lookup_key == lookup_key
            ),
            None,
        )

    def with_status(
        self, kind: type[R], status: str, limit: int, after_id: str | None = None
    ) -> builtins.list[R]:
        rows = sorted(
            (
                r
                for r in self._tx.state.records.values()
                if isinstance(r, kind)
                and r.status_value == status
                and (after_id is None or r.id > after_id)
            ),
            key=lambda r: r.id,
        )
        return rows[:limit]


class _Intents:
    def __init__(self, tx: _Tx) -> None:
        self._tx = tx

    def add(self, intent: PaymentIntent) -> PaymentIntent:
        state = self._tx.state
        if intent.payment_intent_lookup_id in state.intent_lookup_ids:
            raise ValueError(
                f"duplicate payment intent lookup id {intent.payment_intent_lookup_id}"
            )
        # Like a database sequence: an id taken by a rolled-back add is not given back, so ids
        # keep increasing (with a gap).
        stored = intent.model_copy(update={"id": self._tx.next_id("payment_intent")})
        self._tx.put(state.intents, stored.id, stored)
        self._tx.put(state.intent_lookup_ids, stored.payment_intent_lookup_id, stored.id)
        return stored

    def get(
        self, intent_id: int, company_id: int | None, *, for_update: bool = False
    ) -> PaymentIntent | None:
        return _of_company(self._tx.state.intents.get(intent_id), company_id)

    def by_lookup_id(
        self, lookup_id: str, company_id: int | None, *, for_update: bool = False
    ) -> PaymentIntent | None:
        intent_id = self._tx.state.intent_lookup_ids.get(lookup_id)
        if intent_id is None:
            return None
        return _of_company(self._tx.state.intents.get(intent_id), company_id)

    def update(self, intent: PaymentIntent) -> None:
        state = self._tx.state
        current = state.intents.get(intent.id)
        if current is None:
            raise LookupError(f"no payment intent {intent.id}")
        new_lookup = intent.payment_intent_lookup_id
        if new_lookup != current.payment_intent_lookup_id:
            if new_lookup in state.intent_lookup_ids:
                raise ValueError(f"duplicate payment intent lookup id {new_lookup}")
            self._tx.remove(state.intent_lookup_ids, current.payment_intent_lookup_id)
            self._tx.put(state.intent_lookup_ids, new_lookup, intent.id)
        self._tx.put(state.intents, intent.id, intent)

    def list(
        self, company_id: int, filters: IntentFilter, limit: int, starting_after: int | None
    ) -> list[PaymentIntent]:
        rows = [
            i
            for i in self._matching(company_id, filters)
            if starting_after is None or i.id < starting_after
        ]
        rows.sort(key=lambda i: i.id, reverse=True)
        return rows[:limit]

    def count(self, company_id: int, filters: IntentFilter) -> int:
        return sum(1 for _ in self._matching(company_id, filters))

    def _matching(self, company_id: int, filters: IntentFilter) -> Iterator[PaymentIntent]:
        return (
            i
            for i in self._tx.state.intents.values()
            if i.company_id == company_id and filters.matches(i)
        )


def _of_company(intent: PaymentIntent | None, company_id: int | None) -> PaymentIntent | None:
    if intent is None or (company_id is not None and intent.company_id != company_id):
        return None
    return intent


class _Jobs:
    def __init__(self, tx: _Tx) -> None:
        self._tx = tx

    def schedule(self, job: Job) -> None:
        self._tx.put(self._tx.state.jobs, job.id, job)

    def due(self, now: datetime, limit: int) -> list[Job]:
        due = [
            j
            for j in self._tx.state.jobs.values()
            if j.status is JobStatus.PENDING and j.due_at <= now
        ]
        due.sort(key=lambda j: (j.due_at, j.id))
        return due[:limit]

    def claim(self, job_id: str) -> Job | None:
        job = self._tx.state.jobs.get(job_id)
        return job if job is not None and job.status is JobStatus.PENDING else None

    def finish(self, job_id: str) -> None:
        job = self._tx.state.jobs[job_id]
        self._tx.put(self._tx.state.jobs, job_id, replace(job, status=JobStatus.DONE))

    def finish_for(self, resource_id: str) -> int:
        pending = [
            j
            for j in self._tx.state.jobs.values()
            if j.resource_id == resource_id and j.status is JobStatus.PENDING
        ]
        for job in pending:
            self.finish(job.id)
        return len(pending)


class _ClockOffset:
    def __init__(self, tx: _Tx) -> None:
        self._tx = tx

    def get(self) -> timedelta:
        return self._tx.state.clock_offset.get("sandbox", timedelta(0))

    def advance(self, by: timedelta) -> timedelta:
        if by < timedelta(0):
            raise ValueError("the clock offset only grows")
        offset = self.get() + by
        self._tx.put(self._tx.state.clock_offset, "sandbox", offset)
        return offset


class _MemoryUnitOfWork:
    def __init__(self, tx: _Tx) -> None:
        self.wallets = _Wallets(tx)
        self.ledger = _Ledger(tx)
        self.companies = _Companies(tx)
        self.outbox = _Outbox(tx)
        self.idempotency = _Idempotency(tx)
        self.records = _Records(tx)
        self.jobs = _Jobs(tx)
        self.intents = _Intents(tx)
        self.deliveries = _Deliveries(tx)
        self.clock_offset = _ClockOffset(tx)


class MemoryStorage(Storage):
    """Storage in process memory; transactions are serialized by one lock."""

    offload = False

    def __init__(self) -> None:
        super().__init__()
        self._state = _State()
        self._lock = threading.RLock()

    @contextmanager
    def transaction(self, *, write: bool = True, snapshot: bool = False) -> Iterator[UnitOfWork]:
        # One lock serializes everything, so every transaction is already a snapshot.
        with self._lock:
            tx = _Tx(self._state, write)
            try:
                yield _MemoryUnitOfWork(tx)
            except BaseException:
                tx.rollback()
                raise


def _zeroed(account: Account) -> Account:
    return replace(
        account,
        debits_posted=0,
        credits_posted=0,
        debits_pending_holds=0,
        debits_pending_out=0,
        credits_pending=0,
    )


def _newest_first(
    rows: list[Any], key: Callable[[Any], str], limit: int, starting_after: str | None
) -> list[Any]:
    if starting_after is not None:
        rows = [r for r in rows if key(r) < starting_after]
    rows.sort(key=key, reverse=True)
    return rows[:limit]
