"""The sandbox clock's offset lives in the database: restarts and other processes agree on it.

Each treasury here is what one process builds (``bootstrap`` with the sandbox clock, over a
real SQLite file or PostgreSQL schema); two of them over one database are two processes, such
as ``treasury serve`` and ``treasury worker``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from treasury_aiohttp.worker import work_loop
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.errors import ValidationFailed

DAY = 24 * 3600


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    return str(
        request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "postgres_url")
    )


@pytest.fixture
def opened() -> Iterator[list[Treasury]]:
    treasuries: list[Treasury] = []
    yield treasuries
    for treasury in treasuries:
        treasury.close()


def start(database_url: str, opened: list[Treasury]) -> Treasury:
    """A process starting on the database (the sandbox clock, as ``treasury serve`` has)."""
    treasury = bootstrap(TreasuryConfig(database_url=database_url, pool_size=2))
    opened.append(treasury)
    return treasury


async def one_pass(treasury: Treasury) -> None:
    """One pass of the background loop of ``treasury serve`` and ``treasury worker``."""
    stop = asyncio.Event()
    await work_loop(treasury, stop, after_pass=stop.set)


def test_business_time_is_not_set_back_by_a_restart(
    database_url: str, opened: list[Treasury]
) -> None:
    first = start(database_url, opened)
    advanced = asyncio.run(first.sandbox.advance(30 * DAY))
    first.close()
    opened.remove(first)
    second = start(database_url, opened)
    assert second.clock.now() >= advanced


def test_a_worker_adopts_an_advance_made_by_another_process(
    database_url: str, opened: list[Treasury]
) -> None:
    server = start(database_url, opened)
    worker = start(database_url, opened)
    advanced = asyncio.run(server.sandbox.advance(3 * DAY))
    # The worker learns of it on its next pass, before it looks for due work.
    assert worker.clock.now() < advanced
    asyncio.run(one_pass(worker))
    assert worker.clock.now() >= advanced


def test_advances_from_two_processes_add_up(database_url: str, opened: list[Treasury]) -> None:
    first = start(database_url, opened)
    second = start(database_url, opened)
    wall = datetime.now(UTC)
    asyncio.run(first.sandbox.advance(DAY))
    # The second has not seen the first's advance yet; its own adds to the stored offset.
    now = asyncio.run(second.sandbox.advance(DAY))
    assert now >= wall + timedelta(days=2)
    assert first.clock.now() < now
    asyncio.run(one_pass(first))
    assert first.clock.now() >= now


def test_an_advance_past_the_limit_changes_nothing(
    database_url: str, opened: list[Treasury]
) -> None:
    first = start(database_url, opened)
    asyncio.run(first.sandbox.advance(DAY))
    second = start(database_url, opened)
    # Another process has since taken the stored offset to an hour short of the limit; this
    # one has not seen it. A day more is refused on the offset stored, not on what it had seen.
    latest = datetime(9000, 1, 1, tzinfo=UTC)
    near = latest - timedelta(hours=1) - first.clock.now()
    offsets = first.storage.clock_offsets()
    assert offsets is not None
    asyncio.run(offsets.advance(near))
    with pytest.raises(ValidationFailed) as refused:
        asyncio.run(second.sandbox.advance(DAY))
    assert refused.value.param == "seconds"
    third = start(database_url, opened)
    assert latest - timedelta(hours=2) < third.clock.now() < latest - timedelta(minutes=30)


def test_an_advance_the_http_body_would_refuse_is_refused_from_python(
    database_url: str, opened: list[Treasury]
) -> None:
    treasury = start(database_url, opened)
    before = treasury.clock.now()
    for seconds, message in (
        (0, "Invalid seconds: Input should be greater than 0"),
        (-DAY, "Invalid seconds: Input should be greater than 0"),
        (11 * 365 * DAY, "Invalid seconds: Input should be less than or equal to 315360000"),
    ):
        with pytest.raises(ValidationFailed) as refused:
            asyncio.run(treasury.sandbox.advance(seconds))
        assert (refused.value.param, refused.value.message) == ("seconds", message)
    assert before <= treasury.clock.now() < before + timedelta(hours=1)
