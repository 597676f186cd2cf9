"""The sandbox clock's offset for the in-memory storage: kept as long as the process."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta


class MemoryClockOffsets:
    """:class:`~treasury_core.ports.clock.ClockOffsets` in process memory, under one lock."""

    def __init__(self) -> None:
        self._offset = timedelta(0)
        self._lock = threading.Lock()

    def load(self) -> timedelta:
        with self._lock:
            return self._offset

    async def get(self) -> timedelta:
        return self.load()

    async def advance(
        self, by: timedelta, check: Callable[[timedelta], None] | None = None
    ) -> timedelta:
        if by < timedelta(0):
            raise ValueError("the clock offset only grows")
        with self._lock:
            offset = self._offset + by
            if check is not None:
                check(offset)
            self._offset = offset
        return offset
