"""The HTTP webhook sender: posts webhook and callback bodies with aiohttp.

Unless ``allow_private``, a destination whose host is, or resolves to, a loopback, private,
link-local or otherwise non-public address is refused: a caller must not make the server reach
inside its own network. The check is made on the addresses the connection will use (a resolver
that refuses them), so a name that resolves differently the second time gains nothing.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Mapping
from types import TracebackType
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

from treasury_core.config import TreasuryConfig
from treasury_core.notifications.endpoints import destination_refusal
from treasury_core.ports import DeliveryFailed


class DestinationRefused(DeliveryFailed):
    """The destination is not a public address, and configuration does not allow others."""


def _check_public(address: str, host: str) -> None:
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if not ip.is_global:
        raise DestinationRefused(f"{host} is not a public address")


class _PublicResolver(AbstractResolver):
    """Resolves as usual, then refuses any answer that is not a public address."""

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


@functools.lru_cache(maxsize=1024)  # a few endpoints' URLs, sent to over and over
def _destination(url: str, allow_private: bool) -> tuple[URL, str, str | None]:
    """``url`` parsed (aiohttp takes it as is rather than parsing the string again), its host,
    and why a delivery must not go there, or ``None``.

    aiohttp does not ask the resolver about an address written as one, so those are checked
    here; names are checked by the resolver on what they resolve to, at every connection.
    """
    parsed = URL(url)
    host = parsed.host or ""
    return parsed, host, destination_refusal(host, allow_private=allow_private)


def _not_encodable(host: str) -> str:
    return f"{host} cannot be encoded for DNS (IDNA)"


class HttpSender:
    """A :class:`~treasury_core.ports.WebhookSender` over one ``aiohttp.ClientSession``.

    Use as an async context manager. Redirects are not followed (a receiver answers, it does
    not send the event elsewhere). Connections are kept alive and reused per host and port, up
    to ``connections`` in all and ``connections_per_host`` to one (0: no limit); the worker
    passes its limits on sends in flight, so a send never waits for a connection the pool
    would not open (that wait would count against the timeout).
    """

    def __init__(
        self,
        *,
        allow_private: bool = False,
        timeout_seconds: float = 10.0,
        connections: int = 100,
        connections_per_host: int = 0,
    ) -> None:
        self._allow_private = allow_private
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._connections = connections
        self._connections_per_host = connections_per_host
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def for_config(cls, config: TreasuryConfig) -> HttpSender:
        """The sender a worker of ``config`` uses: its timeout, its private-address rule and
        its limits on sends in flight as the pool's."""
        return cls(
            allow_private=config.private_destinations_allowed,
            timeout_seconds=config.webhook_timeout_seconds,
            connections=config.delivery_concurrency,
            connections_per_host=config.delivery_concurrency_per_destination,
        )

    async def __aenter__(self) -> HttpSender:
        resolver = None if self._allow_private else _PublicResolver()
        connector = aiohttp.TCPConnector(
            resolver=resolver, limit=self._connections, limit_per_host=self._connections_per_host
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

    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> int:
        """POST ``body``; the status code, or :class:`DeliveryFailed` without an answer."""
        if self._session is None:
            raise RuntimeError("HttpSender is used outside its `async with` block")
        try:
            parsed, host, refusal = _destination(url, self._allow_private)
        except UnicodeError:
            raise DeliveryFailed(_not_encodable(urlsplit(url).hostname or "")) from None
        if refusal is not None:
            raise DestinationRefused(refusal)
        try:
            async with self._session.post(
                parsed, data=body, headers=dict(headers), allow_redirects=False
            ) as response:
                # The body is not read: a receiver answers with its status, and a hostile one
                # must not make us download anything.
                return response.status
        except DeliveryFailed:
            raise
        except TimeoutError:
            raise DeliveryFailed(f"{host} did not answer in time") from None
        except UnicodeError:
            # The resolver encodes the name again (stricter than URL parsing: a label over 63
            # characters passes the one and not the other).
            raise DeliveryFailed(_not_encodable(host)) from None
        except (aiohttp.ClientError, OSError) as exc:
            # The host only: a URL's path or query may carry the receiver's own token.
            raise DeliveryFailed(f"{host} could not be reached ({type(exc).__name__})") from None
