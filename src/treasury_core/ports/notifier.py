"""The notifier port: delivers committed outbox events (notifications issue; shaped here)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from treasury_core.events import Event


@runtime_checkable
class Notifier(Protocol):
    """Delivers one event to its destinations; raises to have the delivery retried."""

    async def deliver(self, event: Event) -> None:
        """Send ``event``. Called only after the transaction that wrote it committed."""
        ...
