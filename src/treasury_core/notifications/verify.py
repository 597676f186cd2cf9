"""Checking a delivery on the receiving side (Standard Webhooks, via ``standardwebhooks``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError


class InvalidWebhook(ValueError):
    """The body is not what the sender signed, the signature is not ours, or it is too old."""


def verify_webhook(body: bytes | str, headers: Mapping[str, str], secret: str) -> Any:
    """The decoded JSON body of a delivery, once its signature checks out.

    ``headers`` are the request's (``webhook-id``, ``webhook-timestamp``,
    ``webhook-signature``; any case); ``secret`` is the endpoint's ``whsec_…`` (or the callback
    secret for legacy and PMTI callbacks). A timestamp more than five minutes from the
    receiver's clock is refused, which stops replays of old deliveries. Raises
    :class:`InvalidWebhook`.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        return Webhook(secret).verify(body, lowered)
    except WebhookVerificationError as exc:
        raise InvalidWebhook(str(exc)) from None
    except (UnicodeDecodeError, ValueError):  # not UTF-8, or not JSON once verified
        raise InvalidWebhook("The body is not a JSON document") from None
