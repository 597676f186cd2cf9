"""Calls an embedding app makes from Python that HTTP never sends: a record kind the service
does not read is refused with a :class:`TreasuryError` naming the kinds it reads, and the events
list without a ``limit`` returns one default page."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.integration.test_dispatcher import make_events
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.errors import TreasuryError, ValidationFailed
from treasury_core.listing import STATUSES
from treasury_core.movements.records import Deposit
from treasury_core.notifications.events import Event
from treasury_core.pagination import DEFAULT_LIMIT
from treasury_core.services.record_reads import NAMES
from treasury_core.testing.fakes.clock import FakeClock


@pytest.fixture
async def treasury(clock: FakeClock) -> AsyncIterator[Treasury]:
    wired = bootstrap(TreasuryConfig(database_url="memory://"), clock=clock, wall_clock=clock)
    try:
        yield wired
    finally:
        wired.close()


async def test_listing_events_as_records_names_the_kinds_it_reads(treasury: Treasury) -> None:
    company, _ = await make_events(treasury, 1)
    with pytest.raises(TreasuryError) as raised:
        await treasury.records.list(Event, company)  # type: ignore[type-var]
    assert isinstance(raised.value, ValidationFailed)
    message = str(raised.value)
    assert "Event" in message
    for kind in STATUSES:
        assert kind.__name__ in message
    # The kinds it does read still list.
    assert (await treasury.records.list(Deposit, company)).items == []


async def test_reading_an_event_as_a_record_names_the_kinds_it_reads(treasury: Treasury) -> None:
    company, _ = await make_events(treasury, 1)
    event = (await treasury.notifications.events(company)).items[0]
    with pytest.raises(ValidationFailed) as raised:
        await treasury.records.get(Event, company, event.id)  # type: ignore[type-var]
    for kind in NAMES:
        assert kind.__name__ in str(raised.value)


async def test_events_without_a_limit_return_the_default_page(treasury: Treasury) -> None:
    company, _ = await make_events(treasury, DEFAULT_LIMIT + 1)
    page = await treasury.notifications.events(company)
    assert len(page.items) == DEFAULT_LIMIT
    assert page.has_more
    everything = await treasury.notifications.events(company, limit=DEFAULT_LIMIT + 1)
    assert len(everything.items) == DEFAULT_LIMIT + 1
    assert page.items == everything.items[:DEFAULT_LIMIT]


@pytest.mark.parametrize("limit", [0, 101])
async def test_an_events_limit_out_of_range_is_refused(treasury: Treasury, limit: int) -> None:
    company, _ = await make_events(treasury, 1)
    with pytest.raises(ValidationFailed) as raised:
        await treasury.notifications.events(company, limit=limit)
    assert raised.value.param == "limit"
