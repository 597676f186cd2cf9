"""The clock ports: all business time comes from a :class:`Clock`, never from the wall clock
directly; a sandbox clock's offset is kept by :class:`ClockOffsets`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Tells the current business time as an aware UTC ``datetime``."""

    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...


class ClockOffsets(Protocol):
    """How far the sandbox clock runs ahead of wall time, kept where every process over the
    same data, and every restart, reads it (a storage supplies it:
    :meth:`~treasury_core.ports.storage.Storage.clock_offsets`).

    There is one offset; it starts at zero and only grows. Each call is one transaction of its
    own.
    """

    def load(self) -> timedelta:
        """The stored offset (zero until the first advance); blocking, for a start-up."""
        ...

    async def get(self) -> timedelta:
        """The stored offset (zero until the first advance)."""
        ...

    async def advance(
        self, by: timedelta, check: Callable[[timedelta], None] | None = None
    ) -> timedelta:
        """Add ``by`` to the stored offset and return the new offset.

        Concurrent advances (from other processes too) add up and none is lost. ``check`` is
        called with the new offset before it is kept; if it raises, nothing is written and the
        error propagates. A negative ``by`` raises ``ValueError`` and writes nothing.
        """
        ...
