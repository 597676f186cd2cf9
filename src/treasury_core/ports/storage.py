"""The storage port: a unit of work with repositories, and the transaction runner around it.

Rules:
- One business operation is one call of :meth:`Storage.run` with a function of the unit of work.
  The function's writes (state, ledger postings, outbox events, the idempotency record) commit
  together when it returns and roll back together when it raises.
- The function may be run more than once when storage reports a transient conflict (deadlock,
  serialization failure), so it must do nothing but read and write through the unit of work.
- Repositories are synchronous: the function runs on a worker thread (SQL adapters on
  PostgreSQL), inline (memory), or, for SQLite writes that share a group commit, on the calling
  event loop's thread as one callback; an operation costs one thread hop, not one per statement.
  So the function must neither block for long nor wait for anything the event loop would have
  to do.
- Background work (due jobs, event fan-out and deliveries, purges) makes its writes inside
  :func:`background_writes`: a storage may then keep them off the event loop, where a long
  one would hold up requests.
"""

from __future__ import annotations

import abc
import builtins
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Protocol, TypeVar

from treasury_core.companies import ApiKey, Company, MerchantAccount
from treasury_core.dashboard_sessions import DashboardSession
from treasury_core.errors import ConflictRetryExhausted
from treasury_core.idempotency import IdempotencyRecord
from treasury_core.jobs import Job
from treasury_core.ledger import (
    Account,
    EntryQuery,
    Journal,
    LedgerPlan,
    LedgerSteps,
    PendingMovement,
    Posting,
    WalletEntry,
)
from treasury_core.listing import RecordFilter
from treasury_core.movements.records import TreasuryRecord
from treasury_core.notifications.deliveries import Delivery
from treasury_core.notifications.events import Event, EventHead
from treasury_core.notifications.status import DeliveryBacklog, OutboxBacklog
from treasury_core.operators import OperatorKey
from treasury_core.payments.intents import IntentFilter, PaymentIntent
from treasury_core.ports.clock import ClockOffsets
from treasury_core.wallets import Wallet
from treasury_core.worker_threads import WorkerThreads

T = TypeVar("T")
R = TypeVar("R", bound=TreasuryRecord)


_Events = list[Event]  # spelled here: inside the outbox classes, ``list`` is a method
_EventHeads = list[EventHead]

_BACKGROUND: ContextVar[bool] = ContextVar("treasury_background_writes", default=False)


@contextmanager
def background_writes() -> Iterator[None]:
    """Mark the storage calls made inside (in this task or thread) as background work.

    Due jobs, the event fan-out, deliveries and purges run inside it (``treasury serve``'s and
    ``treasury worker``'s background loop does). A storage may run such writes apart from the
    event loop: the SQLite adapter runs request writes on the calling loop, which is fastest for
    short writes, but keeps these on its writer thread, where a long purge does not stop the
    loop from serving.
    """
    token = _BACKGROUND.set(True)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


def in_background() -> bool:
    """Whether the caller is inside :func:`background_writes`."""
    return _BACKGROUND.get()


class WalletRepository(Protocol):
    """Wallet rows."""

    def add(self, wallet: Wallet) -> None:
        """Store a new wallet."""
        ...

    def get(self, company_id: int, wallet_id: str) -> Wallet | None:
        """The wallet of ``company_id`` with this id, or ``None`` (also for another company's)."""
        ...

    def list(
        self,
        company_id: int,
        limit: int,
        starting_after: str | None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> list[Wallet]:
        """Up to ``limit`` wallets, newest first, with ids below ``starting_after``; with
        ``metadata``, only those whose metadata holds every pair of it."""
        ...

    def lock(self, company_id: int, wallet_id: str) -> Wallet | None:
        """As :meth:`get`, and the row stays locked until the transaction ends (a change of
        the wallet's metadata reads, merges and writes it)."""
        ...

    def set_metadata(self, company_id: int, wallet_id: str, metadata: Mapping[str, str]) -> None:
        """Replace the wallet's metadata (the only part of a wallet that changes)."""
        ...


class LedgerRepository(LedgerSteps, Protocol):
    """Ledger accounts, postings and pending movements.

    :meth:`apply` is :func:`treasury_core.ledger.apply_journal` over the repository's own
    :class:`~treasury_core.ledger.LedgerSteps`: the rules of a journal are the core's, the
    steps (lock, add, write) the storage's.
    """

    def open_account(self, account: Account) -> None:
        """Create an account with zero counters (the counters given are ignored)."""
        ...

    def ensure_account(self, account: Account) -> None:
        """Create a system account unless one with its id exists."""
        ...

    def get_account(self, account_id: str) -> Account | None:
        """One account, or ``None``."""
        ...

    def get_accounts(self, account_ids: Sequence[str]) -> dict[str, Account]:
        """The accounts that exist among ``account_ids``."""
        ...

    def wallet_accounts(
        self, company_id: int, limit: int, starting_after: str | None
    ) -> list[Account]:
        """A company's wallet accounts, newest first, ids below ``starting_after``."""
        ...

    def apply(self, journal: Journal, now: datetime) -> LedgerPlan:
        """Plan, lock, check and write ``journal``; raises on refusal, and the transaction
        then keeps nothing of it.

        Adapters implement it as ``apply_journal(self, journal, now)``; with the postings it
        writes each touched wallet's history entries (:func:`treasury_core.ledger.wallet_entries`).
        """
        ...

    def wallet_entries(self, query: EntryQuery) -> list[WalletEntry]:
        """Up to ``query.limit`` of a wallet's history entries, newest first (descending
        ``(created_at, seq)``), older than ``query.before``, within the period and of the type
        asked. Reads one index range, however long the history."""
        ...

    def wallet_entry(self, wallet_id: str, entry_id: str) -> WalletEntry | None:
        """One entry of the wallet's history by its ``txn_…`` id, or ``None``."""
        ...

    def last_wallet_entry(self, wallet_id: str, before: datetime | None) -> WalletEntry | None:
        """The wallet's latest entry created before ``before`` (the latest of all when
        ``None``): the figures a period opens with."""
        ...

    def get_pending(self, pending_id: str) -> PendingMovement | None:
        """A pending movement by id."""
        ...

    def due_pendings(self, now: datetime, limit: int) -> list[PendingMovement]:
        """Pending movements whose deadline is at or before ``now``, oldest deadline first."""
        ...

    def all_accounts(self) -> Iterator[Account]:
        """Every account in id order (for audits and invariant checks)."""
        ...

    def postings(self) -> Iterator[Posting]:
        """Every posting in id order (for audits; the fold does not depend on order)."""
        ...

    def pendings(self) -> Iterator[PendingMovement]:
        """Every pending movement in id order, whatever its status (for audits)."""
        ...

    def postings_page(self, after_id: str | None, limit: int) -> list[Posting]:
        """Up to ``limit`` postings with ids above ``after_id`` (from the first when ``None``),
        in id order.

        Audits page through the postings with it, so no read holds the whole table at once.
        """
        ...

    def count_postings(self) -> int:
        """How many postings there are (an audit's progress total)."""
        ...


class CompanyRepository(Protocol):
    """Companies, merchant accounts and API keys."""

    def add_company(self, name: str, created_at: datetime) -> Company:
        """Store a company; storage assigns its integer id."""
        ...

    def get_company(self, company_id: int) -> Company | None:
        """A company by id."""
        ...

    def add_merchant_account(
        self, company_id: int, name: str, created_at: datetime
    ) -> MerchantAccount:
        """Store a merchant account; storage assigns its integer id."""
        ...

    def merchant_accounts(self, company_id: int) -> list[MerchantAccount]:
        """A company's merchant accounts, oldest first."""
        ...

    def add_api_key(self, key: ApiKey) -> None:
        """Store a key (its digest)."""
        ...

    def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        """The key whose digest is ``key_hash``."""
        ...

    def revoke_api_key(self, key_id: str, revoked_at: datetime) -> bool:
        """Revoke a key; ``False`` when there is no such live key."""
        ...

    def list_companies(self) -> list[Company]:
        """Every company, oldest first (an operator's listing; there is no paging)."""
        ...

    def api_keys(self, company_id: int) -> list[ApiKey]:
        """A company's keys (digests, never secrets), revoked ones too, oldest first."""
        ...


class DashboardSessionRepository(Protocol):
    """Signed-in dashboard browsers (token digests, never tokens)."""

    def add(self, session: DashboardSession) -> None:
        """Store a new, live session."""
        ...

    def by_hash(self, token_hash: str) -> DashboardSession | None:
        """The session whose token digest is ``token_hash``, ended or not."""
        ...

    def touch(self, session_id: str, seen_at: datetime) -> None:
        """Record that a live session was used at ``seen_at`` (an ended one stays ended)."""
        ...

    def end(self, session_id: str, ended_at: datetime) -> bool:
        """End a live session; ``False`` when there is no such live session."""
        ...

    def end_for_key(self, key_id: str, ended_at: datetime) -> int:
        """End every live session opened with ``key_id``; how many were ended."""
        ...


class OperatorKeyRepository(Protocol):
    """The operator's keys (digests, never secrets); bound to no company."""

    def add(self, key: OperatorKey) -> bool:
        """Store a live key; ``False`` (and nothing stored) when a live key has its name."""
        ...

    def by_hash(self, key_hash: str) -> OperatorKey | None:
        """The key whose digest is ``key_hash``, revoked or not."""
        ...

    def list(self) -> builtins.list[OperatorKey]:
        """Every key, revoked ones too, oldest first."""
        ...

    def revoke(self, key_id: str, revoked_at: datetime) -> bool:
        """Revoke a key; ``False`` when there is no such live key."""
        ...


class OutboxRepository(Protocol):
    """Events written with the change they report."""

    def add(self, event: Event) -> None:
        """Write an event to the outbox."""
        ...

    def list(self, company_id: int | None = None) -> list[Event]:
        """Events, oldest first."""
        ...

    def undispatched(self, limit: int) -> _Events:
        """Up to ``limit`` events not yet fanned out into deliveries, oldest first.

        Locks them until the transaction ends; on PostgreSQL rows another transaction holds are
        skipped, so several dispatchers share the work.
        """
        ...

    def undispatched_heads(self, limit: int) -> _EventHeads:
        """:meth:`undispatched` without the payloads: the same events, locked the same way."""
        ...

    def get_many(self, event_ids: Sequence[str]) -> _Events:
        """The events with these ids, oldest first; an id not found is left out."""
        ...

    def mark_dispatched(self, event_ids: Sequence[str], at: datetime) -> None:
        """Record that these events were fanned out."""
        ...

    def purge(self, created_before: datetime) -> int:
        """Delete events created before ``created_before`` that were dispatched and whose
        deliveries are all finished, with those deliveries; returns how many events.

        An event not yet fanned out, or with a delivery still pending, is kept until it is done.
        """
        ...

    def get(self, event_id: str, company_id: int | None) -> Event | None:
        """The event with this id (of ``company_id`` unless ``None``)."""
        ...

    def page(
        self,
        company_id: int,
        *,
        type_: str | None,
        created_gte: datetime | None,
        limit: int,
        starting_after: str | None,
    ) -> _Events:
        """Up to ``limit`` of the company's events, newest first, ids below ``starting_after``."""
        ...

    def backlog(self) -> OutboxBacklog:
        """How many events are not yet fanned out, and the oldest one's creation time.

        Reads only the undispatched events (an index over them), never the whole outbox.
        """
        ...


class DeliveryRepository(Protocol):
    """Deliveries of events to their destinations."""

    def add(self, delivery: Delivery) -> None:
        """Store a new delivery."""
        ...

    def claim_due(
        self, now: datetime, wall_now: datetime, lease_until: datetime, limit: int
    ) -> list[Delivery]:
        """Up to ``limit`` pending deliveries due at ``now`` (business time) that no live lease
        holds (``lease_until`` after ``wall_now``), leased until ``lease_until``.

        On PostgreSQL rows another transaction holds are skipped.
        """
        ...

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
        """As :meth:`claim_due`, fairly: candidates taken round-robin over (company,
        destination), oldest first within each, and at most ``room[destination]`` of one
        destination (``per_destination`` when not listed; none when 0), so neither a busy
        company nor a slow receiver fills a worker's batch.

        A destination with no room is left out of the query, not read and skipped, so its
        backlog never stands in front of the others'. The choice among candidates is
        :func:`treasury_core.notifications.deliveries.fair_pick`.
        """
        ...

    def get(self, delivery_id: str, *, for_update: bool = False) -> Delivery | None:
        """The delivery with this id."""
        ...

    def record_attempts(self, attempted: Sequence[tuple[Delivery, Delivery]]) -> list[Delivery]:
        """Record a claimed batch's attempts: each pair is a delivery as its claim returned it
        and its new version, which replaces the stored one only where that is still as the
        claim left it (pending, under the claim's lease, with as many attempts).

        The claimed deliveries whose stored version changed since (the lease ran out and
        another worker took the delivery over, or a late attempt was noted) are returned,
        unchanged, for the caller to decide one by one; one no longer stored is neither.
        On PostgreSQL the batch's rows are locked, as ``get(for_update=True)`` locks one.
        """
        ...

    def update(self, delivery: Delivery) -> None:
        """Replace a stored delivery with a new version of it."""
        ...

    def for_event(self, event_id: str) -> list[Delivery]:
        """The deliveries of one event, oldest first."""
        ...

    def backlog(self, now: datetime, attempted_since: datetime) -> DeliveryBacklog:
        """The pending deliveries: how many, how many due at ``now`` (business time), the
        creation time of the oldest event among them, how many deliveries had their latest
        attempt at or after ``attempted_since`` (real time), and the destinations failing.

        Failing destinations are grouped by company and endpoint (callbacks, which have no
        endpoint, by company), earliest next attempt first. Reads only pending and recently
        attempted rows (indexes over them), never the whole delivery history.
        """
        ...


class IdempotencyRepository(Protocol):
    """Idempotency records keyed by (company, key)."""

    def get(self, company_id: int, key: str) -> IdempotencyRecord | None:
        """The record, or ``None``."""
        ...

    def insert(self, record: IdempotencyRecord) -> bool:
        """Insert a new record; ``False`` (and nothing written) if the key is already taken."""
        ...

    def replace(self, record: IdempotencyRecord, expected_token: str) -> bool:
        """Overwrite the record if its current token is ``expected_token``; ``False`` otherwise."""
        ...

    def delete(self, company_id: int, key: str, expected_token: str) -> bool:
        """Delete an in-flight claim whose token is ``expected_token`` (never a completed one)."""
        ...

    def purge(self, created_before: datetime) -> int:
        """Delete records created before ``created_before``; returns how many."""
        ...


class RecordRepository(Protocol):
    """Treasury records (deposits, withdrawals, transfers, bank and virtual accounts)."""

    def add(self, record: TreasuryRecord, event: Event | None = None) -> None:
        """Store a new record; refused (raises, writes nothing) when its kind has
        ``unique_lookup_key`` and a record of that kind already has its lookup key.

        With ``event`` (the event announcing the record), also write it to the outbox, as
        :meth:`OutboxRepository.add` would: an adapter may send both rows in one statement,
        and a refused record writes neither.
        """
        ...

    def get(
        self, kind: type[R], record_id: str, company_id: int | None, *, for_update: bool = False
    ) -> R | None:
        """The record of ``kind`` with this id (of ``company_id`` unless ``None``).

        ``for_update`` locks it until the transaction ends, so concurrent changes of one record
        queue behind each other.
        """
        ...

    def update(self, record: TreasuryRecord) -> None:
        """Replace a stored record with a new version of it."""
        ...

    def list(
        self,
        kind: type[R],
        company_id: int,
        limit: int,
        starting_after: str | None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> list[R]:
        """Up to ``limit`` records of ``kind``, newest first, ids below ``starting_after``;
        with ``metadata``, only those whose metadata holds every pair of it."""
        ...

    def find(self, kind: type[R], lookup_key: str) -> R | None:
        """The record of ``kind`` whose ``lookup_key`` is this (a virtual account's number)."""
        ...

    def page(
        self,
        kind: type[R],
        company_id: int,
        filters: RecordFilter,
        limit: int,
        starting_after: str | None,
    ) -> builtins.list[R]:
        """Up to ``limit`` records of ``kind`` passing ``filters`` (:meth:`RecordFilter.matches`
        is the rule, deleted records never pass), newest first, ids below ``starting_after``."""

    def with_status(
        self, kind: type[R], status: str, limit: int, after_id: str | None = None
    ) -> builtins.list[R]:
        """Up to ``limit`` records of ``kind`` in ``status``, of every company, oldest id first,
        ids above ``after_id`` (the bank-file rail's work lists: pending withdrawals to export,
        pending deposits a statement may settle, unmatched statement lines)."""
        ...


class PaymentIntentRepository(Protocol):
    """Payment intents. Storage assigns their integer ids, increasing in creation order."""

    def add(self, intent: PaymentIntent) -> PaymentIntent:
        """Store a new intent (its ``id`` is ignored); returns it with the id storage assigned."""
        ...

    def get(
        self, intent_id: int, company_id: int | None, *, for_update: bool = False
    ) -> PaymentIntent | None:
        """The intent with this id (of ``company_id`` unless ``None``).

        ``for_update`` locks it until the transaction ends, so concurrent changes of one intent
        queue behind each other.
        """
        ...

    def by_lookup_id(
        self, lookup_id: str, company_id: int | None, *, for_update: bool = False
    ) -> PaymentIntent | None:
        """The intent whose ``payment_intent_lookup_id`` is ``lookup_id`` (of ``company_id``
        unless ``None``)."""
        ...

    def update(self, intent: PaymentIntent) -> None:
        """Replace a stored intent with a new version of it."""
        ...

    def list(
        self, company_id: int, filters: IntentFilter, limit: int, starting_after: int | None
    ) -> list[PaymentIntent]:
        """Up to ``limit`` intents passing ``filters``, newest first, ids below
        ``starting_after``."""
        ...

    def count(self, company_id: int, filters: IntentFilter) -> int:
        """How many of the company's intents pass ``filters``."""
        ...


class JobRepository(Protocol):
    """Scheduled jobs."""

    def schedule(self, job: Job) -> None:
        """Store a pending job."""
        ...

    def due(self, now: datetime, limit: int) -> list[Job]:
        """Pending jobs due at or before ``now``, earliest first (not locked)."""
        ...

    def claim(self, job_id: str) -> Job | None:
        """Lock a pending job for this transaction; ``None`` if done or claimed by another."""
        ...

    def finish(self, job_id: str) -> None:
        """Mark a job done."""
        ...

    def finish_for(self, resource_id: str) -> int:
        """Mark every pending job of ``resource_id`` done (its work was done another way)."""
        ...


class UnitOfWork(Protocol):
    """One transaction's view of storage (read-only attributes, so adapters may narrow them)."""

    @property
    def wallets(self) -> WalletRepository:
        """Wallet rows."""
        ...

    @property
    def ledger(self) -> LedgerRepository:
        """The ledger."""
        ...

    @property
    def companies(self) -> CompanyRepository:
        """Tenancy."""
        ...

    @property
    def operator_keys(self) -> OperatorKeyRepository:
        """The operator's keys."""
        ...

    @property
    def dashboard_sessions(self) -> DashboardSessionRepository:
        """Dashboard sessions."""
        ...

    @property
    def outbox(self) -> OutboxRepository:
        """The outbox."""
        ...

    @property
    def idempotency(self) -> IdempotencyRepository:
        """Idempotency records."""
        ...

    @property
    def records(self) -> RecordRepository:
        """Treasury records."""
        ...

    @property
    def jobs(self) -> JobRepository:
        """Scheduled jobs."""
        ...

    @property
    def intents(self) -> PaymentIntentRepository:
        """Payment intents."""
        ...

    @property
    def deliveries(self) -> DeliveryRepository:
        """Deliveries of events."""
        ...


class Storage(abc.ABC):
    """Storage: subclasses provide :meth:`transaction`, this class runs functions in it."""

    #: How many times a function is re-run after a transient conflict before giving up.
    max_attempts: int = 8
    #: Whether :meth:`run` moves the work to a thread (blocking drivers) or runs it inline.
    offload: bool = True

    def __init__(self) -> None:
        self._threads: WorkerThreads | None = None
        self._threads_lock = threading.Lock()

    @abc.abstractmethod
    def transaction(
        self, *, write: bool = True, snapshot: bool = False
    ) -> AbstractContextManager[UnitOfWork]:
        """A unit of work that commits on a clean exit and rolls back on an exception.

        ``snapshot`` (read-only transactions) asks that every read see one consistent state,
        as audits of several tables need; a single-statement read is consistent without it.
        """

    def is_transient(self, error: BaseException) -> bool:
        """Whether ``error`` is a conflict that a re-run can get past (default: never)."""
        return False

    def clock_offsets(self) -> ClockOffsets | None:
        """The sandbox clock's offset kept with this storage's data, or ``None`` when it keeps
        none (a sandbox clock's advances then last as long as the process)."""
        return None

    def migrate(self) -> None:  # noqa: B027 - a no-op default is the point
        """Bring the schema up to date (no-op for stores without one)."""

    def close(self) -> None:
        """Release connections and threads."""
        if self._threads is not None:
            self._threads.shutdown()
            self._threads = None

    def _worker_started(self) -> None:  # noqa: B027 - a no-op default is the point
        """Called on each of :meth:`run`'s worker threads as it starts (adapters keep state)."""

    @property
    def worker_threads(self) -> int:
        """Threads available to :meth:`run` (the connection pool should have as many)."""
        return 8

    def run_sync(
        self, fn: Callable[[UnitOfWork], T], *, write: bool = True, snapshot: bool = False
    ) -> T:
        """Run ``fn`` in a transaction, re-running it on transient conflicts; blocking."""

        def attempt() -> T:
            with self.transaction(write=write, snapshot=snapshot) as uow:
                return fn(uow)

        return self._retrying(attempt)

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """``attempt()`` again after a transient conflict, at most :attr:`max_attempts` times
        in all; :class:`ConflictRetryExhausted` when every one of them conflicted.

        For adapters whose own paths to a transaction keep ``run_sync``'s retry rule."""
        for number in range(1, self.max_attempts + 1):
            try:
                return attempt()
            except Exception as exc:
                if not self.is_transient(exc) or number == self.max_attempts:
                    if self.is_transient(exc):
                        raise ConflictRetryExhausted(
                            "The database stayed busy; retry the request"
                        ) from exc
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def run(
        self, fn: Callable[[UnitOfWork], T], *, write: bool = True, snapshot: bool = False
    ) -> T:
        """Run ``fn`` in a transaction, on a worker thread unless :attr:`offload` is false
        (adapters may choose otherwise: see the module's rules)."""
        if not self.offload:
            return self.run_sync(fn, write=write, snapshot=snapshot)
        if self._threads is None:
            with self._threads_lock:
                if self._threads is None:
                    self._threads = WorkerThreads(
                        self.worker_threads, "treasury-storage", self._worker_started
                    )
        return await self._threads.run(lambda: self.run_sync(fn, write=write, snapshot=snapshot))
