"""A stale FX rate refuses the movement whole: nothing is reserved, recorded or announced."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from aiohttp.test_utils import TestClient, TestServer

from treasury_aiohttp import create_app
from treasury_core import KeyKind, TreasuryConfig, bootstrap
from treasury_core.errors import ErrorKind, FxRateUnavailable
from treasury_core.movements.requests import CreateDepositRequest, CreateTransferRequest
from treasury_core.testing import check_invariants
from treasury_core.testing.fakes.clock import FakeClock
from treasury_core.wallets import CreateWalletRequest
from treasury_sandbox.fx import SandboxFxRates


def test_stale_rate_refuses_cross_currency_movements() -> None:
    clock = FakeClock()
    fx = SandboxFxRates(clock, max_age_seconds=300)
    treasury = bootstrap(
        TreasuryConfig(database_url="memory://"), clock=clock, wall_clock=clock, fx=fx
    )

    async def scenario() -> None:
        company = (await treasury.companies.create_company("Acme")).company.id
        usd = await treasury.wallets.create(
            company, CreateWalletRequest(name="U", currency_id="USD")
        )
        eur = await treasury.wallets.create(
            company, CreateWalletRequest(name="E", currency_id="EUR")
        )
        deposit = await treasury.deposits.create(
            company,
            CreateDepositRequest(wallet_id=usd.id, from_amount=5_000, from_currency_id="USD"),
        )
        await treasury.deposits.complete(None, deposit.id)
        before = await treasury.wallets.balances(company)
        events = treasury.storage.run_sync(lambda uow: len(uow.outbox.list()), write=False)

        fx.stale_as_of = clock.now() - timedelta(seconds=301)
        with pytest.raises(FxRateUnavailable) as caught:
            await treasury.transfers.create(
                company,
                CreateTransferRequest(from_wallet_id=usd.id, to_wallet_id=eur.id, from_amount=100),
            )
        assert caught.value.kind is ErrorKind.UNAVAILABLE
        assert caught.value.code == "fx_rate_unavailable"
        with pytest.raises(FxRateUnavailable):
            await treasury.deposits.create(
                company,
                CreateDepositRequest(wallet_id=eur.id, from_amount=100, from_currency_id="USD"),
            )
        assert await treasury.wallets.balances(company) == before
        assert (await treasury.transfers.list(company)).items == []
        assert treasury.storage.run_sync(lambda uow: len(uow.outbox.list()), write=False) == events

        # A rate exactly at the limit is still fresh; same-currency movements never need one.
        fx.stale_as_of = clock.now() - timedelta(seconds=300)
        fresh = await treasury.transfers.create(
            company,
            CreateTransferRequest(from_wallet_id=usd.id, to_wallet_id=eur.id, from_amount=100),
        )
        assert fresh.to_amount == 92

        # Over HTTP the refusal is a 503 with Retry-After.
        fx.stale_as_of = clock.now() - timedelta(days=1)
        key = (await treasury.companies.create_api_key(company, KeyKind.SECRET))[1]
        client = TestClient(TestServer(create_app(treasury)))
        await client.start_server()
        try:
            response = await client.post(
                "/api/v1/transfer",
                json={"from_wallet_id": usd.id, "to_wallet_id": eur.id, "from_amount": 100},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert response.status == 503
            assert response.headers["Retry-After"] == "5"
            assert (await response.json())["error"]["code"] == "fx_rate_unavailable"
        finally:
            await client.close()

    asyncio.run(scenario())
    check_invariants(treasury.storage)


def test_one_job_that_cannot_run_does_not_hold_up_the_others() -> None:
    from treasury_core.jobs import Job
    from treasury_core.movements.records import MovementStatus

    clock = FakeClock()
    treasury = bootstrap(TreasuryConfig(database_url="memory://"), clock=clock, wall_clock=clock)

    async def scenario() -> tuple[str, str]:
        company = (await treasury.companies.create_company("Acme")).company.id
        usd = await treasury.wallets.create(
            company, CreateWalletRequest(name="U", currency_id="USD")
        )
        good = await treasury.deposits.create(
            company, CreateDepositRequest(wallet_id=usd.id, from_amount=500, from_currency_id="USD")
        )
        # A pending deposit whose reservation does not exist: its settlement must fail.
        broken = good.model_copy(update={"id": "dep_broken", "pending_ids": ("nope.0",)})

        def plant(uow: object) -> None:
            uow.records.add(broken)  # type: ignore[attr-defined]
            uow.jobs.schedule(  # type: ignore[attr-defined]
                Job("job_0", "settle_deposit", broken.id, company, clock.now())
            )

        treasury.storage.run_sync(plant)  # type: ignore[arg-type]
        clock.advance(25 * 3600)
        await treasury.jobs.run_all_due()
        settled = await treasury.deposits.get(company, good.id)
        stuck = await treasury.deposits.get(company, broken.id)
        assert settled.status is MovementStatus.COMPLETED
        return settled.status.value, stuck.status.value

    assert asyncio.run(scenario()) == ("completed", "pending")
