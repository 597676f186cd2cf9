"""Concurrent transfers keep every currency whole, on PostgreSQL and on SQLite.

One company holds 20 wallets (10 USD, 6 EUR, 4 GBP), each funded. Workers share one
:class:`Treasury` and issue random transfers among the wallets: same currency and cross
currency, some for more than the source holds. Each worker completes about half of its
cross-currency transfers at once (so settling runs alongside new transfers); the rest stay
pending. Meanwhile a reader keeps reading every balance and records any available balance
below zero.

How the work really runs in parallel: the workers are asyncio tasks, and every service call
runs its transaction on one of the storage's ``pool_size`` (8) worker threads, each holding its
own connection. A thread waiting on PostgreSQL releases the GIL, so up to eight transactions are
open on the server at once, contending for the same wallet rows and the shared ``fx:*``
liquidity accounts. The PostgreSQL run tags its connections with an ``application_name`` and
samples ``pg_stat_activity`` from the reader to show that transactions did overlap and did wait
on row locks; no extra OS processes are needed. On SQLite writers take the database write lock
in turn (readers run beside them from the WAL), which is what the SQLite run checks.

Every call ends in success or ``InsufficientFunds``; anything else (a deadlock, a serialization
failure, ``ConflictRetryExhausted``) fails the test. Afterwards every pending transfer is settled
by the scheduled jobs and the test checks: the stored transfers are exactly the acknowledged
ones, each completed once (one ``transfer.completed`` event); every wallet's balance equals its
funding minus what it sent plus what it received, so each currency's wallet total is the funded
total moved only by the FX legs; and the ledger invariants hold.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from tests.conftest import postgres_url_or_skip
from treasury_core import (
    CreateWalletRequest,
    EventType,
    InsufficientFunds,
    PageRequest,
    Treasury,
    TreasuryConfig,
    bootstrap,
)
from treasury_core.ledger import EntryCounter, EntryPosition, EntryQuery, WalletEntry
from treasury_core.movements.records import MovementStatus, Transfer
from treasury_core.movements.requests import (
    CreateDepositRequest,
    CreateTransferRequest,
    CreateVirtualAccountRequest,
)
from treasury_core.ports import UnitOfWork
from treasury_core.testing.fakes.clock import FakeClock
from treasury_core.testing.invariants import check_invariants

WALLETS_PER_CURRENCY = {"USD": 10, "EUR": 6, "GBP": 4}
WALLET_COUNT = sum(WALLETS_PER_CURRENCY.values())
SEED = 20261122
#: The sandbox rail settles cross-currency transfers 60 s after they are created.
PAST_FX_SETTLEMENT = 61


@dataclass(frozen=True)
class Load:
    workers: int
    transfers: int  # per worker


#: PostgreSQL is the issue's load; SQLite serializes writers, so a lighter run says as much.
LOADS = {"postgres": Load(workers=8, transfers=500), "sqlite": Load(workers=4, transfers=200)}


@dataclass(frozen=True)
class WalletInfo:
    id: str
    currency: str


@dataclass
class Outcomes:
    """What the callers saw."""

    acknowledged: dict[str, Transfer] = field(default_factory=dict)
    completed_by_worker: set[str] = field(default_factory=set)
    refused: int = 0
    failures: list[str] = field(default_factory=list)
    reads: int = 0
    bad_reads: list[str] = field(default_factory=list)
    # PostgreSQL only: the most of our backends seen inside a transaction / waiting on a lock.
    max_in_transaction: int = 0
    max_lock_waits: int = 0


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def application_name() -> str:
    """Tags this test's PostgreSQL connections in ``pg_stat_activity``."""
    return f"treasury_conc_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def database_url(backend: str, application_name: str, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    url = str(request.getfixturevalue("postgres_url"))  # skips without a server
    return f"{url}&application_name={application_name}"


@pytest.fixture
async def treasury(database_url: str, clock: FakeClock) -> AsyncIterator[Treasury]:
    t = bootstrap(TreasuryConfig(database_url=database_url, pool_size=8), clock=clock)
    try:
        yield t
    finally:
        t.close()


async def _fund(t: Treasury, company_id: int, rng: random.Random) -> dict[str, WalletInfo]:
    """Open and fund the wallets; returns them by id. ``funded`` amounts are read back later."""
    wallets: dict[str, WalletInfo] = {}
    for currency, count in WALLETS_PER_CURRENCY.items():
        for n in range(count):
            wallet = await t.wallets.create(
                company_id, CreateWalletRequest(name=f"{currency} {n}", currency_id=currency)
            )
            wallets[wallet.id] = WalletInfo(wallet.id, currency)
            deposit = await t.deposits.create(
                company_id,
                CreateDepositRequest(
                    wallet_id=wallet.id,
                    from_amount=rng.randint(200_000, 2_000_000),
                    from_currency_id=currency,
                ),
            )
            await t.deposits.complete(None, deposit.id)
            if n == 0:  # one wallet per currency is also topped up through a virtual account
                va = await t.virtual_accounts.create(
                    company_id,
                    CreateVirtualAccountRequest(wallet_id=wallet.id, source_currency=currency),
                )
                await t.virtual_accounts.incoming(None, va.id, rng.randint(100_000, 500_000))
    return wallets


def _pick(rng: random.Random, by_currency: dict[str, list[str]]) -> tuple[str, str]:
    """Two distinct wallets: half the time of one currency, otherwise of two."""
    currencies = list(by_currency)
    if rng.random() < 0.5:
        source, target = rng.sample(by_currency[rng.choice(currencies)], 2)
    else:
        from_currency, to_currency = rng.sample(currencies, 2)
        source, target = (
            rng.choice(by_currency[from_currency]),
            rng.choice(by_currency[to_currency]),
        )
    return source, target


def _amount(rng: random.Random) -> int:
    """Mostly amounts wallets can cover; one in six more than any wallet holds after funding."""
    if rng.random() < 1 / 6:
        return rng.randint(1_000_000, 5_000_000)
    return rng.randint(100, 40_000)


async def _worker(
    t: Treasury,
    company_id: int,
    n: int,
    load: Load,
    by_currency: dict[str, list[str]],
    out: Outcomes,
) -> None:
    rng = random.Random(SEED * 1000 + n)
    for _ in range(load.transfers):
        source, target = _pick(rng, by_currency)
        request = CreateTransferRequest(
            from_wallet_id=source, to_wallet_id=target, from_amount=_amount(rng)
        )
        try:
            transfer = await t.transfers.create(company_id, request)
        except InsufficientFunds:
            out.refused += 1
            continue
        except Exception as exc:
            out.failures.append(f"create {request}: {exc!r}")
            continue
        out.acknowledged[transfer.id] = transfer
        cross = transfer.from_currency_id != transfer.to_currency_id
        want = MovementStatus.PENDING if cross else MovementStatus.COMPLETED
        if transfer.status is not want:
            out.failures.append(f"{transfer.id} came back {transfer.status}, expected {want}")
        if cross and rng.random() < 0.5:
            try:
                done = await t.transfers.complete(company_id, transfer.id)
            except Exception as exc:
                out.failures.append(f"complete {transfer.id}: {exc!r}")
                continue
            if done.status is not MovementStatus.COMPLETED:
                out.failures.append(f"complete {transfer.id} came back {done.status}")
            out.completed_by_worker.add(transfer.id)


async def _reader(
    t: Treasury,
    company_id: int,
    stop: asyncio.Event,
    out: Outcomes,
    pg_conninfo: str | None,
    application_name: str,
) -> None:
    """Read every balance until told to stop; on PostgreSQL also sample the server's activity."""
    sampler = None
    if pg_conninfo is not None:
        import psycopg

        sampler = await psycopg.AsyncConnection.connect(pg_conninfo, autocommit=True)
    try:
        while not stop.is_set():
            page = await t.wallets.balances(company_id, PageRequest(limit=100))
            out.reads += 1
            if len(page.items) != WALLET_COUNT:
                out.bad_reads.append(f"read {out.reads} saw {len(page.items)} wallets")
            out.bad_reads.extend(
                f"read {out.reads}: {b.wallet_id} available {b.available_balance}"
                for b in page.items
                if b.available_balance < 0
            )
            if sampler is not None:
                cursor = await sampler.execute(
                    "SELECT count(*) FILTER (WHERE xact_start IS NOT NULL),"
                    " count(*) FILTER (WHERE wait_event_type = 'Lock')"
                    " FROM pg_stat_activity WHERE application_name = %s",
                    (application_name,),
                )
                row = await cursor.fetchone()
                assert row is not None
                out.max_in_transaction = max(out.max_in_transaction, row[0])
                out.max_lock_waits = max(out.max_lock_waits, row[1])
    finally:
        if sampler is not None:
            await sampler.close()


async def _all_transfers(t: Treasury, company_id: int) -> dict[str, Transfer]:
    found: dict[str, Transfer] = {}
    after: str | None = None
    while True:
        page = await t.transfers.list(company_id, PageRequest(limit=100, starting_after=after))
        found.update((tr.id, tr) for tr in page.items)
        if not page.has_more:
            return found
        after = page.items[-1].id


async def test_concurrent_transfers_conserve_every_currency(
    backend: str, treasury: Treasury, clock: FakeClock, application_name: str
) -> None:
    t = treasury
    load = LOADS[backend]
    rng = random.Random(SEED)
    company_id = (await t.companies.create_company("Concurrency Ltd")).company.id
    wallets = await _fund(t, company_id, rng)
    funded = {
        b.wallet_id: b.balance
        for b in (await t.wallets.balances(company_id, PageRequest(limit=100))).items
    }
    assert len(funded) == WALLET_COUNT
    assert all(b > 0 for b in funded.values())
    by_currency: dict[str, list[str]] = defaultdict(list)
    for w in wallets.values():
        by_currency[w.currency].append(w.id)

    out = Outcomes()
    stop = asyncio.Event()
    # The sampler connects to the test server itself (pg_stat_activity needs no search_path).
    pg_conninfo = postgres_url_or_skip() if backend == "postgres" else None
    reader = asyncio.create_task(_reader(t, company_id, stop, out, pg_conninfo, application_name))
    started = time.perf_counter()
    try:
        await asyncio.gather(
            *(_worker(t, company_id, n, load, by_currency, out) for n in range(load.workers))
        )
    finally:
        stop.set()
        await reader
    elapsed = time.perf_counter() - started

    issued = load.workers * load.transfers
    cross = [tr for tr in out.acknowledged.values() if tr.from_currency_id != tr.to_currency_id]
    print(
        f"\n{backend}: {issued} transfers by {load.workers} workers in {elapsed:.1f}s: "
        f"{len(out.acknowledged)} acknowledged ({len(cross)} cross-currency, "
        f"{len(out.completed_by_worker)} completed at once), {out.refused} refused, "
        f"{len(out.failures)} failed; {out.reads} balance reads"
        + (
            f"; at most {out.max_in_transaction} transactions open and "
            f"{out.max_lock_waits} waiting on locks at once"
            if backend == "postgres"
            else ""
        )
    )
    assert out.failures == [], "\n".join(out.failures[:20])
    assert len(out.acknowledged) + out.refused == issued
    assert out.bad_reads == [], "\n".join(out.bad_reads[:20])
    # The load was the one intended: both outcomes, both kinds, and a reader that kept reading.
    assert out.refused > 0
    assert len(cross) > 0
    assert len(out.acknowledged) - len(cross) > 0
    assert out.reads > 1
    if backend == "postgres":
        assert out.max_in_transaction >= 2, "no two transactions were ever open at once"

    # Settle what is still pending the way production does: the clock passes, the jobs run.
    still_pending = {tr.id for tr in cross} - out.completed_by_worker
    clock.advance(PAST_FX_SETTLEMENT)
    assert await t.jobs.run_all_due() == len(still_pending)

    # The stored transfers are exactly the acknowledged ones, unchanged and all completed.
    stored = await _all_transfers(t, company_id)
    assert stored.keys() == out.acknowledged.keys()
    for transfer_id, transfer in stored.items():
        sent = out.acknowledged[transfer_id]
        assert transfer.status is MovementStatus.COMPLETED, transfer
        assert (
            transfer.from_wallet_id,
            transfer.to_wallet_id,
            transfer.from_amount,
            transfer.to_amount,
        ) == (sent.from_wallet_id, sent.to_wallet_id, sent.from_amount, sent.to_amount)
    ids = list(out.acknowledged)
    for start in range(0, len(ids), 100):
        got = await asyncio.gather(
            *(t.transfers.get(company_id, i) for i in ids[start : start + 100])
        )
        assert [g.id for g in got] == ids[start : start + 100]

    # Each transfer completed exactly once: one completion event each, none for refusals.
    def events(uow: UnitOfWork) -> Counter[str]:
        return Counter(
            e.data["object"]["id"]
            for e in uow.outbox.list(company_id)
            if e.type is EventType.TRANSFER_COMPLETED
        )

    completions = t.storage.run_sync(events, write=False)
    assert completions == Counter(dict.fromkeys(out.acknowledged, 1))

    # Per wallet: funding - sent + received; per currency the same sums, moved only by FX legs.
    expected = dict(funded)
    for tr in stored.values():
        expected[tr.from_wallet_id] -= tr.from_amount
        expected[tr.to_wallet_id] += tr.to_amount
    balances = {
        b.wallet_id: b for b in (await t.wallets.balances(company_id, PageRequest(limit=100))).items
    }
    assert {w: b.balance for w, b in balances.items()} == expected
    for b in balances.values():
        assert (b.available_balance, b.pending_out, b.pending_in, b.pending_holds) == (
            b.balance,
            0,
            0,
            0,
        ), b
    funded_total: Counter[str] = Counter()
    wallet_total: Counter[str] = Counter()
    fx_legs: Counter[str] = Counter()
    for wallet_id, amount in funded.items():
        funded_total[wallets[wallet_id].currency] += amount
        wallet_total[wallets[wallet_id].currency] += balances[wallet_id].balance
    for tr in stored.values():
        fx_legs[tr.from_currency_id] -= tr.from_amount
        fx_legs[tr.to_currency_id] += tr.to_amount
    for currency in WALLETS_PER_CURRENCY:
        assert wallet_total[currency] == funded_total[currency] + fx_legs[currency], currency

    check_invariants(t.storage)
    # Every wallet's history is one unbroken chain in write order: each entry's position was
    # read under the wallet's row lock, so concurrent journals never share or skip a number.
    for wallet_id in wallets:
        _check_history_chain(t, wallet_id, balances[wallet_id].balance)


def _check_history_chain(t: Treasury, wallet_id: str, balance: int) -> None:
    def read(uow: UnitOfWork) -> list[WalletEntry]:
        entries: list[WalletEntry] = []
        before: EntryPosition | None = None
        while True:
            page = uow.ledger.wallet_entries(EntryQuery(wallet_id, limit=200, before=before))
            entries.extend(page)
            if len(page) < 200:
                return entries[::-1]
            before = EntryPosition(page[-1].created_at, page[-1].seq)

    entries = t.storage.run_sync(read, write=False)
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1)), wallet_id
    assert all(a.created_at <= b.created_at for a, b in itertools.pairwise(entries)), wallet_id
    running = 0
    for entry in entries:
        if entry.counter is EntryCounter.BALANCE:
            running += entry.amount
        assert entry.balance_after == running, (wallet_id, entry)
    assert running == balance, wallet_id
