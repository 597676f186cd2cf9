"""The SQL storage's row locks, seen from a second PostgreSQL connection.

A settlement reads its movement ``FOR UPDATE`` and then its ledger pendings ``FOR UPDATE``
before it writes anything; an intent's locking read does the same for the intent. Each test
pauses the real code path just after one of those reads and asks, from a raw psycopg
connection, for the same row with ``FOR UPDATE NOWAIT``: that must fail with
``LockNotAvailable`` while the transaction is open, and succeed once it has ended. Without the
lock the paused transaction holds nothing (it has only read), and the probe gets the row.

The races at the end settle one movement from two transactions that start together (a barrier):
one completes it, the other is refused, and the money moves once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg import errors
from sqlalchemy import event

from tests.conftest import sandbox_bank_account
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.errors import InvalidRequestError
from treasury_core.movements.records import Deposit, MovementStatus, Withdrawal
from treasury_core.movements.requests import (
    CreateDepositRequest,
    CreateWithdrawalRequest,
)
from treasury_core.notifications.events import EventType
from treasury_core.ports import UnitOfWork
from treasury_core.services.movements.settlement import settle
from treasury_core.testing import check_invariants
from treasury_core.testing.contracts.fixtures import make_intent
from treasury_core.testing.fakes.clock import FakeClock
from treasury_core.wallets import CreateWalletRequest
from treasury_sqlalchemy.storage import SqlStorage

pytestmark = pytest.mark.postgres

T = TypeVar("T")
#: Seconds a step may take before the test names the step that never happened: a lock wait
#: that hangs fails the test instead of the suite.
PATIENCE = 30
FUNDS = 100_000


@dataclass
class Setup:
    treasury: Treasury
    storage: SqlStorage
    url: str
    company: int
    wallet: str
    bank_account: str

    async def deposit(self, amount: int = 1_000) -> Deposit:
        return await self.treasury.deposits.create(
            self.company,
            CreateDepositRequest(wallet_id=self.wallet, from_amount=amount, from_currency_id="USD"),
        )

    async def withdrawal(self, amount: int = 1_000) -> Withdrawal:
        return await self.treasury.withdrawals.create(
            self.company,
            CreateWithdrawalRequest(
                wallet_id=self.wallet,
                from_amount=amount,
                from_currency_id="USD",
                bank_account_id=self.bank_account,
            ),
        )

    async def balance(self) -> int:
        return (await self.treasury.wallets.balance(self.company, self.wallet)).balance

    def events(self, kind: EventType, record_id: str) -> int:
        listed = self.storage.run_sync(lambda uow: uow.outbox.list(self.company), write=False)
        return sum(1 for e in listed if e.type is kind and e.data["object"]["id"] == record_id)


@pytest.fixture
async def setup(postgres_url: str, clock: FakeClock) -> AsyncIterator[Setup]:
    t = bootstrap(TreasuryConfig(database_url=postgres_url, pool_size=4), clock=clock)
    try:
        assert isinstance(t.storage, SqlStorage)
        company = (await t.companies.create_company("Locks")).company.id
        wallet = await t.wallets.create(company, CreateWalletRequest(name="W", currency_id="USD"))
        bank = await t.bank_accounts.register(company, sandbox_bank_account("Locks Inc"))
        s = Setup(t, t.storage, postgres_url, company, wallet.id, bank.id)
        funding = await s.deposit(FUNDS)
        await t.deposits.complete(None, funding.id)
        yield s
    finally:
        t.close()


class Pause:
    """A point one transaction stops at, holding what it has locked, until the test says go."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.go = threading.Event()
        #: Set on the thread whose transaction is to stop (the SQL hook sees every thread).
        self.here = threading.local()

    def stop(self) -> None:
        self.reached.set()
        assert self.go.wait(PATIENCE), "the test never let the paused transaction go on"

    async def wait_reached(self, what: str) -> None:
        reached = await asyncio.to_thread(self.reached.wait, PATIENCE)
        assert reached, f"the transaction never reached {what}"


class _PausingRecords:
    """The transaction's records; a locking read returns, then the transaction pauses."""

    def __init__(self, inner: Any, pause: Pause) -> None:
        self._inner, self._pause = inner, pause

    def get(self, kind: Any, record_id: str, company_id: int | None, **kw: Any) -> Any:
        found = self._inner.get(kind, record_id, company_id, **kw)
        if kw.get("for_update"):
            self._pause.stop()
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _PausingUnitOfWork:
    """The unit of work the settlement gets: the real one, its records read through
    :class:`_PausingRecords`."""

    def __init__(self, inner: UnitOfWork, pause: Pause) -> None:
        self._inner, self._pause = inner, pause

    @property
    def records(self) -> _PausingRecords:
        return _PausingRecords(self._inner.records, self._pause)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextmanager
def pause_after_pending_read(storage: SqlStorage, pause: Pause) -> Iterator[None]:
    """Pause the marked thread's transaction right after it reads ledger pendings (before the
    movement writes anything)."""

    def after(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        head = statement.lstrip().upper()
        mine = getattr(pause.here, "on", False)
        if mine and head.startswith("SELECT") and "FROM LEDGER_PENDINGS" in head:
            pause.stop()

    event.listen(storage.engine, "after_cursor_execute", after)
    try:
        yield
    finally:
        event.remove(storage.engine, "after_cursor_execute", after)


def locked_elsewhere(url: str, table: str, ids: Sequence[object]) -> bool:
    """Whether another transaction holds a row lock on any of ``ids`` in ``table``: a second
    connection's ``SELECT … FOR UPDATE NOWAIT`` (which then rolls back)."""
    with psycopg.connect(url) as conn:
        try:
            rows = conn.execute(
                f"SELECT id FROM {table} WHERE id = ANY(%s) FOR UPDATE NOWAIT", (list(ids),)
            ).fetchall()
        except errors.LockNotAvailable:
            return True
        finally:
            conn.rollback()
    assert len(rows) == len(ids), f"the probe found {rows} of {ids} in {table}"
    return False


async def locked_while_paused(
    s: Setup, pause: Pause, work: Callable[[UnitOfWork], T], table: str, ids: Sequence[object]
) -> T:
    """Run ``work`` in a transaction; once it reaches ``pause``, ``ids`` of ``table`` must be
    locked for any other connection, and free again after the transaction ends."""
    running = asyncio.create_task(asyncio.to_thread(s.storage.run_sync, work))
    try:
        await pause.wait_reached(f"its locking read of {table} {list(ids)}")
        assert locked_elsewhere(s.url, table, ids), (
            f"{table} {list(ids)} were read for update but another connection could lock them"
        )
    finally:
        pause.go.set()
    done = await running
    assert not locked_elsewhere(s.url, table, ids)
    return done


def settling(s: Setup, kind: type[Deposit | Withdrawal], record_id: str) -> Callable[[Any], Any]:
    """The settlement service's own transaction function for completing ``record_id``."""
    return settle(s.treasury.adapters, kind, record_id, param="id")


KINDS = pytest.mark.parametrize("kind", [Deposit, Withdrawal], ids=["deposit", "withdrawal"])


async def new_movement(s: Setup, kind: type[Deposit | Withdrawal], amount: int) -> Any:
    return await (s.deposit(amount) if kind is Deposit else s.withdrawal(amount))


@KINDS
async def test_settlement_locks_its_movement_until_it_commits(
    setup: Setup, kind: type[Deposit | Withdrawal]
) -> None:
    record = await new_movement(setup, kind, 1_000)
    pause = Pause()
    work = settling(setup, kind, record.id)
    done = await locked_while_paused(
        setup,
        pause,
        lambda uow: work(_PausingUnitOfWork(uow, pause)),
        "treasury_records",
        [record.id],
    )
    assert done.status is MovementStatus.COMPLETED


@KINDS
async def test_settlement_locks_its_pendings_until_it_commits(
    setup: Setup, kind: type[Deposit | Withdrawal]
) -> None:
    record = await new_movement(setup, kind, 1_000)
    pause = Pause()
    work = settling(setup, kind, record.id)

    def marked(uow: UnitOfWork) -> Any:
        pause.here.on = True
        try:
            return work(uow)
        finally:
            pause.here.on = False

    with pause_after_pending_read(setup.storage, pause):
        done = await locked_while_paused(
            setup, pause, marked, "ledger_pendings", record.pending_ids
        )
    assert done.status is MovementStatus.COMPLETED


@pytest.mark.parametrize("read", ["get", "by_lookup_id"])
async def test_an_intent_read_for_update_is_locked_until_commit(setup: Setup, read: str) -> None:
    storage = setup.storage
    intent = storage.run_sync(lambda uow: uow.intents.add(make_intent(setup.company, "pi_lock")))
    pause = Pause()

    def hold(uow: UnitOfWork) -> None:
        if read == "get":
            found = uow.intents.get(intent.id, setup.company, for_update=True)
        else:
            found = uow.intents.by_lookup_id("pi_lock", setup.company, for_update=True)
        assert found is not None and found.id == intent.id
        pause.stop()

    await locked_while_paused(setup, pause, hold, "payment_intents", [intent.id])


ROUNDS = 5


async def race_once(s: Setup, kind: type[Deposit | Withdrawal], amount: int) -> None:
    """Two transactions complete one new movement, starting together: the money moves once."""
    record = await new_movement(s, kind, amount)
    before = await s.balance()
    start = threading.Barrier(2, timeout=PATIENCE)
    work = settling(s, kind, record.id)

    def racer(uow: UnitOfWork) -> Any:
        start.wait()
        return work(uow)

    outcomes = await asyncio.gather(
        asyncio.to_thread(s.storage.run_sync, racer),
        asyncio.to_thread(s.storage.run_sync, racer),
        return_exceptions=True,
    )
    settled = [o for o in outcomes if isinstance(o, kind)]
    refused = [o for o in outcomes if isinstance(o, InvalidRequestError)]
    assert len(settled) == 1 and len(refused) == 1, outcomes
    # The loser waited on the movement's lock and then saw it completed; without that lock it
    # gets as far as the ledger, which refuses it for another reason.
    assert refused[0].code == "movement_not_pending"
    assert settled[0].status is MovementStatus.COMPLETED
    assert await s.balance() == before + (amount if kind is Deposit else -amount)
    completed = EventType.DEPOSIT_COMPLETED if kind is Deposit else EventType.WITHDRAWAL_COMPLETED
    assert s.events(completed, record.id) == 1


@KINDS
async def test_two_settlements_of_one_movement_move_the_money_once(
    setup: Setup, kind: type[Deposit | Withdrawal]
) -> None:
    for _ in range(ROUNDS):
        await race_once(setup, kind, 700)
    check_invariants(setup.storage)
