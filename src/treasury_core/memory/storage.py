"""An in-memory storage adapter: the reference implementation of the storage port.

It keeps state in dicts of immutable values under one lock. A transaction records an undo entry
for every write and replays them backwards on rollback, so a refused operation leaves nothing
behind, exactly as on a database. It is fast, dependency-free, and what the contract tests hold
the SQL adapter to.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime

from treasury_core.companies import ApiKey, Company, MerchantAccount
from treasury_core.dashboard_sessions import DashboardSession
from treasury_core.idempotency import IdempotencyRecord, IdempotencyState
from treasury_core.jobs import Job, JobStatus
from treasury_core.ledger import (
    Account,
    AccountKind,
    EntryPosition,
    EntryQuery,
    Journal,
    LedgerPlan,
    PendingMovement,
    PendingStatus,
    Posting,
    PostingExists,
    WalletEntry,
    apply_journal,
)
from treasury_core.listing import RecordFilter
from treasury_core.memory import history as memory_history
from treasury_core.memory.clock import MemoryClockOffsets
from treasury_core.memory.outbox import (
    MemoryDeliveries,
    MemoryOutbox,
)
from treasury_core.memory.state import (
    MemoryState,
    MemoryTransaction,
    newest_first,
)
from treasury_core.metadata import metadata_matches
from treasury_core.movements.records import TreasuryRecord
from treasury_core.notifications.events import Event
from treasury_core.operators import OperatorKey
from treasury_core.payments.intents import IntentFilter, PaymentIntent
from treasury_core.ports.storage import R, Storage, UnitOfWork
from treasury_core.wallets import Wallet


class _Wallets:
    def __init__(self, tx: MemoryTransaction) -> None:
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
        return newest_first(rows, lambda w: w.id, limit, starting_after)

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
    def __init__(self, tx: MemoryTransaction) -> None:
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
        return newest_first(rows, lambda a: a.id, limit, starting_after)

    def apply(self, journal: Journal, now: datetime) -> LedgerPlan:
        return apply_journal(self, journal, now)

    # The primitive steps of apply_journal (treasury_core.ledger.apply.LedgerSteps).

    def lock_pendings(self, pending_ids: Sequence[str]) -> dict[str, PendingMovement]:
        # One writer at a time already: reading is locking.
        pendings = self._tx.state.pendings
        return {i: pendings[i] for i in pending_ids if i in pendings}

    def add_deltas(self, plan: LedgerPlan) -> tuple[dict[str, Account], tuple[()]]:
        accounts = self._tx.state.accounts
        after: dict[str, Account] = {}
        for account_id in plan.account_ids:
            account = accounts.get(account_id)
            if account is not None:
                after[account_id] = account.with_delta(plan.deltas[account_id])
                self._tx.put(accounts, account_id, after[account_id])
        return after, ()

    def write_postings(
        self, plan: LedgerPlan, wallet_ids: Sequence[str]
    ) -> dict[str, EntryPosition | None]:
        state = self._tx.state
        if any(p.id in state.posting_ids for p in plan.postings):
            raise PostingExists(plan.journal.id)
        for posting in plan.postings:
            self._tx.append(state.postings, posting)
            self._tx.put(state.posting_ids, posting.id, True)
        return memory_history.heads(state.histories, wallet_ids)

    def write_pendings(self, plan: LedgerPlan) -> None:
        for pending in (*plan.new_pendings, *plan.resolved_pendings):
            self._tx.put(self._tx.state.pendings, pending.id, pending)

    def write_entries(self, entries: Sequence[WalletEntry]) -> None:
        memory_history.append_entries(self._tx.state.histories, entries, self._tx.append)

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
    def __init__(self, tx: MemoryTransaction) -> None:
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


class _OperatorKeys:
    def __init__(self, tx: MemoryTransaction) -> None:
        self._tx = tx

    def add(self, key: OperatorKey) -> bool:
        keys = self._tx.state.operator_keys.values()
        if any(k.key_hash == key.key_hash for k in keys):
            raise ValueError("duplicate operator key")
        if any(k.name == key.name and k.revoked_at is None for k in keys):
            return False
        self._tx.put(self._tx.state.operator_keys, key.id, key)
        return True

    def by_hash(self, key_hash: str) -> OperatorKey | None:
        keys = self._tx.state.operator_keys.values()
        return next((k for k in keys if k.key_hash == key_hash), None)

    def list(self) -> list[OperatorKey]:
        return sorted(self._tx.state.operator_keys.values(), key=lambda k: (k.created_at, k.id))

    def revoke(self, key_id: str, revoked_at: datetime) -> bool:
        key = self._tx.state.operator_keys.get(key_id)
        if key is None or key.revoked_at is not None:
            return False
        revoked = key.model_copy(update={"revoked_at": revoked_at})
        self._tx.put(self._tx.state.operator_keys, key_id, revoked)
        return True


class _DashboardSessions:
    def __init__(self, tx: MemoryTransaction) -> None:
        self._tx = tx

    def add(self, session: DashboardSession) -> None:
        sessions = self._tx.state.dashboard_sessions
        if session.id in sessions or any(
            s.token_hash == session.token_hash for s in sessions.values()
        ):
            raise ValueError("duplicate dashboard session")
        self._tx.put(sessions, session.id, session)

    def by_hash(self, token_hash: str) -> DashboardSession | None:
        sessions = self._tx.state.dashboard_sessions.values()
        return next((s for s in sessions if s.token_hash == token_hash), None)

    def touch(self, session_id: str, seen_at: datetime) -> None:
        found = self._tx.state.dashboard_sessions.get(session_id)
        if found is not None and found.ended_at is None:
            touched = found.model_copy(update={"last_seen_at": seen_at})
            self._tx.put(self._tx.state.dashboard_sessions, session_id, touched)

    def end(self, session_id: str, ended_at: datetime) -> bool:
        found = self._tx.state.dashboard_sessions.get(session_id)
        if found is None or found.ended_at is not None:
            return False
        ended = found.model_copy(update={"ended_at": ended_at})
        self._tx.put(self._tx.state.dashboard_sessions, session_id, ended)
        return True

    def end_for_key(self, key_id: str, ended_at: datetime) -> int:
        live = [
            s.id
            for s in self._tx.state.dashboard_sessions.values()
            if s.key_id == key_id and s.ended_at is None
        ]
        return sum(self.end(session_id, ended_at) for session_id in live)


class _Idempotency:
    def __init__(self, tx: MemoryTransaction) -> None:
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
    def __init__(self, tx: MemoryTransaction) -> None:
        self._tx = tx

    def add(self, record: TreasuryRecord, event: Event | None = None) -> None:
        if record.id in self._tx.state.records:
            raise ValueError(f"duplicate record id {record.id}")
        if (
            record.unique_lookup_key
            and self.find(type(record), record.lookup_key or "") is not None
        ):
            raise ValueError(f"duplicate {record.prefix} lookup key {record.lookup_key}")
        self._tx.put(self._tx.state.records, record.id, record)
        if event is not None:
            MemoryOutbox(self._tx).add(event)

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
        return newest_first(rows, lambda r: r.id, limit, starting_after)

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
        return newest_first(rows, lambda r: r.id, limit, starting_after)

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
    def __init__(self, tx: MemoryTransaction) -> None:
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
    def __init__(self, tx: MemoryTransaction) -> None:
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


class _MemoryUnitOfWork:
    def __init__(self, tx: MemoryTransaction) -> None:
        self.wallets = _Wallets(tx)
        self.ledger = _Ledger(tx)
        self.companies = _Companies(tx)
        self.operator_keys = _OperatorKeys(tx)
        self.dashboard_sessions = _DashboardSessions(tx)
        self.outbox = MemoryOutbox(tx)
        self.idempotency = _Idempotency(tx)
        self.records = _Records(tx)
        self.jobs = _Jobs(tx)
        self.intents = _Intents(tx)
        self.deliveries = MemoryDeliveries(tx)


class MemoryStorage(Storage):
    """Storage in process memory; transactions are serialized by one lock."""

    offload = False

    def __init__(self) -> None:
        super().__init__()
        self._state = MemoryState()
        self._lock = threading.RLock()
        self._clock_offsets = MemoryClockOffsets()

    def clock_offsets(self) -> MemoryClockOffsets:
        """The sandbox clock's offset, kept as long as this storage."""
        return self._clock_offsets

    @contextmanager
    def transaction(self, *, write: bool = True, snapshot: bool = False) -> Iterator[UnitOfWork]:
        # One lock serializes everything, so every transaction is already a snapshot.
        with self._lock:
            tx = MemoryTransaction(self._state, write)
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
