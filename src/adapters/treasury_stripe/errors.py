"""Stripe's errors in the port's terms: declines as :class:`CardError` with Stripe's decline
code, everything else as :class:`ProviderError` (or a 400 the caller can act on). Stripe's
own messages are never passed on, only its codes.

A failure after which Stripe certainly did nothing is the subclass :class:`ProviderDidNotAct`:
a call every attempt of which was rate limited (429), refused for its key (401, 403) or refused
its connection (:mod:`treasury_stripe.transport` judges each attempt and
:func:`mark_nothing_processed` says so on the error), and a call the open circuit breaker
kept from Stripe (:func:`circuit_open`). When in doubt (a timeout, a reset, a 5xx, an answer
lost) it stays a plain :class:`ProviderError`, as Stripe may have acted.
"""

from __future__ import annotations

import re

import stripe

from treasury_core.errors import (
    CardError,
    InvalidRequestError,
    ProviderDidNotAct,
    ProviderError,
    TreasuryError,
    ValidationFailed,
)

#: Stripe's codes are snake_case words; anything else is not repeated to our callers.
CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")

DECLINE_MESSAGES: dict[str, str] = {
    "card_declined": "Your card was declined",
    "insufficient_funds": "Your card has insufficient funds",
    "expired_card": "Your card has expired",
    "incorrect_cvc": "Your card's security code is incorrect",
    "incorrect_number": "Your card number is incorrect",
    "lost_card": "Your card was declined",
    "stolen_card": "Your card was declined",
    "processing_error": "The card provider could not process your card; try again",
    "authentication_failed": "Your bank did not confirm the payment (3-D Secure failed)",
}


#: Stripe's invalid-request codes that are about the caller's amount, with our message.
_CALLERS_AMOUNT: dict[str, str] = {
    "amount_too_small": "The amount is below the card provider's minimum charge for the currency",
    "amount_too_large": "The amount is above the card provider's maximum charge for the currency",
}


#: Set on a Stripe error whose call Stripe certainly did not process: the SDK's exceptions have
#: no field for it, and only the attempts' transport saw every attempt.
_NOTHING_PROCESSED = "_treasury_nothing_processed"


def mark_nothing_processed(exc: stripe.StripeError) -> None:
    """Say on ``exc`` that Stripe processed none of its call's attempts."""
    setattr(exc, _NOTHING_PROCESSED, True)


def nothing_processed(exc: stripe.StripeError) -> bool:
    """Whether ``exc`` was marked by :func:`mark_nothing_processed`."""
    return getattr(exc, _NOTHING_PROCESSED, False) is True


def unreachable(exc: stripe.StripeError) -> bool:
    """Whether ``exc`` says Stripe cannot be reached or is failing, after the SDK's retries:
    what the circuit breaker counts. A decline or a refused request is Stripe working."""
    status = exc.http_status
    return isinstance(exc, stripe.APIConnectionError) or (status is not None and status >= 500)


def circuit_open() -> ProviderDidNotAct:
    """A call the open circuit breaker refused, without asking Stripe."""
    return ProviderDidNotAct("The card provider is not answering; try again shortly")


def provider_closed() -> ProviderDidNotAct:
    """A call made after the provider was closed, which therefore never reached Stripe."""
    return ProviderDidNotAct("The card provider has been closed")


def _failed(exc: stripe.StripeError, message: str) -> ProviderError:
    if nothing_processed(exc):
        return ProviderDidNotAct(message)
    return ProviderError(message)


def refuse(message: str, failure_reason: str) -> CardError:
    return CardError(message, failure_reason=failure_reason)


def decline(exc: stripe.CardError) -> CardError:
    """Stripe's decline as our CardError: the decline code when Stripe gives a specific one."""
    decline_code = exc.error.decline_code if exc.error is not None else None
    reason = exc.code or "card_declined"
    if decline_code and decline_code != "generic_decline":
        reason = decline_code
    if not CODE.fullmatch(reason):
        reason = "card_declined"
    return refuse(DECLINE_MESSAGES.get(reason, "Your card was declined"), reason)


def translate(exc: stripe.StripeError) -> TreasuryError:
    """A Stripe error as the port's error; the SDK's message is never passed on.

    A rate limit, a connection failure or a refused key is :class:`ProviderDidNotAct` when
    ``exc`` is marked (:func:`mark_nothing_processed`), a plain :class:`ProviderError`
    otherwise.
    """
    if isinstance(exc, stripe.CardError):
        return decline(exc)
    if isinstance(exc, stripe.IdempotencyError):
        # Only authorize reuses a key across calls: the retry of an attempt Stripe may have
        # taken came with other details (another card). Charging them would risk a second
        # charge; the first attempt's outcome is unknown here, so say so.
        return InvalidRequestError(
            "An earlier payment attempt on this intent may have reached the card provider; "
            "retry with the same card and amount",
            code="payment_attempt_in_doubt",
        )
    if isinstance(exc, stripe.RateLimitError):
        return _failed(exc, "The card provider is limiting requests; try again shortly")
    if isinstance(exc, stripe.APIConnectionError):
        return _failed(exc, "The card provider did not answer in time")
    if isinstance(exc, stripe.AuthenticationError | stripe.PermissionError):
        return _failed(exc, "The card provider refused this treasury's API key")
    # Stripe says resource_missing; localstripe only answers 404.
    if isinstance(exc, stripe.InvalidRequestError) and (
        exc.code == "resource_missing" or exc.http_status == 404
    ):
        return refuse("No such charge at the card provider", "unknown_reference")
    if isinstance(exc, stripe.InvalidRequestError) and exc.code in _CALLERS_AMOUNT:
        # The caller's amount, not our request's shape: a 400 they can act on, not a 502.
        return ValidationFailed(_CALLERS_AMOUNT[exc.code], code=exc.code, param="amount")
    code = exc.code if exc.code and CODE.fullmatch(exc.code) else exc.http_status
    return ProviderError(f"The card provider refused the request ({code})")


def authentication_failure(intent: stripe.PaymentIntent) -> CardError:
    """Why a PaymentIntent went back to ``requires_payment_method`` after 3-D Secure: the
    failed authentication, or the decline of a card that passed it."""
    error = getattr(intent, "last_payment_error", None)
    code = getattr(error, "code", None)
    decline_code = getattr(error, "decline_code", None)
    reason = decline_code if decline_code and decline_code != "generic_decline" else code
    if code != _AUTHENTICATION_FAILURE and isinstance(reason, str) and CODE.fullmatch(reason):
        return refuse(DECLINE_MESSAGES.get(reason, "Your card was declined"), reason)
    return refuse(DECLINE_MESSAGES["authentication_failed"], "authentication_failed")


#: Stripe's ``last_payment_error.code`` when the customer failed 3-D Secure.
_AUTHENTICATION_FAILURE = "payment_intent_authentication_failure"
