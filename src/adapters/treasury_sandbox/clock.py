"""The sandbox clock: wall time plus an offset that only grows.

``advance`` moves business time forward (how the 7-day hold expiry is tested end to end) without
touching the machine's clock.

The treasury keeps the offset with its data (the ``ClockOffsets`` port, which a storage supplies
through ``Storage.clock_offsets()``): the sandbox service advances the stored offset in a
transaction and hands the result to :meth:`catch_up`,
``bootstrap`` catches up with it at start, and the background loop before each pass, so that a
restart never sets business time back and every process over one database tells the same time.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class SandboxClock:
    """Wall-clock time shifted by an offset that :meth:`advance` and :meth:`catch_up` increase."""

    def __init__(self) -> None:
        self._offset = timedelta(0)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """Wall time plus the offset."""
        with self._lock:
            offset = self._offset
        return datetime.now(UTC) + offset

    @property
    def offset(self) -> timedelta:
        """How far business time runs ahead of wall time."""
        with self._lock:
            return self._offset

    def advance(self, seconds: float) -> datetime:
        """Move business time forward by ``seconds``, in this process only; returns the new now.

        The treasury advances through :meth:`catch_up` with the offset it stored; this is for
        a clock used on its own.
        """
        if seconds < 0:
            raise ValueError("the sandbox clock only moves forward")
        with self._lock:
            self._offset += timedelta(seconds=seconds)
        return self.now()

    def catch_up(self, offset: timedelta) -> datetime:
        """Take ``offset`` (the one stored) if it is ahead of this clock's; returns the new now.

        Never moves time back: an offset read before another advance of this process committed
        is simply older than the one the clock already has.
        """
        with self._lock:
            self._offset = max(self._offset, offset)
        return self.now()
