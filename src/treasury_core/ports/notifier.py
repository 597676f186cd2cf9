"""The webhook sender port: posts one signed body to one URL (the notifications dispatcher
decides what, where and when; a sender only carries it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable


class DeliveryFailed(Exception):
    """No HTTP answer: a timeout, a refused connection, or a destination refused by policy.

    The message names the host at most, never the path or query (they may carry the
    receiver's own token).
    """


@runtime_checkable
class WebhookSender(Protocol):
    """Posts webhook and callback bodies."""

    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> int:
        """POST ``body`` to ``url`` with ``headers``; the answer's status code.

        Raises :class:`DeliveryFailed` when there is no answer.
        """
        ...
