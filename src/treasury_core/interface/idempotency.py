"""``Idempotency-Key`` over HTTP: what makes two requests the same, and the answers kept for
replays.

The core claims and completes keys (:class:`~treasury_core.services.idempotency.
IdempotencyService`) without knowing what a request or an answer is. Here the interface says:
a request is its method, path with query and exact body bytes (:func:`fingerprint`); an answer
is kept as its status and exact body bytes (:class:`StoredResponse`), rendered once by a
:class:`ResponseRecorder` in the service's own transaction, so the change and the answer a
retry gets commit together; an answer the service did not store is kept afterwards unless it
says to retry (:func:`keeps_answer`); a replay carries :data:`REPLAYED_HEADER`.

An embedding application's route does what the bundled app's middleware does::

    outcome = await treasury.idempotency.claim(
        company_id, key, fingerprint(method, path_qs, body), kind=principal.kind
    )
    if isinstance(outcome, Replay):
        return outcome.result.status, outcome.result.body  # with REPLAYED_HEADER
    recorder = ResponseRecorder(outcome, render)
    result = await service.create(..., idempotency=recorder.ticket())
    answer = recorder.response(result)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Generic, TypeVar

from pydantic import BaseModel

from treasury_core.idempotency import Claim, IdempotencyTicket, StoredResult

__all__ = [
    "REPLAYED_HEADER",
    "ResponseRecorder",
    "StoredResponse",
    "fingerprint",
    "json_bytes",
    "keeps_answer",
]

R = TypeVar("R")

#: An HTTP answer as kept for replays: its status and the exact body bytes (the core's
#: :class:`~treasury_core.idempotency.StoredResult`, read as HTTP).
StoredResponse = StoredResult

#: The header, and its value, of an answer replayed from a stored response.
REPLAYED_HEADER = ("Idempotent-Replayed", "true")

#: Statuses that give the key back rather than keep the answer: the same request may succeed
#: later (the first one still running, a rate limit), so a retry must be carried out, not told.
_RETRY_STATUSES = frozenset({409, 429})


def fingerprint(method: str, path: str, body: bytes) -> str:
    """What makes two requests "the same request" for a key: method, path and body bytes."""
    digest = hashlib.sha256()
    for part in (method.upper().encode(), path.encode(), body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def keeps_answer(status: int) -> bool:
    """Whether an answer the service did not store itself (a refusal, a call that is not one
    transaction) is kept for the key's retries: yes, except a 409, a 429 and any 5xx."""
    return status < 500 and status not in _RETRY_STATUSES


def json_bytes(model: BaseModel | bytes) -> bytes:
    """A record as JSON bytes (bytes are a record already rendered, such as
    :meth:`PaymentIntent.record_json`)."""
    if isinstance(model, bytes):
        return model
    return model.__pydantic_serializer__.to_json(model)


class ResponseRecorder(Generic[R]):
    """Renders a service result once, for the answer and the idempotency record alike.

    With a ``claim`` (the request holds an ``Idempotency-Key``), :meth:`ticket` hands the
    service a ticket whose recorder stores the rendered answer in the service's own
    transaction. ``render_stored`` renders the stored copy differently (without secrets): the
    answer is then rendered afresh with ``render``, and a replay must complete the stored copy.
    """

    def __init__(
        self,
        claim: Claim | None,
        render: Callable[[R], BaseModel | bytes],
        status: int = 200,
        *,
        render_stored: Callable[[R], BaseModel | bytes] | None = None,
    ) -> None:
        self._claim = claim
        self._render = render
        self._render_stored = render_stored
        self._status = status
        self._stored: StoredResponse | None = None

    def _store(self, result: R) -> StoredResponse:
        render = self._render_stored or self._render
        self._stored = StoredResponse(self._status, json_bytes(render(result)))
        return self._stored

    def ticket(self) -> IdempotencyTicket[R] | None:
        """The ticket for the service call, or ``None`` without a claim."""
        return self._claim.ticket(self._store) if self._claim is not None else None

    @property
    def stored(self) -> bool:
        """Whether the service's transaction stored the answer (nothing is left to keep)."""
        return self._stored is not None

    def response(self, result: R) -> StoredResponse:
        """The answer for ``result``: the exact bytes stored for replays, if they are the same."""
        if self._stored is not None and self._render_stored is None:
            return self._stored
        return StoredResponse(self._status, json_bytes(self._render(result)))
