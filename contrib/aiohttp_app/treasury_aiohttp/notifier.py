"""An HTTP notifier: sends payment method token intent results to their ``callback_url``.

This is the delivery the card-on-file flow needs; the outbox dispatcher with signed webhooks,
retries on the published schedule and the legacy callback belongs to the notifications work and
will take over these events from the outbox. Until then a failed delivery is logged, and the
event stays in the outbox (``GET /api/v1/payment_method_token_intent/{id}`` also answers).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
from types import TracebackType

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

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


class DestinationRefused(CallbackFailed):
    """The callback's host is not a public address, and configuration does not allow others."""


def _check_public(address: str, host: str) -> None:
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if not ip.is_global:
        raise DestinationRefused(f"{host} is not a public address")


class _PublicResolver(AbstractResolver):
    """Resolves as usual, then refuses any answer that is not a public address.

    Checking what the connection will actually use (not an earlier lookup) is what stops a
    name that resolves differently the second time (DNS rebinding).
    """

    def __init__(self) -> None:
        self._inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        answers = await self._inner.resolve(host, port, family)
        for answer in answers:
            _check_public(answer["host"], host)
        return answers

    async def close(self) -> None:
        await self._inner.close()


class HttpNotifier:
    """Posts the tokenization result of PMTI events to the PMTI's ``callback_url``.

    Use as an async context manager (it owns one ``aiohttp.ClientSession``). Each post carries
    ``webhook-id`` (the event id), so a receiver can drop a repeat. Unless ``allow_private``,
    a callback whose host is (or resolves to) a loopback, private, link-local or otherwise
    non-public address is refused: a caller must not make the server reach inside its network.
    """

    def __init__(self, *, allow_private: bool = False, timeout_seconds: float = 10.0) -> None:
        self._allow_private = allow_private
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> HttpNotifier:
        connector = (
            None if self._allow_private else aiohttp.TCPConnector(resolver=_PublicResolver())
        )
        self._session = aiohttp.ClientSession(timeout=self._timeout, connector=connector)
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
        host = URL(url).host or ""
        if not self._allow_private:
            # aiohttp does not ask the resolver about an address written as one.
            # A name is not an address (ValueError): the resolver checks what it resolves to.
            with contextlib.suppress(ValueError):
                _check_public(host.strip("[]"), host)
        body = TokenizationResult.from_event_object(obj).model_dump_json()
        async with self._session.post(
            url,
            data=body,
            headers={"Content-Type": "application/json", "webhook-id": event.id},
            allow_redirects=False,
        ) as response:
            if not 200 <= response.status < 300:
                # The host only: a callback URL's path or query may carry the receiver's token.
                raise CallbackFailed(f"the callback at {host} answered {response.status}")
        log.info("delivered %s to the PMTI callback", event.id)
