"""An HTTP notifier: sends payment method token intent results to their ``callback_url``.

This is the delivery the card-on-file flow needs; the outbox dispatcher with signed webhooks,
retries on the published schedule and the legacy callback belongs to the notifications work and
will take over these events from the outbox. Until then a failed delivery is logged, and the
event stays in the outbox (``GET /api/v1/payment_method_token_intent/{id}`` also answers).
"""

from __future__ import annotations

import logging
from types import TracebackType

import aiohttp

from treasury_core.cards.tokens import TokenizationResult
from treasury_core.events import Event, EventType

log = logging.getLogger("treasury.notifier")

#: The events whose PMTI ``callback_url`` gets the tokenization result.
TOKENIZATION_EVENTS = frozenset(
    {
        EventType.PAYMENT_METHOD_TOKEN_INTENT_SUCCEEDED,
        EventType.PAYMENT_METHOD_TOKEN_INTENT_FAILED,
    }
)


class CallbackFailed(Exception):
    """The receiver did not answer 2xx (the event stays in the outbox)."""


class HttpNotifier:
    """Posts the tokenization result of PMTI events to the PMTI's ``callback_url``.

    Use as an async context manager (it owns one ``aiohttp.ClientSession``). Each post carries
    ``webhook-id`` (the event id), so a receiver can drop a repeat.
    """

    def __init__(self, *, timeout_seconds: float = 10.0) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> HttpNotifier:
        self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def deliver(self, event: Event) -> None:
        """Send ``event`` if it is a tokenization result with a ``callback_url``."""
        if event.type not in TOKENIZATION_EVENTS:
            return
        obj = event.data["object"]
        url = obj.get("callback_url")
        if not url:
            return
        if self._session is None:
            raise RuntimeError("HttpNotifier is used outside its `async with` block")
        body = TokenizationResult.from_event_object(obj).model_dump_json()
        async with self._session.post(
            url,
            data=body,
            headers={"Content-Type": "application/json", "webhook-id": event.id},
            allow_redirects=False,
        ) as response:
            if not 200 <= response.status < 300:
                raise CallbackFailed(f"{url} answered {response.status}")
        log.info("delivered %s to the PMTI callback", event.id)
