"""Idempotency records: one stored result per (company, key kind, idempotency key).

Lifecycle: a request *claims* the key (an ``in_flight`` row with a lease, committed on its own so
that other processes see it), the business transaction *completes* it with the request's result in
the same commit as the change, and a replay within the retention window returns that result. A
lease that runs out (its process died) lets the next request take the key over; completion checks
the claim's token, so a late original cannot overwrite the new owner's result.

What a request is and what its result looks like are the caller's: the core keeps the
*fingerprint* it is given (the same key with another fingerprint is refused) and the
:class:`StoredResult` the caller's recorder makes of the service's result, and hands them back
unread. The HTTP interface's fingerprint and stored responses are the wire layer's
(:mod:`treasury_core.interface.idempotency`).

A request that calls a card provider *binds* the key to the record it wrote before the call (the
intent, the refund, the capture attempt). If the call's outcome is lost, the key is not given back
but left bound and free to take: the retry with the same key resumes that record, with the same
provider key, instead of starting a second charge or refund.

A secret key's answer must never be replayed to a publishable key (it may hold what that key
may not see, such as a manual-capture intent's lookup id), nor the other way round: the two
kinds of key have separate key spaces. A secret key's idempotency key is stored as given, so
records stored before the split keep replaying to the key that can make every call; a
publishable key's is stored as :func:`scoped_key` makes it, a name no presented key can take.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Generic, TypeVar

from treasury_core.companies import KeyKind

R = TypeVar("R")

MAX_KEY_LENGTH = 255
#: An ``Idempotency-Key``: visible ASCII, inner spaces allowed, none at either end (HTTP would
#: strip them). ASCII because HTTP header values are bytes whose encoding is not agreed: a
#: non-ASCII key could be read as another key by a proxy or another server. The OpenAPI
#: document states this pattern; :func:`is_valid_key` enforces it.
KEY_PATTERN = "^[\\x21-\\x7e]([\\x20-\\x7e]*[\\x21-\\x7e])?$"
_KEY = re.compile(KEY_PATTERN)


def is_valid_key(key: str) -> bool:
    """Whether ``key`` is a usable ``Idempotency-Key``: :data:`KEY_PATTERN`, at most
    :data:`MAX_KEY_LENGTH` characters."""
    return len(key) <= MAX_KEY_LENGTH and _KEY.fullmatch(key) is not None


class IdempotencyState(StrEnum):
    """Where a key stands."""

    IN_FLIGHT = "in_flight"
    COMPLETED = "completed"


@dataclass(frozen=True, slots=True)
class StoredResult:
    """What a replay returns, as the caller's recorder made it: a status number and bytes.

    Opaque to the core, which stores it with the key and hands it back unread; the HTTP
    interface keeps a response's status and exact body bytes here.
    """

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
    #: The completed request's result (``None`` while in flight).
    result: StoredResult | None = None
    #: The record the request started (``pi:123``, a refund's id, ``capture:123:txn_…``), bound
    #: in the transaction that wrote it: a retry after an unknown outcome resumes that record
    #: instead of starting another (:func:`~treasury_core.services.idempotency.bind`).
    resource: str | None = None


@dataclass(frozen=True, slots=True)
class IdempotencyTicket(Generic[R]):
    """Proof of a claim; a service completes it inside its business transaction, storing what
    ``recorder`` makes of its result (:func:`~treasury_core.services.idempotency.finish`).

    ``resource`` is the record an earlier request with this key started and left without an
    answer (a provider call whose outcome was lost): the service resumes it.
    """

    company_id: int
    key: str
    token: str
    recorder: Callable[[R], StoredResult]
    resource: str | None = None


def scoped_key(key: str, kind: KeyKind) -> str:
    """The name under which ``key``, presented with a key of ``kind``, is stored.

    A secret key's is ``key`` itself. A publishable key's starts with a control character, which
    a presented key cannot hold (the service refuses keys that are not printable), so no
    presented key names a publishable record; the rest is a digest because the stored name has
    the same 255-character limit as a presented key. No schema change: storage sees a key.
    """
    if kind is KeyKind.SECRET:
        return key
    return f"\x1f{kind.value}:{hashlib.sha256(key.encode()).hexdigest()}"


@dataclass(frozen=True, slots=True)
class Claim:
    """The key is ours until completed or released; ``token`` proves it.

    ``key`` is the stored name (:func:`~treasury_core.idempotency.scoped_key`), not always the
    presented one. ``resource`` is the record an earlier request with this key started and left
    without an answer (see :func:`bind`): the service resumes it.
    """

    company_id: int
    key: str
    token: str
    resource: str | None = None

    def ticket(self, recorder: Callable[[R], StoredResult]) -> IdempotencyTicket[R]:
        """A ticket a service completes in its transaction, storing ``recorder(its result)``."""
        return IdempotencyTicket(self.company_id, self.key, self.token, recorder, self.resource)
