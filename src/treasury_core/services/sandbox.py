"""Sandbox controls: business time that tests and demos can move forward.

With a clock whose offset is kept with the data (:class:`SharedOffsetClock`, the sandbox clock,
and the storage's :class:`~treasury_core.ports.ClockOffsets`), an advance adds to the stored
offset in one transaction and this process's clock then takes the result. Other processes over
the same database take it when they next read it: at start (``bootstrap``) and before each pass
of the background loop (:meth:`SandboxService.sync_clock`), so a ``treasury worker`` settles
what another process's advance made due on its next pass, one ``job_poll_seconds`` later at
most.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from treasury_core.errors import NotFound, ValidationFailed
from treasury_core.movements.requests import ClockAdvanceRequest
from treasury_core.ports import Clock, ClockOffsets, Storage
from treasury_core.services.jobs import JobRunner
from treasury_core.services.notifications.service import NotificationService

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


@runtime_checkable
class SharedOffsetClock(Protocol):
    """A clock that runs ``offset`` ahead of wall time and takes the offset storage keeps."""

    def now(self) -> datetime:
        """The current business time."""
        ...

    @property
    def offset(self) -> timedelta:
        """How far business time runs ahead of wall time."""
        ...

    def catch_up(self, offset: timedelta) -> datetime:
        """Take ``offset`` if it is ahead of the clock's own (never moving back); the new now."""
        ...


def load_clock_offset(offsets: ClockOffsets | None, clock: Clock) -> None:
    """Bring ``clock`` up to the offset ``offsets`` keeps, if it is a :class:`SharedOffsetClock`
    (blocking; ``bootstrap`` calls it at start so a restart never sets business time back).
    ``None``: no offset is kept, and the clock stays as it is."""
    if offsets is not None and isinstance(clock, SharedOffsetClock):
        clock.catch_up(offsets.load())


class SandboxService:
    """Moves the sandbox clock and runs everything that falls due."""

    def __init__(
        self,
        *,
        storage: Storage,
        clock: Clock,
        sandbox: bool,
        jobs: JobRunner,
        notifications: NotificationService | None = None,
    ) -> None:
        """``sandbox``: whether sandbox controls are on (the configuration's sandbox mode)."""
        self._storage = storage
        self._clock = clock
        self._sandbox = sandbox
        self._jobs = jobs
        self._notifications = notifications
        self._offsets = storage.clock_offsets()

    @property
    def enabled(self) -> bool:
        """Whether sandbox controls are on (sandbox mode)."""
        return self._sandbox

    async def sync_clock(self) -> None:
        """Take the clock offset storage keeps, which another process may have advanced
        (the background loop calls this before each pass). A no-op for other clocks."""
        clock = self._clock
        if self._offsets is not None and isinstance(clock, SharedOffsetClock):
            clock.catch_up(await self._offsets.get())

    async def now(self) -> datetime:
        """The business time, as this process's clock has it after taking the stored offset
        (another process may have advanced it); :class:`NotFound` outside sandbox mode."""
        if not self.enabled:
            raise NotFound("Sandbox controls are off", code="sandbox_disabled")
        await self.sync_clock()
        return self._clock.now()

    async def advance(self, seconds: int) -> datetime:
        """Advance the clock by ``seconds`` and run every job due by then; the new now.

        Jobs (settlements, expiries) all run, and every event is fanned out, before this
        returns; of the deliveries then due (webhook retries included) one batch is sent, the
        rest left to the worker loop, which is woken: an advance over a backlog of thousands
        must not wait for all of them to be sent.

        A :class:`SharedOffsetClock` is advanced through the storage's clock offsets (when it
        keeps them): the stored offset grows in one transaction (so advances by other processes
        add up, and the year limit is checked against what is stored), then this process's
        clock takes it.
        """
        ClockAdvanceRequest(seconds=seconds)  # positive, at most ten years: the HTTP body's rule
        clock = self._clock
        offsets = self._offsets if isinstance(clock, SharedOffsetClock) else None
        shared = offsets is not None
        if not self.enabled or not (shared or isinstance(clock, AdvanceableClock)):
            raise NotFound("Sandbox controls are off", code="sandbox_disabled")
        if clock.now() + timedelta(seconds=seconds) > _LATEST:
            raise _too_far()
        notifications = self._notifications
        # Time moves only between passes over deliveries (NotificationService.exclusive),
        # once the batches in flight are recorded.
        async with notifications.exclusive() if notifications else contextlib.nullcontext():
            if notifications is not None:
                await notifications.finish_in_flight()
            if offsets is not None and isinstance(clock, SharedOffsetClock):
                await self._advance_stored(offsets, clock, timedelta(seconds=seconds))
            else:
                assert isinstance(clock, AdvanceableClock)  # checked above
                clock.advance(seconds)
            await self._jobs.run_all_due()
            if notifications is not None:
                try:
                    await notifications.dispatch_all()
                finally:
                    await notifications.deliver_due()
                    notifications.wake_deliveries()  # the rest: the worker loop's
        return clock.now()

    @staticmethod
    async def _advance_stored(
        offsets: ClockOffsets, clock: SharedOffsetClock, by: timedelta
    ) -> None:
        wall = clock.now() - clock.offset

        def check(offset: timedelta) -> None:
            if wall + offset > _LATEST:
                raise _too_far()  # the advance is not kept

        clock.catch_up(await offsets.advance(by, check))


def _too_far() -> ValidationFailed:
    # Business time has to stay representable, settlement delays included.
    return ValidationFailed(
        f"The sandbox clock cannot be advanced past {_LATEST.year}", param="seconds"
    )
