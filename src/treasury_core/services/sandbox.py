"""Sandbox controls: business time that tests and demos can move forward."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from treasury_core.errors import NotFound, ValidationFailed
from treasury_core.services.notifications import NotificationService
from treasury_core.services.settlement import SettlementService
from treasury_core.services.support import TreasuryContext

_LATEST = datetime(9000, 1, 1, tzinfo=UTC)


@runtime_checkable
class AdvanceableClock(Protocol):
    """A clock that can be moved forward (the sandbox clock, the fake clock)."""

    def now(self) -> datetime:
        """The current business time."""
        ...

    def advance(self, seconds: float) -> datetime:
        """Move business time forward by ``seconds``; returns the new now."""
        ...


class SandboxService:
    """Moves the sandbox clock and runs everything that falls due."""

    def __init__(
        self,
        ctx: TreasuryContext,
        settlement: SettlementService,
        notifications: NotificationService | None = None,
    ) -> None:
        self._ctx = ctx
        self._settlement = settlement
        self._notifications = notifications

    @property
    def enabled(self) -> bool:
        """Whether sandbox controls are on (sandbox mode)."""
        return self._ctx.config.sandbox

    async def advance(self, seconds: int) -> datetime:
        """Advance the clock by ``seconds`` and run every job due by then, webhook retries
        included; the new now."""
        clock = self._ctx.clock
        if not self.enabled or not isinstance(clock, AdvanceableClock):
            raise NotFound("Sandbox controls are off", code="sandbox_disabled")
        if clock.now() + timedelta(seconds=seconds) > _LATEST:
            # Business time has to stay representable, settlement delays included.
            raise ValidationFailed(
                f"The sandbox clock cannot be advanced past {_LATEST.year}", param="seconds"
            )
        notifications = self._notifications
        # Time moves only between passes over deliveries (NotificationService.exclusive).
        async with notifications.exclusive() if notifications else contextlib.nullcontext():
            clock.advance(seconds)
            await self._settlement.run_all_due()
            if notifications is not None:
                await notifications.run_due_exclusively()
        return clock.now()
