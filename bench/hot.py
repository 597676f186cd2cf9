"""Hot accounts: how money movements scale from 1 to 8 concurrent workers on PostgreSQL.

Every deposit, withdrawal and card payment in a currency moves money through the outside world's
account ``world:{CUR}``, every cross-currency transfer through ``fx:{CUR}``, and every card
payment of a company through its ``settlement:{company}:{CUR}``. If those accounts are single
rows updated under a lock held to commit, concurrent workers queue behind the row, however many
of them there are. This module measures it through the Python services (``bootstrap`` with
``pool_size=8``, asyncio tasks on one loop, as :mod:`bench.ledger`'s "ours_8").

Setup (untimed): one PostgreSQL schema, 8 companies, each with a funded USD wallet, a second USD
wallet and an EUR wallet. Timed, per repetition, for 1 and for 8 workers (worker ``w`` acts for
company ``w``; with 1 worker the operations go round the 8 companies):

- ``transfer``: same-currency transfers between the company's own two USD wallets: the rows of
  two workers never meet, so its gain from 1 to 8 workers is what the machine gives; the
  reference for the others;
- ``deposit``: a deposit created and completed (two service calls, two transactions) into the
  second wallet, through ``world:USD``;
- ``card``: an automatic-capture card payment (create the intent, pay it with the sandbox card),
  through ``world:USD`` and the company's settlement account;
- ``fx``: a USD to EUR transfer (created pending, through ``fx:USD`` and ``fx:EUR``);
- ``card_one`` (8 workers only): card payments of company 0 alone, all through one settlement
  account.

After the setup and again after the timed runs, ``check_invariants`` must pass on the whole
ledger (shared accounts summed from their stripes), or the run raises.

Figures: operations per second (median over repetitions), each operation's gain (8-worker rate
over 1-worker rate) against the transfers' gain (target >= 0.9), and ``card_one`` against 8
companies' ``card`` (target >= 0.8), each ratio the median of the per-repetition ratios.
``python -m bench hot`` or ``python -m bench.hot [--count N] [--reps R]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass

from bench.fixtures import POSTGRES_URL, postgres_available, postgres_schema
from bench.report import Row, rate, render, verdict
from bench.timing import Elapsed, Samples
from treasury_core import CreateWalletRequest, TreasuryConfig, bootstrap
from treasury_core.ledger.invariants import check_invariants
from treasury_core.movements.requests import CreateDepositRequest, CreateTransferRequest
from treasury_core.payments.intents import PaymentType
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports.card_provider import CardData
from treasury_sqlalchemy.settings import SqlSettings

#: Companies, and the concurrent workers of the 8-worker runs.
COMPANIES = WORKERS = 8
#: Operations per run and repetitions by default.
COUNT = 160
REPS = 5
#: Each operation's gain must reach this share of the disjoint transfers' gain ...
GAIN_TARGET = 0.9
#: ... and one company's card payments from 8 workers this share of 8 companies'.
ONE_COMPANY_TARGET = 0.8
FUNDING = 90_000_000_000
CARD = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="123")
KINDS = ("transfer", "deposit", "card", "fx")


@dataclass(frozen=True, slots=True)
class Company:
    """One company's ids."""

    id: int
    merchant_account: int
    source: str
    target: str
    eur: str


Operation = Callable[[Company], Awaitable[None]]


class HotBench:
    """A treasury on 8 connections and the operations of each kind."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.treasury = bootstrap(
            TreasuryConfig(database_url=url, adapters=[SqlSettings(pool_size=WORKERS)])
        )
        self.companies = self.loop.run_until_complete(self._setup())

    async def _setup(self) -> list[Company]:
        t = self.treasury
        companies = []
        for n in range(COMPANIES):
            created = await t.companies.create_company(f"Bench {n}")
            cid = created.company.id

            async def wallet(name: str, currency: str, cid: int = cid) -> str:
                request = CreateWalletRequest(name=name, currency_id=currency)
                return (await t.wallets.create(cid, request)).id

            source, target, eur = (
                await wallet("source", "USD"),
                await wallet("target", "USD"),
                await wallet("eur", "EUR"),
            )
            deposit = await t.deposits.create(
                cid,
                CreateDepositRequest(wallet_id=source, from_amount=FUNDING, from_currency_id="USD"),
            )
            await t.deposits.complete(None, deposit.id)
            companies.append(Company(cid, created.merchant_account.id, source, target, eur))
        return companies

    def operation(self, kind: str) -> Operation:
        """One operation of ``kind`` for a company."""
        t = self.treasury

        async def transfer(c: Company) -> None:
            request = CreateTransferRequest(
                from_wallet_id=c.source, to_wallet_id=c.target, from_amount=1
            )
            await t.transfers.create(c.id, request)

        async def fx(c: Company) -> None:
            request = CreateTransferRequest(
                from_wallet_id=c.source, to_wallet_id=c.eur, from_amount=100
            )
            await t.transfers.create(c.id, request)

        async def deposit(c: Company) -> None:
            request = CreateDepositRequest(
                wallet_id=c.target, from_amount=100, from_currency_id="USD"
            )
            created = await t.deposits.create(c.id, request)
            await t.deposits.complete(None, created.id)

        async def card(c: Company) -> None:
            request = CreateIntentRequest(
                account_id=c.merchant_account,
                billing_amount=1_000,
                billing_currency="USD",
                payment_type=PaymentType.CARD_PAYMENT,
            )
            intent = await t.payments.create(c.id, request)
            await t.payments.pay(intent.payment_intent_lookup_id, CARD)

        return {"transfer": transfer, "fx": fx, "deposit": deposit, "card": card}[kind]

    def run(self, kind: str, count: int, workers: int, *, one_company: bool = False) -> Elapsed:
        """``count`` operations of ``kind`` shared by ``workers`` tasks."""
        op = self.operation(kind)
        companies = self.companies

        async def worker(w: int, share: int) -> None:
            for i in range(share):
                company = companies[0 if one_company else (w if workers > 1 else i % COMPANIES)]
                await op(company)

        async def go() -> Elapsed:
            cpu = time.process_time()
            start = time.perf_counter()
            share = count // workers
            await asyncio.gather(*(worker(w, share) for w in range(workers)))
            return Elapsed(time.perf_counter() - start, time.process_time() - cpu)

        return self.loop.run_until_complete(go())

    def check_ledger(self) -> None:
        """Raise unless every ledger invariant holds (run while no worker writes); so the
        figures are of a ledger that stayed exact, shared accounts included."""
        check_invariants(self.treasury.storage)

    def close(self) -> None:
        """Close the treasury and the loop."""
        try:
            self.treasury.close()
        finally:
            self.loop.close()


#: The contenders: (kind, workers, one company).
CONTENDERS = (
    *((kind, w, False) for kind in KINDS for w in (1, WORKERS)),
    ("card", WORKERS, True),
)


def _name(kind: str, workers: int, one: bool) -> str:
    return f"{kind}_{workers}" + ("_one" if one else "")


def bench(count: int = COUNT, reps: int = REPS, url: str = POSTGRES_URL) -> dict[str, Samples]:
    """Samples per contender (``transfer_1``, ``transfer_8``, ..., ``card_8_one``), in a
    schema of its own on the PostgreSQL at ``url``."""
    with ExitStack() as stack:
        b = HotBench(stack.enter_context(postgres_schema(url)))
        stack.callback(b.close)
        b.check_ledger()
        for kind, workers, one in CONTENDERS:  # warm-up
            b.run(kind, max(WORKERS, count // 10), workers, one_company=one)
        seconds: dict[str, list[Elapsed]] = {_name(*c): [] for c in CONTENDERS}
        for _ in range(reps):
            for kind, workers, one in CONTENDERS:
                seconds[_name(kind, workers, one)].append(
                    b.run(kind, count, workers, one_company=one)
                )
        b.check_ledger()
        share = count // WORKERS * WORKERS
        return {name: Samples(share, tuple(runs)) for name, runs in seconds.items()}


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def rows(samples: dict[str, Samples]) -> list[Row]:
    """The table: rates, gains against the disjoint transfers', one company against eight.

    Ratios are taken per repetition (the contenders of one repetition ran minutes apart at
    most, under the same load) and their median reported: on a shared machine the absolute
    rates of two repetitions differ far more than two contenders of one.
    """

    def gains(kind: str) -> list[float]:
        eight, one = samples[f"{kind}_{WORKERS}"].rates, samples[f"{kind}_1"].rates
        return [e / o for e, o in zip(eight, one, strict=True)]

    reference = gains("transfer")
    result: list[Row] = []
    for kind in KINDS:
        for workers in (1, WORKERS):
            result.append(Row(f"{kind}, {workers} worker(s)", rate(samples[f"{kind}_{workers}"])))
        if kind == "transfer":
            result.append(Row("transfer gain 8/1 (reference)", f"{_median(reference):.2f}"))
            continue
        share = _median([g / r for g, r in zip(gains(kind), reference, strict=True)])
        result.append(
            Row(
                f"{kind} gain 8/1 against transfers'",
                f"{_median(gains(kind)):.2f}",
                ratio=f"{share:.2f}",
                target=f">= {GAIN_TARGET}",
                status=verdict(share >= GAIN_TARGET),
            )
        )
    one = samples[f"card_{WORKERS}_one"]
    result.append(Row("card, 8 workers, one company", rate(one)))
    eight = samples[f"card_{WORKERS}"].rates
    share = _median([o / e for o, e in zip(one.rates, eight, strict=True)])
    result.append(
        Row(
            "one company against 8 companies",
            "",
            ratio=f"{share:.2f}",
            target=f">= {ONE_COMPANY_TARGET}",
            status=verdict(share >= ONE_COMPANY_TARGET),
        )
    )
    return result


def main(argv: list[str] | None = None) -> int:
    """Run and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=COUNT)
    parser.add_argument("--reps", type=int, default=REPS)
    args = parser.parse_args(argv)
    reason = postgres_available()
    if reason is not None:
        print(f"PostgreSQL: {reason}", file=sys.stderr)
        return 1
    print(render(rows(bench(args.count, args.reps))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
