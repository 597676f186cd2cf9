"""Deliveries: one event on its way to one destination, with every attempt recorded.

Rules:
- An event committed to the outbox is fanned out once into deliveries: one per webhook endpoint
  of its company that takes its type, the legacy callback for the intent events decisions.md
  lists (when the intent has a ``callback_url``), and the tokenization result for a PMTI's
  ``callback_url``.
- A delivery carries the exact body it sends; every attempt sends the same bytes with the same
  ``webhook-id`` (the event id), so a receiver can drop repeats.
- A delivery is ``pending`` until an attempt gets a 2xx (``succeeded``) or the last attempt of
  the schedule fails (``failed``). A worker holds a claimed delivery for a lease (wall time), so
  two workers never send the same attempt at once; a worker killed mid-send loses its lease and
  the delivery is tried again.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import StrEnum
from typing import ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from treasury_core.serialization import Timestamp


class DeliveryKind(StrEnum):
    """Where a delivery goes."""

    WEBHOOK = "webhook"
    LEGACY_CALLBACK = "legacy_callback"
    TOKENIZATION_CALLBACK = "tokenization_callback"


class DeliveryStatus(StrEnum):
    """Where a delivery stands."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class DeliveryAttempt(BaseModel):
    """One try: when (real time), what came back, how long it took, what went wrong."""

    model_config = ConfigDict(frozen=True)

    attempted_at: Timestamp
    status_code: int | None
    duration_ms: int
    error: str | None


class Delivery(BaseModel):
    """An event on its way to one URL."""

    model_config = ConfigDict(frozen=True)

    prefix: ClassVar[str] = "dlv"

    id: str
    object: Literal["delivery"] = "delivery"
    company_id: int
    event_id: str
    event_type: str
    kind: DeliveryKind
    endpoint_id: str | None
    url: str
    payload: str
    status: DeliveryStatus = DeliveryStatus.PENDING
    attempts: tuple[DeliveryAttempt, ...] = ()
    next_attempt_at: Timestamp
    lease_until: datetime | None = None
    created_at: Timestamp

    @property
    def destination(self) -> str:
        """Where the delivery goes, as the in-flight limits count it (:func:`destination_of`)."""
        return destination_of(self.url)

    def noted(self, attempt: DeliveryAttempt) -> Delivery:
        """This delivery with a late attempt added to its history only: the worker that made it
        had lost its claim (its lease ran out and another worker took over), so it decides
        nothing about the delivery's state."""
        return self.model_copy(update={"attempts": (*self.attempts, attempt)})

    def attempted(
        self, attempt: DeliveryAttempt, *, succeeded: bool, next_at: datetime | None
    ) -> Delivery:
        """This delivery after ``attempt``: done, failed for good, or due again at ``next_at``."""
        if succeeded:
            status = DeliveryStatus.SUCCEEDED
        elif next_at is None:
            status = DeliveryStatus.FAILED
        else:
            status = DeliveryStatus.PENDING
        return self.model_copy(
            update={
                "attempts": (*self.attempts, attempt),
                "status": status,
                "next_attempt_at": next_at or self.next_attempt_at,
                "lease_until": None,
            }
        )


@functools.lru_cache(maxsize=4096)  # a handful of URLs, asked several times per delivery
def destination_of(url: str) -> str:
    """``scheme://host:port`` of ``url``: one receiver, as a connection pool sees it.

    The per-destination limit on sends in flight counts by this, so a dead receiver holds at
    most that many of a worker's slots whichever endpoints and callbacks point at it.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # not a URL a delivery could reach: its own destination
        return url[:255]
    if port is None:
        port = 443 if scheme == "https" else 80
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"[:255]


def fair_pick(
    candidates: Iterable[Delivery],
    limit: int,
    per_destination: int,
    room: Mapping[str, int],
    lease_until: datetime,
) -> list[Delivery]:
    """The deliveries a worker claims of ``candidates`` (round-robin over company and
    destination, as :meth:`DeliveryRepository.claim_batch` orders them), leased until
    ``lease_until``: up to ``limit``, and no more for one destination than its ``room``
    (``per_destination`` when not listed)."""
    taken: dict[str, int] = {}
    picked: list[Delivery] = []
    for delivery in candidates:
        if len(picked) >= limit:
            break
        destination = delivery.destination
        if taken.get(destination, 0) < room.get(destination, per_destination):
            taken[destination] = taken.get(destination, 0) + 1
            picked.append(delivery.model_copy(update={"lease_until": lease_until}))
    return picked
