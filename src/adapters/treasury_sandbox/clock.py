"""The sandbox clock: wall time plus an offset that only grows.

``advance`` moves business time forward (how the 7-day hold expiry is tested end to end) without
touching the machine's clock.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class SandboxClock:
    """Wall-clock time shifted by an offset that :meth:`advance` increases."""

    def __init__(self) -> None:
        self._offset = timedelta(0)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """Wall time plus the offset."""
        with self._lock:
            offset = self._offset
        return datetime.now(UTC) + offset

    def advance(self, seconds: float) -> datetime:
        """Move business time forward by ``seconds``; returns the new now."""
        if seconds < 0:
            raise ValueError("the sandbox clock only moves forward")
        with self._lock:
            self._offset += timedelta(seconds=seconds)
        return self.now()
