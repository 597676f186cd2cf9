"""The HTTP client the SDK sends through: its own requests-based client, which also notes, per
call, whether Stripe certainly processed none of the call's attempts.

The SDK retries a call (a timeout, a connection failure, a 409, a 5xx) and raises only the
last attempt's error, so that error alone cannot say whether Stripe acted: a connection refused
on the last retry follows an attempt that may have reached Stripe. The client therefore judges
each attempt as it ends. One went unprocessed when:

- its connection was refused (:func:`refused_before_sending`): a refusal comes from
  ``connect()``, before any byte of the request was written;
- Stripe answered 429 (rate limited) or 401/403 (the key refused): Stripe does not process
  such a request.

Anything else (an answer, a timeout, a connection reset, a failure to resolve the name, an
error this module does not know) may have reached Stripe. A call's record says "nothing
processed" only when it made at least one attempt and every one went unprocessed.

The record is per thread: each SDK call runs from start to end on one of the provider's worker
threads, and the client is shared by all of them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import stripe

#: Stripe's answers to a request it did not process: rate limited, the key refused.
UNPROCESSED_STATUSES = frozenset({401, 403, 429})


def refused_before_sending(exc: stripe.APIConnectionError) -> bool:
    """Whether the connection of this attempt was refused, so nothing of it was sent.

    The SDK's requests client raises its error from the requests exception, which holds
    urllib3's, which holds the socket's: a :class:`ConnectionRefusedError` somewhere down that
    chain, and no timeout, is a refusal.
    """
    found = False
    seen: set[int] = set()
    pending: list[BaseException] = [] if exc.__cause__ is None else [exc.__cause__]
    while pending:
        error = pending.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, TimeoutError):
            return False
        found = found or isinstance(error, ConnectionRefusedError)
        inner = [error.__cause__, error.__context__, getattr(error, "reason", None), *error.args]
        pending.extend(e for e in inner if isinstance(e, BaseException))
    return found


@dataclass
class CallRecord:
    """What one SDK call's attempts did (see the module)."""

    attempts: int = 0
    all_unprocessed: bool = True

    @property
    def nothing_processed(self) -> bool:
        """Whether Stripe certainly processed none of the call's attempts."""
        return self.attempts > 0 and self.all_unprocessed


class TrackingRequestsClient(stripe.RequestsClient):
    """The SDK's requests client (``timeout`` seconds per request), noting each attempt in the
    calling thread's :class:`CallRecord` while :meth:`tracking` is open."""

    def __init__(self, *, timeout: float) -> None:
        super().__init__(timeout=timeout)
        self._records = threading.local()

    @contextmanager
    def tracking(self) -> Iterator[CallRecord]:
        """A fresh record for the SDK call this thread makes inside the block."""
        record = CallRecord()
        self._records.current = record
        try:
            yield record
        finally:
            self._records.current = None

    def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None,
        post_data: Any = None,
        *,
        _usage: list[str] | None = None,
    ) -> tuple[Any, int, Mapping[str, str]]:
        """One attempt, as the SDK's client makes it, judged as it ends.

        (``_usage`` and the body's ``Any`` are there because the SDK's base class and its
        requests client declare this method differently; the requests client takes no
        ``_usage``.)
        """
        try:
            answer = super().request(method, url, headers, post_data)
        except stripe.APIConnectionError as exc:
            self._note(unprocessed=refused_before_sending(exc))
            raise
        except BaseException:
            self._note(unprocessed=False)
            raise
        self._note(unprocessed=answer[1] in UNPROCESSED_STATUSES)
        return answer

    def _note(self, *, unprocessed: bool) -> None:
        record: CallRecord | None = getattr(self._records, "current", None)
        if record is not None:
            record.attempts += 1
            record.all_unprocessed = record.all_unprocessed and unprocessed
