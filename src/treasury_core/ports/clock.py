"""The clock port: all business time comes from here, never from the wall clock directly."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Tells the current business time as an aware UTC ``datetime``."""

    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...
