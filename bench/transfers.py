"""Transfers per second through ``treasury.transfers.create`` against the raw driver, interleaved.

Ours is the service as an application calls it: ``await treasury.transfers.create(company,
request)`` on a treasury from :func:`treasury_core.bootstrap` (sandbox clock, ULID ids, sandbox
FX rates) whose storage has ``pool_size=1``: one worker thread keeping one connection, so the
transfers run one after another. Same currency, the transfer is posted and completed; FX
(USD to EUR), it is created pending (two reservations through FX liquidity and a settlement
job), which is what the create call costs.

The raw side (:mod:`bench.raw_transfers`) makes the same rows durable with the driver alone, one
transaction per transfer. Each side has its own database (an SQLite file, or a PostgreSQL
schema) migrated by the same migrations and set up through the service the same way: a company,
a funded USD wallet, a second USD wallet and an EUR wallet, and one FX transfer whose rate and
converted amount the raw side then applies. The four workloads (ours and raw, same currency and
FX) run in turn within every repetition.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench.fixtures import postgres_schema, sqlite_url
from bench.raw_transfers import (
    FxQuote,
    RawPostgresTransfers,
    RawSqliteTransfers,
    RawTransfers,
    TransferWallets,
)
from bench.timing import Elapsed, Samples, Workload, interleave
from treasury_core import CreateWalletRequest, Treasury, TreasuryConfig, bootstrap
from treasury_core.movements.requests import CreateDepositRequest, CreateTransferRequest
from treasury_sqlalchemy.settings import SqlSettings

#: Minor units per transfer (USD 1.00; 0.92 EUR at the sandbox rate).
AMOUNT = 100
#: The source wallet's funding: enough for every transfer of a long run.
FUNDING = 90_000_000_000


async def _setup(t: Treasury) -> tuple[TransferWallets, FxQuote]:
    company_id = (await t.companies.create_company("Bench")).company.id

    async def wallet(name: str, currency: str) -> str:
        request = CreateWalletRequest(name=name, currency_id=currency)
        return (await t.wallets.create(company_id, request)).id

    source, same, fx = (
        await wallet("source", "USD"),
        await wallet("same", "USD"),
        await wallet("fx", "EUR"),
    )
    deposit = await t.deposits.create(
        company_id,
        CreateDepositRequest(wallet_id=source, from_amount=FUNDING, from_currency_id="USD"),
    )
    await t.deposits.complete(None, deposit.id)
    # The raw side converts with the rate and amount the service quoted for this transfer.
    first = await t.transfers.create(
        company_id,
        CreateTransferRequest(from_wallet_id=source, to_wallet_id=fx, from_amount=AMOUNT),
    )
    quote = FxQuote(rate=str(first.exchange_rate_from_to), to_amount=first.to_amount)
    return TransferWallets(company_id, source, same, fx), quote


class ServiceTransfers:
    """A treasury on one connection, driven from its own event loop."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.treasury = bootstrap(
            TreasuryConfig(database_url=url, adapters=[SqlSettings(pool_size=1)])
        )
        self.wallets, self.quote = self.loop.run_until_complete(_setup(self.treasury))

    def workload(self, *, fx: bool) -> Workload:
        """``count`` sequential ``transfers.create`` calls, same currency or FX."""
        w = self.wallets
        request = CreateTransferRequest(
            from_wallet_id=w.source, to_wallet_id=w.fx if fx else w.same, from_amount=AMOUNT
        )
        create = self.treasury.transfers.create

        async def run(count: int) -> Elapsed:
            cpu = time.process_time()
            start = time.perf_counter()
            for _ in range(count):
                await create(w.company_id, request)
            return Elapsed(time.perf_counter() - start, time.process_time() - cpu)

        return lambda count: self.loop.run_until_complete(run(count))

    def close(self) -> None:
        """Close the treasury and the loop."""
        self.treasury.close()
        self.loop.close()


def prepare_raw_database(url: str) -> tuple[TransferWallets, FxQuote]:
    """Migrate and set up the raw side's database through the service, then let it go."""
    service = ServiceTransfers(url)
    try:
        return service.wallets, service.quote
    finally:
        service.close()


def _raw_workload(raw: RawTransfers, *, fx: bool) -> Workload:
    move = raw.fx if fx else raw.same

    def run(count: int) -> Elapsed:
        cpu = time.process_time()
        start = time.perf_counter()
        for _ in range(count):
            move(AMOUNT)
        return Elapsed(time.perf_counter() - start, time.process_time() - cpu)

    return run


#: The workload kinds: same currency and FX.
KINDS = ("same", "fx")


def _workloads(
    ours: ServiceTransfers, raw: RawTransfers, kinds: tuple[str, ...] = KINDS
) -> dict[str, Workload]:
    workloads: dict[str, Workload] = {}
    for kind in kinds:
        fx = kind == "fx"
        workloads[f"ours_{kind}"] = ours.workload(fx=fx)
        workloads[f"raw_{kind}"] = _raw_workload(raw, fx=fx)
    return workloads


def bench_sqlite(count: int, reps: int, kinds: tuple[str, ...] = KINDS) -> dict[str, Samples]:
    """Keys ``ours_same``, ``raw_same``, ``ours_fx``, ``raw_fx`` on SQLite files (only the
    ``kinds`` asked for)."""
    with tempfile.TemporaryDirectory(prefix="treasury-bench-") as tmp, ExitStack() as stack:
        directory = Path(tmp)
        ours = ServiceTransfers(sqlite_url(directory, "ours.db"))
        stack.callback(ours.close)
        wallets, quote = prepare_raw_database(sqlite_url(directory, "raw.db"))
        raw = RawSqliteTransfers(str(directory / "raw.db"), wallets, quote)
        stack.callback(raw.close)
        return interleave(_workloads(ours, raw, kinds), count, reps)


def bench_postgres(count: int, reps: int, kinds: tuple[str, ...] = KINDS) -> dict[str, Samples]:
    """The same keys on PostgreSQL, each side in its own schema."""
    with ExitStack() as stack:
        ours_url = stack.enter_context(postgres_schema())
        raw_url = stack.enter_context(postgres_schema())
        ours = ServiceTransfers(ours_url)
        stack.callback(ours.close)
        wallets, quote = prepare_raw_database(raw_url)
        raw = RawPostgresTransfers(raw_url, wallets, quote)
        stack.callback(raw.close)
        return interleave(_workloads(ours, raw, kinds), count, reps)
