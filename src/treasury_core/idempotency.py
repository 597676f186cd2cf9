"""Idempotency records: one stored response per (company, ``Idempotency-Key``).

Lifecycle: a request *claims* the key (an ``in_flight`` row with a lease, committed on its own so
that other processes see it), the business transaction *completes* it with the response in the
same commit as the change, and a replay within the retention window returns that response. A
lease that runs out (its process died) lets the next request take the key over; completion checks
the claim's token, so a late original cannot overwrite the new owner's result.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Generic, TypeVar

R = TypeVar("R")

MAX_KEY_LENGTH = 255


class IdempotencyState(StrEnum):
    """Where a key stands."""

    IN_FLIGHT = "in_flight"
    COMPLETED = "completed"


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """The response a replay returns: HTTP status and the exact body bytes."""

    status: int
    body: bytes


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """The stored state of one key."""

    company_id: int
    key: str
    fingerprint: str
    state: IdempotencyState
    token: str
    created_at: datetime
    lease_until: datetime
    response: StoredResponse | None = None


@dataclass(frozen=True, slots=True)
class IdempotencyTicket(Generic[R]):
    """Proof of a claim; a service completes it inside its business transaction with ``render``."""

    company_id: int
    key: str
    token: str
    render: Callable[[R], StoredResponse]


def fingerprint(method: str, path: str, body: bytes) -> str:
    """What makes two requests "the same request" for a key: method, path and body bytes."""
    digest = hashlib.sha256()
    for part in (method.upper().encode(), path.encode(), body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()
