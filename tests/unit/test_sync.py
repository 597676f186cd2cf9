"""BlockingTreasury: synchronous callers, one hosted event loop, typed errors in their threads.

Runs on a real SQLite file: the group-commit writer answers each caller on the loop it came
from, which is the binding the hosted loop exists for.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest

from treasury_core import (
    AdapterNotFound,
    BlockingTreasury,
    CreateDepositRequest,
    CreateTransferRequest,
    CreateWalletRequest,
    InsufficientFunds,
    NotFound,
    Transfer,
    TreasuryConfig,
    UnknownCurrency,
    Wallet,
    bootstrap,
)
from treasury_core.errors import ErrorKind
from treasury_core.interface.errors import error_body


@pytest.fixture
def config(tmp_path: Path) -> TreasuryConfig:
    return TreasuryConfig(database_url=f"sqlite:///{tmp_path / 'sync.db'}", pool_size=4)


@pytest.fixture
def blocking(config: TreasuryConfig) -> Iterator[BlockingTreasury]:
    with BlockingTreasury(partial(bootstrap, config)) as blocking:
        yield blocking


def _funded_wallets(blocking: BlockingTreasury, amount: int) -> tuple[int, Wallet, Wallet]:
    company_id: int = blocking.companies.create_company("Acme").company.id
    source = blocking.wallets.create(company_id, CreateWalletRequest(name="A", currency_id="USD"))
    target = blocking.wallets.create(company_id, CreateWalletRequest(name="B", currency_id="USD"))
    deposit = blocking.deposits.create(
        company_id,
        CreateDepositRequest(wallet_id=source.id, from_amount=amount, from_currency_id="USD"),
    )
    blocking.deposits.complete(company_id, deposit.id)
    return company_id, source, target


def test_many_threads_at_once_move_exactly_the_money_there_is(
    blocking: BlockingTreasury,
) -> None:
    company_id, source, target = _funded_wallets(blocking, 10_000)
    threads, per_thread, amount = 8, 10, 200  # 16,000 asked for, 10,000 there
    start = threading.Barrier(threads)

    def worker(_: int) -> list[Transfer | InsufficientFunds]:
        start.wait()  # every thread calls at the same moment
        outcomes: list[Transfer | InsufficientFunds] = []
        for _ in range(per_thread):
            try:
                outcomes.append(
                    blocking.transfers.create(
                        company_id,
                        CreateTransferRequest(
                            from_wallet_id=source.id, to_wallet_id=target.id, from_amount=amount
                        ),
                    )
                )
            except InsufficientFunds as refused:  # raised in this thread, with its own type
                outcomes.append(refused)
        return outcomes

    with ThreadPoolExecutor(max_workers=threads) as pool:
        outcomes = [o for result in pool.map(worker, range(threads)) for o in result]

    done = [o for o in outcomes if isinstance(o, Transfer)]
    refused = [o for o in outcomes if isinstance(o, InsufficientFunds)]
    assert len(done) == 10_000 // amount
    assert len(refused) == threads * per_thread - len(done)
    assert all(
        r.kind is ErrorKind.INVALID_REQUEST and r.code == "insufficient_funds" for r in refused
    )
    assert len({t.id for t in done}) == len(done)
    assert blocking.wallets.balance(company_id, source.id).balance == 0
    assert blocking.wallets.balance(company_id, target.id).balance == 10_000


def test_errors_reach_the_calling_thread_with_their_types(blocking: BlockingTreasury) -> None:
    company_id = blocking.companies.create_company("Acme").company.id
    with pytest.raises(NotFound) as missing:
        blocking.wallets.get(company_id, "wal_doesnotexist")
    assert missing.value.param == "wallet_id"
    with pytest.raises(UnknownCurrency) as unknown:
        blocking.wallets.create(company_id, CreateWalletRequest(name="X", currency_id="XXX"))
    assert error_body(unknown.value)["error"]["code"] == "unknown_currency"
    # The typed route reports the same errors.
    treasury = blocking.treasury
    with pytest.raises(NotFound):
        blocking.call(treasury.wallets.get, company_id, "wal_doesnotexist")
    with pytest.raises(NotFound):
        blocking.run(treasury.wallets.get(company_id, "wal_doesnotexist"))


def test_work_runs_on_the_hosted_loop_not_the_callers_thread(blocking: BlockingTreasury) -> None:
    async def where() -> tuple[threading.Thread, asyncio.AbstractEventLoop]:
        return threading.current_thread(), asyncio.get_running_loop()

    thread, loop = blocking.call(where)
    assert thread is not threading.current_thread()
    assert thread.daemon
    assert loop is blocking.loop
    # Sync methods of the services run there too, and plain data comes back as it is.
    wallet = blocking.wallets.create(
        blocking.companies.create_company("Acme").company.id,
        CreateWalletRequest(name="A", currency_id="EUR"),
    )
    assert wallet.currency == "EUR"
    assert {f.currency for f in blocking.bank_accounts.formats()} >= {"EUR"}
    assert blocking.config.sandbox is True
    assert blocking.sandbox.enabled is True


def test_a_call_from_the_hosted_loop_itself_is_refused_not_deadlocked(
    blocking: BlockingTreasury,
) -> None:
    async def reenter() -> object:
        return blocking.companies.create_company("Acme")

    with pytest.raises(RuntimeError, match="its own event loop"):
        blocking.call(reenter)


def test_a_timeout_stops_the_wait_but_not_the_work(config: TreasuryConfig) -> None:
    finished = threading.Event()
    with BlockingTreasury(partial(bootstrap, config), timeout=0.05) as blocking:
        release = asyncio.Event()

        async def slow() -> None:
            await release.wait()
            finished.set()

        with pytest.raises(TimeoutError):
            blocking.call(slow)
        assert not finished.is_set()
        blocking.loop.call_soon_threadsafe(release.set)
        assert finished.wait(timeout=10)


def test_close_lets_calls_in_flight_finish_then_refuses_new_ones(config: TreasuryConfig) -> None:
    blocking = BlockingTreasury(partial(bootstrap, config))
    started = threading.Event()
    release = asyncio.Event()

    async def in_flight() -> str:
        started.set()
        await release.wait()
        return "finished"

    with ThreadPoolExecutor(max_workers=2) as pool:
        caller = pool.submit(blocking.call, in_flight)
        assert started.wait(timeout=10)
        closer = pool.submit(blocking.close)
        # close() is waiting for the call: the caller has no answer yet, and new calls are
        # refused from the moment close() began.
        deadline = time.monotonic() + 10
        while not blocking.closed:  # close() marks itself before it starts waiting
            assert time.monotonic() < deadline
        with pytest.raises(RuntimeError, match="closed"):
            blocking.companies.create_company("Late")
        assert not caller.done()
        assert not closer.done()
        blocking.loop.call_soon_threadsafe(release.set)
        assert caller.result(timeout=10) == "finished"
        closer.result(timeout=10)
    assert blocking.closed
    assert blocking.loop.is_closed()
    blocking.close()  # idempotent


def test_close_cancels_work_left_on_the_loop_before_closing_the_treasury(
    config: TreasuryConfig,
) -> None:
    blocking = BlockingTreasury(partial(bootstrap, config))
    company_id = blocking.companies.create_company("Acme").company.id
    seen_open: list[bool] = []

    async def background() -> None:  # a task its owner forgot to stop
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            # Cancelled while the storage is still open: it can still be read.
            companies = blocking.treasury.companies
            seen_open.append(bool(await companies.merchant_accounts(company_id)))
            raise

    task = asyncio.run_coroutine_threadsafe(background(), blocking.loop)
    blocking.close()
    assert task.cancelled()
    assert seen_open == [True]


def test_a_close_that_failed_half_way_can_be_called_again(config: TreasuryConfig) -> None:
    treasury = bootstrap(config)
    closes = 0
    close = treasury.close

    def close_fails_once() -> None:
        nonlocal closes
        closes += 1
        if closes == 1:
            raise OSError("disk went away")
        close()

    treasury.close = close_fails_once  # type: ignore[method-assign]
    blocking = BlockingTreasury(treasury)
    with pytest.raises(OSError, match="disk went away"):
        blocking.close()
    assert blocking.closed  # refusing new calls already
    blocking.close()  # the loop is gone: nothing left to do, and no hang
    assert blocking.loop.is_closed()
    close()


def test_close_closes_the_treasury_it_owns_and_only_that(config: TreasuryConfig) -> None:
    before = set(threading.enumerate())
    owned = BlockingTreasury(partial(bootstrap, config))
    owned.companies.create_company("Acme")  # a write: the storage starts its writer thread
    started = [t for t in set(threading.enumerate()) - before if t.name.startswith("treasury")]
    assert len(started) >= 2  # the hosted loop and the storage's writer, at least
    owned.close()
    assert [t.name for t in started if t.is_alive()] == []

    treasury = bootstrap(config)
    try:
        adopted = BlockingTreasury(treasury, close_treasury=False)
        company = adopted.companies.create_company("Globex").company
        adopted.close()
        # Still open: its owner can use it on a loop of its own.
        found = asyncio.run(treasury.companies.merchant_accounts(company.id))
        assert [a.company_id for a in found] == [company.id]
    finally:
        treasury.close()


def test_a_failing_bootstrap_raises_its_error_and_leaves_no_thread(tmp_path: Path) -> None:
    config = TreasuryConfig(database_url=f"sqlite:///{tmp_path / 'x.db'}", storage="nope")
    with pytest.raises(AdapterNotFound):
        BlockingTreasury(partial(bootstrap, config), thread_name="treasury-loop-failing")
    assert not any(t.name == "treasury-loop-failing" for t in threading.enumerate())
