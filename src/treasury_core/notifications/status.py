"""How far behind the event pipeline is: what storage reports and what an operator reads.

Storage answers with :class:`DeliveryBacklog` and the outbox's :class:`OutboxBacklog` (each read
from indexes over the unfinished rows only, so the cost follows the backlog, not the history);
:meth:`NotificationService.status
<treasury_core.services.notifications.service.NotificationService.status>`
combines them into a :class:`PipelineStatus` for ``treasury events status`` and the worker's
backlog warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from treasury_core.notifications.deliveries import DeliveryKind


@dataclass(frozen=True, slots=True)
class OutboxBacklog:
    """Events not yet fanned out into deliveries: how many, and the oldest one's creation."""

    undispatched: int
    oldest_created_at: datetime | None


@dataclass(frozen=True, slots=True)
class FailingDestination:
    """An endpoint (or a company's callbacks) whose pending deliveries have failed so far.

    A pending delivery with attempts has failed every one of them (a success finishes it), so
    these are the destinations whose latest attempts failed and that the schedule retries.
    """

    company_id: int
    #: The webhook endpoint, or ``None`` for the company's legacy and tokenization callbacks.
    endpoint_id: str | None
    kind: DeliveryKind
    #: The URL of the one of these deliveries attempted last (callbacks may have several).
    url: str
    #: Pending deliveries already attempted (all their attempts failed).
    failing_deliveries: int
    #: The most attempts one of them has failed in a row: where it stands on the schedule.
    consecutive_failures: int
    #: When the schedule tries the first of them again (business time).
    next_attempt_at: datetime
    #: The latest of their attempts (real time), ``None`` if none was recorded.
    last_attempt_at: datetime | None


@dataclass(frozen=True, slots=True)
class DeliveryBacklog:
    """Pending deliveries as storage counts them (see :meth:`DeliveryRepository.backlog`)."""

    pending: int
    due: int
    #: The creation time of the oldest event with a pending delivery.
    oldest_event_created_at: datetime | None
    #: Deliveries whose latest attempt was made at or after the window's start (real time).
    attempted_recently: int
    failing: tuple[FailingDestination, ...]


@dataclass(frozen=True, slots=True)
class PipelineStatus:
    """The event pipeline at one moment (``treasury events status``; docs/notifications.md)."""

    #: Business time the figures were taken at.
    as_of: datetime
    undispatched_events: int
    pending_deliveries: int
    due_deliveries: int
    #: The creation time of the oldest event not yet delivered: not fanned out, or with a
    #: delivery still pending. ``None`` when nothing is waiting.
    oldest_undelivered_at: datetime | None
    #: Deliveries attempted in the last :attr:`rate_window_seconds` (real time) per second.
    deliveries_per_second: float
    rate_window_seconds: int
    failing: tuple[FailingDestination, ...]

    @property
    def oldest_undelivered_age_seconds(self) -> float | None:
        """How long the oldest undelivered event has waited (business time), in seconds."""
        if self.oldest_undelivered_at is None:
            return None
        return max(0.0, (self.as_of - self.oldest_undelivered_at).total_seconds())

    def as_dict(self) -> dict[str, Any]:
        """The status as JSON-ready values (``treasury events status --json``)."""

        def when(moment: datetime | None) -> str | None:
            return None if moment is None else moment.isoformat()

        return {
            "as_of": when(self.as_of),
            "undispatched_events": self.undispatched_events,
            "pending_deliveries": self.pending_deliveries,
            "due_deliveries": self.due_deliveries,
            "oldest_undelivered_at": when(self.oldest_undelivered_at),
            "oldest_undelivered_age_seconds": self.oldest_undelivered_age_seconds,
            "deliveries_per_second": self.deliveries_per_second,
            "rate_window_seconds": self.rate_window_seconds,
            "failing_endpoints": [
                {
                    "endpoint_id": f.endpoint_id,
                    "company_id": f.company_id,
                    "kind": f.kind.value,
                    "host": host_of(f.url),
                    "failing_deliveries": f.failing_deliveries,
                    "consecutive_failures": f.consecutive_failures,
                    "next_attempt_at": when(f.next_attempt_at),
                    "last_attempt_at": when(f.last_attempt_at),
                }
                for f in self.failing
            ],
        }


def host_of(url: str) -> str:
    """The host (and port, if any) of ``url``: enough to tell receivers apart, without the path
    or query, which may carry a receiver's token."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    host = parts.hostname or ""
    return f"{host}:{port}" if port is not None else host
