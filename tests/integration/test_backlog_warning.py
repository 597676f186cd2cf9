"""The worker's backlog warning: once past the threshold, not on every poll, and a line when the
backlog recovers. Business and real time are one fake clock; the loop runs over a real SQLite
file, one pass at a time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import pytest

from tests.integration.test_dispatcher import make_events
from treasury_aiohttp.settings import app_settings
from treasury_aiohttp.worker import BacklogWatch, work_loop
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.testing.fakes.clock import FakeClock


class AnsweringSender:
    """A receiver that takes every delivery (200)."""

    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> int:
        return 200


async def passes(treasury: Treasury, watch: BacklogWatch, clock: FakeClock, until: float) -> None:
    """Polls of the loop every 5 s (of the fake clock) until ``until`` seconds have passed."""
    start = clock.now().timestamp()
    while clock.now().timestamp() - start < until:
        clock.advance(5)
        stop = asyncio.Event()
        await work_loop(treasury, stop, after_pass=stop.set, watch=watch)


def lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "treasury.jobs" and r.levelno == level and "event backlog" in r.getMessage()
    ]


async def test_an_old_backlog_is_warned_of_once_an_interval_and_its_recovery_told(
    sqlite_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="treasury.jobs")
    config = TreasuryConfig(database_url=sqlite_url, event_backlog_warning_seconds=300)
    treasury = bootstrap(config, clock=clock, wall_clock=clock)
    try:
        await make_events(treasury, 1)  # an endpoint and one event; no sender: it waits
        threshold = app_settings(config).event_backlog_warning_seconds
        watch = BacklogWatch(threshold, monotonic=lambda: clock.now().timestamp())
        await passes(treasury, watch, clock, 295)
        assert lines(caplog, logging.WARNING) == []  # younger than the threshold
        await passes(treasury, watch, clock, 300)  # 60 polls past the threshold
        warnings = lines(caplog, logging.WARNING)
        assert len(warnings) == 1
        assert "1 deliveries pending (1 due)" in warnings[0]
        await passes(treasury, watch, clock, 15)  # 5 minutes after the first: once more
        assert len(lines(caplog, logging.WARNING)) == 2
        treasury.notifications.sender = AnsweringSender()
        await passes(treasury, watch, clock, 10)
        assert lines(caplog, logging.INFO) == [
            "event backlog recovered: the oldest undelivered event is none"
        ]
        await passes(treasury, watch, clock, 600)
        assert len(lines(caplog, logging.WARNING)) == 2
        assert len(lines(caplog, logging.INFO)) == 1
    finally:
        treasury.close()


async def test_a_threshold_of_zero_never_reads_the_backlog(
    sqlite_url: str, clock: FakeClock
) -> None:
    treasury = bootstrap(TreasuryConfig(database_url=sqlite_url), clock=clock, wall_clock=clock)
    try:
        reads = 0
        status = treasury.notifications.status

        async def counted() -> object:
            nonlocal reads
            reads += 1
            return await status()

        treasury.notifications.status = counted  # type: ignore[method-assign,assignment]
        await passes(treasury, BacklogWatch(0), clock, 60)
        assert reads == 0
        await passes(
            treasury, BacklogWatch(1, monotonic=lambda: clock.now().timestamp()), clock, 60
        )
        assert reads == 6  # one read every 10 s, not one a poll
    finally:
        treasury.close()
