"""A clock that only moves when told to: the fake of the clock port."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class FakeClock:
    """Business time under test control; starts at ``start`` (default 2026-01-01T00:00Z)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The current fake time."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Move time forward by ``seconds`` and return the new time."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now


class SequentialIds:
    """Deterministic ids for tests: ``{prefix}_{n:026d}`` and predictable tokens."""

    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def new_id(self, prefix: str) -> str:
        """The next id."""
        with self._lock:
            self._n += 1
            return f"{prefix}_{self._n:026d}"

    def token(self, nbytes: int = 24) -> str:
        """A predictable token (tests only: not secret)."""
        with self._lock:
            self._n += 1
            return f"tok{self._n:0{max(nbytes, 8)}d}"
