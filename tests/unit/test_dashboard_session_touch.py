"""A dashboard session's idle timeout counts from its last request, however short it is set:
``last_seen_at`` is rewritten at least every half of it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from treasury_core import TreasuryConfig, bootstrap
from treasury_core.testing.fakes.clock import FakeClock


def test_a_busy_session_outlives_a_short_idle_timeout() -> None:
    clock = FakeClock(datetime(2026, 12, 2, 9, tzinfo=UTC))
    treasury = bootstrap(
        TreasuryConfig(database_url="memory://", dashboard_idle_timeout_seconds=30),
        clock=clock,
        wall_clock=clock,
    )

    async def scenario() -> None:
        created = await treasury.companies.create_company("Acme")
        principal = await treasury.companies.authenticate(created.secret_key)
        _, token = await treasury.dashboard_sessions.open(principal)
        for _ in range(6):  # a page every 20 s for two minutes: never 30 s idle
            clock.advance(20)
            assert await treasury.dashboard_sessions.resume(token) is not None
        clock.advance(30)
        assert await treasury.dashboard_sessions.resume(token) is None  # 30 s without a page

    try:
        asyncio.run(scenario())
    finally:
        treasury.close()
