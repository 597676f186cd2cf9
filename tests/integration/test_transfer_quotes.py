"""Transfers and deposits once the wallets' currencies are known (one write transaction each).

After a first transfer the service remembers each wallet's currency per company, and quotes and
moves money without reading the wallets again (a wallet never changes company or currency and is
never deleted); a deposit into a known wallet quotes without a read transaction too. Everything
refused before is still refused, and what moves is still right.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from treasury_core import (
    CreateWalletRequest,
    EventType,
    InsufficientFunds,
    PageRequest,
    Treasury,
    TreasuryConfig,
    bootstrap,
)
from treasury_core.errors import NotFound
from treasury_core.movements.records import MovementStatus, Transfer
from treasury_core.movements.requests import CreateDepositRequest, CreateTransferRequest

T = TypeVar("T")

FUNDING = 10_000
OTHER_FUNDING = 5_000


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def treasury(request: pytest.FixtureRequest) -> Iterator[Treasury]:
    if request.param == "memory":
        url = "memory://"
    else:
        url = str(request.getfixturevalue(f"{request.param}_url"))
    t = bootstrap(TreasuryConfig(database_url=url, pool_size=2))
    try:
        yield t
    finally:
        t.close()


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    # One loop for the whole test: the storage's threads answer on the loop that asked.
    loop = asyncio.new_event_loop()
    try:
        yield loop
    finally:
        loop.close()


@dataclass(frozen=True)
class World:
    company: int
    usd: str  # funded
    usd2: str
    eur: str
    other_company: int
    other_usd: str  # funded
    other_usd2: str


async def _setup(t: Treasury) -> World:
    async def company(name: str) -> int:
        return (await t.companies.create_company(name)).company.id

    async def wallet(company_id: int, name: str, currency: str) -> str:
        request = CreateWalletRequest(name=name, currency_id=currency)
        return (await t.wallets.create(company_id, request)).id

    async def fund(company_id: int, wallet_id: str, amount: int) -> None:
        deposit = await t.deposits.create(
            company_id,
            CreateDepositRequest(wallet_id=wallet_id, from_amount=amount, from_currency_id="USD"),
        )
        await t.deposits.complete(None, deposit.id)

    a, b = await company("A"), await company("B")
    world = World(
        company=a,
        usd=await wallet(a, "usd", "USD"),
        usd2=await wallet(a, "usd2", "USD"),
        eur=await wallet(a, "eur", "EUR"),
        other_company=b,
        other_usd=await wallet(b, "usd", "USD"),
        other_usd2=await wallet(b, "usd2", "USD"),
    )
    await fund(a, world.usd, FUNDING)
    await fund(b, world.other_usd, OTHER_FUNDING)
    return world


def _run(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T]) -> T:
    return loop.run_until_complete(coroutine)


def _transfer(from_wallet: str, to_wallet: str, amount: int) -> CreateTransferRequest:
    return CreateTransferRequest(
        from_wallet_id=from_wallet, to_wallet_id=to_wallet, from_amount=amount
    )


async def _balances(t: Treasury, world: World) -> dict[str, tuple[int, int, int]]:
    """Every wallet's (balance, pending out, available)."""
    out: dict[str, tuple[int, int, int]] = {}
    for company, wallets in (
        (world.company, (world.usd, world.usd2, world.eur)),
        (world.other_company, (world.other_usd, world.other_usd2)),
    ):
        for wallet_id in wallets:
            b = await t.wallets.balance(company, wallet_id)
            out[wallet_id] = (b.balance, b.pending_out, b.available_balance)
    return out


async def _transfer_ids(t: Treasury, company_id: int) -> set[str]:
    page = await t.transfers.list(company_id, PageRequest(limit=100))
    assert not page.has_more
    return {transfer.id for transfer in page.items}


def _completed_events(t: Treasury, company_id: int) -> list[str]:
    """Ids of the transfers with a ``transfer.completed`` event, oldest first."""
    events = t.storage.run_sync(
        lambda uow: uow.outbox.page(
            company_id,
            type_=EventType.TRANSFER_COMPLETED.value,
            created_gte=None,
            limit=100,
            starting_after=None,
        ),
        write=False,
    )
    return [str(e.data["object"]["id"]) for e in reversed(events)]


def test_repeated_same_currency_transfers_complete_with_right_balances(
    treasury: Treasury, loop: asyncio.AbstractEventLoop
) -> None:
    t = treasury
    w = _run(loop, _setup(t))
    # usd was read when it was funded; usd2 has not been seen yet.
    assert t.wallet_currencies.known_currency(w.company, w.usd) == "USD"
    assert t.wallet_currencies.known_currency(w.company, w.usd2) is None
    made: list[Transfer] = []
    for amount in (100, 250, 400, 1):
        made.append(_run(loop, t.transfers.create(w.company, _transfer(w.usd, w.usd2, amount))))
        # After the first, both currencies are known: the rest are one transaction each.
        assert t.wallet_currencies.known_currency(w.company, w.usd) == "USD"
        assert t.wallet_currencies.known_currency(w.company, w.usd2) == "USD"
    # ...and back the other way, usd2 -> usd, also known.
    made.append(_run(loop, t.transfers.create(w.company, _transfer(w.usd2, w.usd, 51))))

    assert [tr.status for tr in made] == [MovementStatus.COMPLETED] * 5
    assert all(tr.from_currency_id == tr.to_currency_id == "USD" for tr in made)
    assert [tr.to_amount for tr in made] == [100, 250, 400, 1, 51]
    assert len({tr.id for tr in made}) == 5
    balances = _run(loop, _balances(t, w))
    assert balances[w.usd] == (FUNDING - 700, 0, FUNDING - 700)
    assert balances[w.usd2] == (700, 0, 700)
    assert _completed_events(t, w.company) == [tr.id for tr in made]
    assert _run(loop, _transfer_ids(t, w.company)) == {tr.id for tr in made}
    for tr in made:
        assert _run(loop, t.transfers.get(w.company, tr.id)) == tr


def test_repeated_cross_currency_transfers_reserve_then_settle(
    treasury: Treasury, loop: asyncio.AbstractEventLoop
) -> None:
    t = treasury
    w = _run(loop, _setup(t))
    made = [
        _run(loop, t.transfers.create(w.company, _transfer(w.usd, w.eur, amount)))
        for amount in (1_000, 1_000, 2_000)
    ]
    assert t.wallet_currencies.known_currency(w.company, w.eur) == "EUR"
    assert [tr.status for tr in made] == [MovementStatus.PENDING] * 3
    assert all((tr.from_currency_id, tr.to_currency_id) == ("USD", "EUR") for tr in made)
    # The same quote for the same amount, whether the currencies were read or remembered.
    assert made[0].exchange_rate_from_to == made[1].exchange_rate_from_to
    assert made[0].to_amount == made[1].to_amount > 0
    assert abs(made[2].to_amount - 2 * made[0].to_amount) <= 1

    balances = _run(loop, _balances(t, w))
    assert balances[w.usd] == (FUNDING, 4_000, FUNDING - 4_000)
    assert balances[w.eur][0] == 0
    assert _completed_events(t, w.company) == []

    for tr in made:
        done = _run(loop, t.transfers.complete(w.company, tr.id))
        assert done.status is MovementStatus.COMPLETED
    balances = _run(loop, _balances(t, w))
    assert balances[w.usd] == (FUNDING - 4_000, 0, FUNDING - 4_000)
    eur = sum(tr.to_amount for tr in made)
    assert balances[w.eur] == (eur, 0, eur)
    assert sorted(_completed_events(t, w.company)) == sorted(tr.id for tr in made)


@pytest.mark.parametrize("side", ["from_wallet_id", "to_wallet_id"])
def test_another_companys_wallet_is_not_found_even_once_it_is_known(
    treasury: Treasury, loop: asyncio.AbstractEventLoop, side: str
) -> None:
    t = treasury
    w = _run(loop, _setup(t))
    # B transfers from its wallet (its currency now known, for B), A from its own.
    _run(loop, t.transfers.create(w.other_company, _transfer(w.other_usd, w.other_usd2, 10)))
    _run(loop, t.transfers.create(w.company, _transfer(w.usd, w.usd2, 10)))
    assert t.wallet_currencies.known_currency(w.other_company, w.other_usd) == "USD"
    assert t.wallet_currencies.known_currency(w.company, w.other_usd) is None
    before = _run(loop, _balances(t, w))
    transfers_before = _run(loop, _transfer_ids(t, w.company))
    events_before = _completed_events(t, w.company)

    request = (
        _transfer(w.other_usd, w.usd2, 10)
        if side == "from_wallet_id"
        else _transfer(w.usd, w.other_usd, 10)
    )
    for _ in range(2):  # the refusal teaches the cache nothing either
        with pytest.raises(NotFound) as refused:
            _run(loop, t.transfers.create(w.company, request))
        assert refused.value.param == side
        assert t.wallet_currencies.known_currency(w.company, w.other_usd) is None

    assert _run(loop, _balances(t, w)) == before
    assert _run(loop, _transfer_ids(t, w.company)) == transfers_before
    assert _completed_events(t, w.company) == events_before


@pytest.mark.parametrize("side", ["from_wallet_id", "to_wallet_id"])
def test_an_unknown_wallet_is_not_found_and_nothing_moves(
    treasury: Treasury, loop: asyncio.AbstractEventLoop, side: str
) -> None:
    t = treasury
    w = _run(loop, _setup(t))
    _run(loop, t.transfers.create(w.company, _transfer(w.usd, w.usd2, 10)))  # usd is known
    before = _run(loop, _balances(t, w))
    transfers_before = _run(loop, _transfer_ids(t, w.company))
    missing = t.ids.new_id("wal")
    source, target = (missing, w.usd2) if side == "from_wallet_id" else (w.usd, missing)
    request = _transfer(source, target, 10)
    with pytest.raises(NotFound) as refused:
        _run(loop, t.transfers.create(w.company, request))
    assert refused.value.param == side
    assert t.wallet_currencies.known_currency(w.company, missing) is None
    assert _run(loop, _balances(t, w)) == before
    assert _run(loop, _transfer_ids(t, w.company)) == transfers_before


@pytest.mark.parametrize("cross", [False, True])
def test_insufficient_funds_once_the_currencies_are_known(
    treasury: Treasury, loop: asyncio.AbstractEventLoop, cross: bool
) -> None:
    t = treasury
    w = _run(loop, _setup(t))
    target = w.eur if cross else w.usd2
    first = _run(loop, t.transfers.create(w.company, _transfer(w.usd, target, 100)))
    assert t.wallet_currencies.known_currency(w.company, target) is not None
    before = _run(loop, _balances(t, w))
    transfers_before = _run(loop, _transfer_ids(t, w.company))
    events_before = _completed_events(t, w.company)
    available = before[w.usd][2]

    with pytest.raises(InsufficientFunds) as refused:
        _run(loop, t.transfers.create(w.company, _transfer(w.usd, target, available + 1)))
    assert refused.value.param == "from_amount"
    assert _run(loop, _balances(t, w)) == before
    assert _run(loop, _transfer_ids(t, w.company)) == transfers_before == {first.id}
    assert _completed_events(t, w.company) == events_before

    # Exactly what is available still goes.
    last = _run(loop, t.transfers.create(w.company, _transfer(w.usd, target, available)))
    assert last.status is (MovementStatus.PENDING if cross else MovementStatus.COMPLETED)
    assert _run(loop, _balances(t, w))[w.usd][2] == 0


def test_deposits_into_a_known_wallet_quote_from_its_remembered_currency(
    treasury: Treasury, loop: asyncio.AbstractEventLoop
) -> None:
    t = treasury
    w = _run(loop, _setup(t))
    assert t.wallet_currencies.known_currency(w.company, w.eur) is None
    made = []
    for amount in (1_000, 1_000):
        request = CreateDepositRequest(wallet_id=w.eur, from_amount=amount, from_currency_id="USD")
        made.append(_run(loop, t.deposits.create(w.company, request)))
        assert t.wallet_currencies.known_currency(w.company, w.eur) == "EUR"
    # The second was quoted from the remembered currency, and is the same deposit as the first.
    assert [(d.to_currency_id, d.to_amount) for d in made] == [("EUR", made[0].to_amount)] * 2
    assert made[0].exchange_rate_from_to == made[1].exchange_rate_from_to
    assert made[0].to_amount > 0
    for deposit in made:
        _run(loop, t.deposits.complete(None, deposit.id))
    credited = 2 * made[0].to_amount
    assert _run(loop, _balances(t, w))[w.eur] == (credited, 0, credited)


def test_a_deposit_into_another_companys_known_wallet_is_not_found(
    treasury: Treasury, loop: asyncio.AbstractEventLoop
) -> None:
    t = treasury
    w = _run(loop, _setup(t))
    known = CreateDepositRequest(wallet_id=w.other_usd, from_amount=10, from_currency_id="USD")
    _run(loop, t.deposits.create(w.other_company, known))
    assert t.wallet_currencies.known_currency(w.other_company, w.other_usd) == "USD"
    before = _run(loop, _balances(t, w))
    for _ in range(2):  # the refusal teaches the cache nothing either
        with pytest.raises(NotFound) as refused:
            _run(loop, t.deposits.create(w.company, known))
        assert refused.value.param == "wallet_id"
        assert t.wallet_currencies.known_currency(w.company, w.other_usd) is None
    assert _run(loop, _balances(t, w)) == before
