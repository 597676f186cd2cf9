"""The wall clock."""

from __future__ import annotations

from datetime import UTC, datetime


class SystemClock:
    """Real UTC time."""

    def now(self) -> datetime:
        """The current time, aware, in UTC."""
        return datetime.now(UTC)
