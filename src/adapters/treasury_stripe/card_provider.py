"""The Stripe card provider: one Stripe PaymentIntent per charge, driven by the official SDK.

==============================  ===============================================================
port call                       Stripe calls
==============================  ===============================================================
``authorize``                   ``POST /v1/payment_methods`` (the raw card), then
                                ``POST /v1/payment_intents`` with ``confirm=true`` and
                                ``capture_method`` ``manual`` (a hold) or ``automatic``, and
                                ``return_url`` when the service passes one
``capture``                     ``GET`` the intent, then ``POST …/capture`` with
                                ``amount_to_capture``
``void``                        ``GET`` the intent, then ``POST …/cancel``
``refund``                      ``GET`` the intent and its charge, then ``POST /v1/refunds``
``complete_action``             ``GET`` the intent (Stripe's 3-D Secure verdict); ``POST …/cancel``
                                after a failed authentication
``save_card`` (card on file)    ``GET /v1/customers?email=…`` (else ``POST /v1/customers``),
                                ``POST /v1/payment_methods``, then ``POST …/attach`` to the
                                Customer (where Stripe checks the card)
``authorize_saved``             ``GET`` the PaymentMethod (for its Customer), then
                                ``POST /v1/payment_intents`` with ``customer``,
                                ``off_session=true`` and ``confirm=true``
``find_charge`` (lookups)       ``GET /v1/payment_intents/search`` by the metadata
                                ``treasury_attempt``
``find_refund``                 ``GET /v1/refunds?payment_intent=…``, every page, matched by
                                the metadata ``treasury_refund_key``
``recent_charges``              ``GET /v1/payment_intents?created[gte]=…``, every page
==============================  ===============================================================

Amounts arrive in ISO 4217 minor units and are sent in Stripe's
(:func:`treasury_stripe.amounts.to_stripe_amount`).

The reference of a charge is the PaymentIntent's id (``pi_…``); a refund's is the Refund's id
(``re_…``). Stripe keeps the state, so the reference never changes. A saved card's reference
is its PaymentMethod's id (``pm_…``): saved cards live at Stripe, one Customer per e-mail, and
the treasury's vault holds none of their numbers.

Raw card numbers reach Stripe only through ``POST /v1/payment_methods``, which real Stripe
accepts from merchants it has cleared to send raw card data (PCI DSS scope); everyone else
collects cards with Stripe.js. The card number and CVC are never logged and never appear in a
message: Stripe's own error messages are not passed on, only its codes, and the SDK's DEBUG
records on the ``stripe`` logger, which hold the form-encoded request bodies, are dropped by a
filter on that logger. (``STRIPE_LOG=debug`` or ``stripe.log = "debug"`` makes the SDK print
them to stderr besides, outside logging: never set either in production.)

Every mutating call carries an idempotency key, and the SDK retries timeouts, connection
failures and Stripe's server errors with that same key. Each key is made from the service's
key for the record the call is about (keyed calls, ``keyed_calls_supported()``): ``authorize``
from the attempt key (``treasury-authorize-{attempt_key}``), ``capture``, ``void`` and
``refund`` from their ``key`` (``treasury-capture-…``, ``treasury-cancel-…``,
``treasury-refund-…``). So when every SDK retry failed too and the service calls again about
the same record, Stripe answers with its first outcome rather than charging or refunding a
second time (for 24 hours, the life of Stripe's keys). Called without a key (a caller that
keeps none), a capture, cancel or refund gets a fresh one: only the SDK's retries share it.

What a call makes names its record: a PaymentIntent's metadata holds ``treasury_company``,
``treasury_intent`` (the :class:`~treasury_core.ports.card_provider.CallOwner`) and
``treasury_attempt``; a Refund's ``treasury_company``, ``treasury_intent``,
``treasury_refund`` and ``treasury_refund_key``. The lookups (``lookups_supported()``) read
them back, so that a call whose answer was lost is found at Stripe: :meth:`find_charge` by
Stripe's Search API, which lags writes (under a minute, more during Stripe's incidents), so a
``None`` just after the call may be a miss that a later question corrects; :meth:`find_refund`
and :meth:`recent_charges` by Stripe's lists, which do not lag. Webhook events carry the same
metadata into :attr:`~treasury_core.ports.card_provider.CardProviderEvent.owner`.
Stripe's errors are translated here, at the boundary: a decline is a
:class:`~treasury_core.errors.CardError` whose ``failure_reason`` is Stripe's decline code;
timeouts, rate limits, refused credentials and anything unexpected are
:class:`~treasury_core.errors.ProviderError` (its subclass ``ProviderDidNotAct`` when Stripe
certainly did nothing). No ``stripe`` exception leaves this module.

The SDK's calls are blocking and run on the provider's own worker threads (a
``ThreadPoolExecutor`` of ``max_threads``, 32 by default), never on asyncio's default executor,
which the rest of the process shares: slow Stripe calls then take only the provider's threads,
and other work, another provider's calls included, goes on. (The SDK's async client keeps one
aiohttp session bound to the event loop of its first call, and an embedding application may
call a provider from more than one loop.) Each HTTP request may take ``timeout_seconds``. A
circuit breaker (:mod:`treasury_stripe.breaker`) counts calls that found Stripe unreachable or
failing (connection failures, timeouts, 5xx, after the SDK's retries): after
``breaker_failures`` in a row, calls fail at once for ``breaker_cooldown_seconds`` with
:class:`~treasury_core.errors.ProviderDidNotAct`, then one trial call decides whether it closes.
A failure after which Stripe certainly did nothing (a 429, a refused key, a refused connection,
on every attempt; :mod:`treasury_stripe.transport`) is ``ProviderDidNotAct`` too. :meth:`close`
releases the threads; :meth:`treasury_core.Treasury.close` calls it.

3-D Secure: a PaymentIntent Stripe leaves ``requires_action`` is answered ``requires_action``
with its id as the reference. Confirmed with a ``return_url`` (passed when the server knows its
public address), Stripe's ``next_action`` is ``redirect_to_url``: its URL is the result's
``action_url``, where the customer authenticates and from where Stripe sends them back to the
``return_url``. ``complete_action`` reads the PaymentIntent for Stripe's verdict:
``requires_capture`` is authorized, ``succeeded`` captured, ``requires_payment_method`` a failed
authentication (or a decline after it), ``canceled`` refused, and ``requires_action`` still
waiting for the customer.

Webhooks: with a signing secret (``whsec_…``), :meth:`StripeCardProvider.parse_event` verifies
a delivery's ``Stripe-Signature`` with the SDK and :func:`treasury_stripe.events.stripe_event`
reads the event into the port's
:class:`~treasury_core.ports.card_provider.CardProviderEvent`; Stripe's JSON goes no
further. Nothing is asked of Stripe to read an event.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TypeVar

import stripe
from stripe.params import (
    CustomerCreateParams,
    PaymentIntentCreateParams,
    PaymentMethodCreateParamsCard,
    RefundCreateParams,
)

from treasury_core.cards.numbers import brand_of
from treasury_core.errors import (
    CardError,
    InvalidRequestError,
    ProviderError,
    TreasuryError,
    ValidationFailed,
)
from treasury_core.ports import Clock
from treasury_core.ports.card_provider import (
    BadProviderEvent,
    CallOwner,
    CardData,
    CardProviderBase,
    CardProviderEvent,
    CardProviderResult,
    CardProviderStatus,
    HoldGone,
    ProviderCharge,
    SavedCardReference,
    refuse_unusable_card,
)
from treasury_stripe.amounts import check_amount, from_stripe_amount, to_stripe_amount
from treasury_stripe.breaker import COOLDOWN_SECONDS, FAILURE_THRESHOLD, Admission, CircuitBreaker
from treasury_stripe.errors import (
    authentication_failure,
    circuit_open,
    mark_nothing_processed,
    provider_closed,
    refuse,
    translate,
    unreachable,
)
from treasury_stripe.events import (
    CALL_KEY,
    METADATA_ATTEMPT,
    METADATA_REFUND_KEY,
    REFERENCE,
    owner_from_metadata,
    owner_metadata,
    verified_event,
)
from treasury_stripe.transport import TrackingRequestsClient

T = TypeVar("T")

log = logging.getLogger("treasury.stripe")

#: Retries of one call on a timeout, a connection failure, a conflict or a Stripe server error,
#: with its same idempotency key (the SDK's own retry, with backoff).
MAX_NETWORK_RETRIES = 2
#: Seconds one HTTP request to Stripe may take before it counts as a timeout.
REQUEST_TIMEOUT_SECONDS = 30.0
#: Worker threads of one provider: as many Stripe calls may be in flight at once, so a handful
#: of slow ones leave room for the rest.
MAX_THREADS = 32

#: A saved card's reference: a PaymentMethod's id (checked before it is put in a URL path).
_SAVED_CARD = re.compile(r"pm_[A-Za-z0-9]{1,200}")
_SAVED_CARD_GONE = "The saved card no longer exists at the card provider; save the card again"


#: Stripe's codes are snake_case words; anything else is not repeated to our callers.
class _NoRequestBodies(logging.Filter):
    """Drops the SDK's DEBUG records: they carry request and response bodies, and a
    PaymentMethod create's body is the card number and CVC, form-encoded. Its INFO records
    (method, path, status) pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.INFO


_NO_REQUEST_BODIES = _NoRequestBodies()


def _silence_request_bodies() -> None:
    # On the SDK's own logger, where it logs (not a handler of ours): whatever handlers and
    # levels the application set up, a root logger at DEBUG included, never see the bodies.
    logger = logging.getLogger("stripe")
    if _NO_REQUEST_BODIES not in logger.filters:
        logger.addFilter(_NO_REQUEST_BODIES)


def _action_url(intent: stripe.PaymentIntent) -> str | None:
    """Stripe's page for the customer's 3-D Secure, when its ``next_action`` names one.

    Only ``redirect_to_url`` does (a confirmation with a ``return_url``); ``use_stripe_sdk``
    needs Stripe.js. Only an ``http(s)`` URL is passed on: it becomes a link on our page.
    """
    action = getattr(intent, "next_action", None)
    if action is None or action.type != "redirect_to_url" or action.redirect_to_url is None:
        return None
    url = action.redirect_to_url.url
    if isinstance(url, str) and url.startswith(("https://", "http://")):
        return url
    return None


def _metadata(obj: object) -> Mapping[str, object]:
    """A Stripe object's metadata (an empty mapping when it has none)."""
    metadata = getattr(obj, "metadata", None)
    if isinstance(metadata, stripe.StripeObject):  # not a Mapping in the SDK
        return metadata.to_dict(recursive=False)
    return metadata if isinstance(metadata, Mapping) else {}


def _card_of(intent: stripe.PaymentIntent) -> tuple[str | None, str | None]:
    """The brand and last4 of the PaymentIntent's card, when its PaymentMethod was expanded."""
    method = getattr(intent, "payment_method", None)
    card = getattr(method, "card", None) if not isinstance(method, str) else None
    if card is None:
        return None, None
    brand = card.brand if isinstance(card.brand, str) and _BRAND.fullmatch(card.brand) else None
    last4 = card.last4 if isinstance(card.last4, str) and _LAST4.fullmatch(card.last4) else None
    return brand, last4


def _check_reference(reference: str) -> None:
    # Checked before any call: a reference is put in a URL path.
    if not (isinstance(reference, str) and REFERENCE.fullmatch(reference)):
        raise refuse("No such charge at the card provider", "unknown_reference")


def _charge_metadata(attempt_key: str | None, owner: CallOwner | None) -> dict[str, str]:
    """A PaymentIntent's metadata: its owner and the attempt key (which ``find_charge``
    searches for, so only one fit for a search query is set)."""
    metadata = owner_metadata(owner)
    if attempt_key is not None and CALL_KEY.fullmatch(attempt_key):
        metadata[METADATA_ATTEMPT] = attempt_key
    return metadata


def _charged(reference: str, capture: bool, brand: str, last4: str) -> CardProviderResult:
    status = CardProviderStatus.CAPTURED if capture else CardProviderStatus.AUTHORIZED
    return CardProviderResult(reference=reference, status=status, brand=brand, last4=last4)


def _key(operation: str, key: str | None = None) -> str:
    """The idempotency key of one logical call: made from the service's ``key`` when it
    passes one (the same for every call about the same record), else fresh (the SDK reuses it
    on its own retries only)."""
    return f"treasury-{operation}-{key or uuid.uuid4().hex}"


def _check_key(key: str, name: str) -> None:
    # Checked before it is set as metadata or put in a search query.
    if not (isinstance(key, str) and CALL_KEY.fullmatch(key)):
        raise ValueError(f"{name} is 1 to 200 letters, digits, '-' or '_', not {key!r}")


#: What a PaymentIntent's status says of a charge (``find_charge``, ``recent_charges``):
#: ``requires_payment_method`` and ``requires_confirmation`` hold nothing (a decline, a failed
#: authentication, a charge never confirmed) and are absent, as is ``processing``, which
#: Stripe has not decided yet.
_CHARGE_STATUSES: dict[str, CardProviderStatus] = {
    "requires_action": CardProviderStatus.REQUIRES_ACTION,
    "requires_capture": CardProviderStatus.AUTHORIZED,
    "succeeded": CardProviderStatus.CAPTURED,
    "canceled": CardProviderStatus.VOIDED,
}
_HOLDS_NOTHING = frozenset({"requires_payment_method", "requires_confirmation"})

#: What a Refund's status says (``find_refund``).
_REFUND_STATUSES: dict[str, CardProviderStatus] = {
    "succeeded": CardProviderStatus.REFUNDED,
    "pending": CardProviderStatus.REFUND_PENDING,
    "requires_action": CardProviderStatus.REFUND_PENDING,
    "failed": CardProviderStatus.REFUND_FAILED,
    "canceled": CardProviderStatus.REFUND_FAILED,
}
#: A last4 as it may be shown: four digits.
_LAST4 = re.compile(r"[0-9]{4}")
_BRAND = re.compile(r"[a-z_]{1,32}")


class StripeCardProvider(CardProviderBase):
    """A card provider backed by Stripe PaymentIntents (see the module for the mapping)."""

    def __init__(
        self,
        api_key: str,
        clock: Clock,
        *,
        api_base: str | None = None,
        max_network_retries: int = MAX_NETWORK_RETRIES,
        timeout_seconds: float = REQUEST_TIMEOUT_SECONDS,
        webhook_secret: str | None = None,
        max_threads: int = MAX_THREADS,
        breaker_failures: int = FAILURE_THRESHOLD,
        breaker_cooldown_seconds: float = COOLDOWN_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``timeout_seconds`` bounds each HTTP request (connecting, then each read);
        ``max_threads`` is how many Stripe calls may be in flight at once (more wait their
        turn); ``breaker_failures`` calls in a row that find Stripe unreachable open the
        circuit breaker for ``breaker_cooldown_seconds`` of ``monotonic`` time."""
        if not timeout_seconds > 0:
            raise ValueError("timeout_seconds must be more than 0")
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        _silence_request_bodies()
        self._clock = clock
        self._webhook_secret = webhook_secret
        self._http = TrackingRequestsClient(timeout=timeout_seconds)
        self._client = stripe.StripeClient(
            api_key,
            base_addresses={"api": api_base} if api_base else {},
            max_network_retries=max_network_retries,
            http_client=self._http,
        )
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_threads, thread_name_prefix="treasury-stripe"
        )
        self._breaker = CircuitBreaker(
            failure_threshold=breaker_failures,
            cooldown_seconds=breaker_cooldown_seconds,
            monotonic=monotonic,
        )
        self._closed = threading.Event()

    def close(self) -> None:
        """Release the provider's threads; harmless to repeat. Calls under way finish on their
        threads; calls still waiting for one, and later calls, fail with
        :class:`~treasury_core.errors.ProviderDidNotAct` without reaching Stripe. Does not
        wait, so it may be called from the event loop."""
        self._closed.set()
        self._pool.shutdown(wait=False)

    def manual_capture_supported(self) -> bool:
        """Holds (``capture_method=manual``) can be captured later."""
        return True

    def refunds_supported(self) -> bool:
        """Captured charges can be refunded."""
        return True

    def partial_refunds_supported(self) -> bool:
        """A refund may be for part of the captured amount."""
        return True

    def verification_supported(self) -> bool:
        """Off: cards are saved at Stripe, which checks them as it saves them."""
        return False

    async def _call(self, call: Callable[[], T]) -> T:
        """``call`` (one SDK call) through :meth:`_run`, Stripe's errors translated."""
        try:
            return await self._run(call)
        except stripe.StripeError as exc:
            raise translate(exc) from None

    async def _run(self, call: Callable[[], T]) -> T:
        """``call`` on the provider's own threads, if the circuit breaker lets it through.

        Stripe's errors come out untranslated, marked when Stripe certainly processed none of
        the call's attempts. The outcome is recorded on the worker thread, so a call whose
        caller stopped waiting still counts; one cancelled before a thread took it is
        abandoned. Raises :class:`~treasury_core.errors.ProviderDidNotAct` when the breaker
        is open or the provider closed.
        """
        admission = self._breaker.admit()
        if admission is None:
            raise circuit_open()
        # As asyncio.to_thread does: the call sees the caller's context variables (log fields).
        context = contextvars.copy_context()
        try:
            future = self._pool.submit(context.run, self._attempt, call, admission)
        except RuntimeError:  # the pool is shut down
            self._breaker.abandon(admission)
            raise provider_closed() from None
        future.add_done_callback(lambda done: self._abandon_cancelled(done, admission))
        return await asyncio.wrap_future(future)

    def _attempt(self, call: Callable[[], T], admission: Admission) -> T:
        """On a worker thread: ``call``, its outcome recorded with the breaker."""
        if self._closed.is_set():
            self._breaker.abandon(admission)
            raise provider_closed()
        with self._http.tracking() as record:
            try:
                result = call()
            except stripe.StripeError as exc:
                self._breaker.record(admission, failed=unreachable(exc))
                if record.nothing_processed:
                    mark_nothing_processed(exc)
                raise
            except BaseException:
                # Not Stripe's answer (a bug here, say): no sign that Stripe is down.
                self._breaker.record(admission, failed=False)
                raise
        self._breaker.record(admission, failed=False)
        return result

    def _abandon_cancelled(self, done: concurrent.futures.Future[T], admission: Admission) -> None:
        if done.cancelled():
            self._breaker.abandon(admission)

    async def _intent(self, reference: str) -> stripe.PaymentIntent:
        _check_reference(reference)
        return await self._call(lambda: self._client.v1.payment_intents.retrieve(reference))

    def three_d_secure_supported(self) -> bool:
        """Stripe's ``requires_action`` is the challenge; :meth:`complete_action` reads its
        verdict."""
        return True

    def return_urls_supported(self) -> bool:
        """``authorize`` takes ``return_url``, sent to Stripe with the confirmation."""
        return True

    async def complete_action(self, reference: str) -> CardProviderResult:
        """Stripe's verdict on the customer's 3-D Secure, read from the PaymentIntent.

        Authorized (``requires_capture``: a hold, no money moved) or captured (``succeeded``:
        money moved when the customer passed). Still ``requires_action`` answers
        ``requires_action``: the customer has not finished at Stripe, nothing changed. A failed
        authentication (Stripe leaves the intent ``requires_payment_method``) is a
        :class:`CardError` ``authentication_failed``, or Stripe's decline when the card was
        declined after it; the PaymentIntent is then cancelled, as nothing will retry it.
        A cancelled one is refused (``payment_canceled``).
        """
        intent = await self._intent(reference)
        status = intent.status
        if status == "requires_capture":
            return CardProviderResult(reference=reference, status=CardProviderStatus.AUTHORIZED)
        if status == "succeeded":
            return CardProviderResult(reference=reference, status=CardProviderStatus.CAPTURED)
        if status == "requires_action":
            return CardProviderResult(
                reference=reference,
                status=CardProviderStatus.REQUIRES_ACTION,
                action_url=_action_url(intent),
            )
        if status == "canceled":
            raise refuse("The payment was cancelled at the card provider", "payment_canceled")
        if status == "requires_payment_method":
            failure = authentication_failure(intent)
            try:
                await self._cancel(reference)
            except TreasuryError:
                # Best effort: an intent waiting for a payment method holds no money.
                log.warning("could not cancel Stripe PaymentIntent %s after 3-D Secure", reference)
            raise failure
        raise ProviderError(f"The card provider left the charge {status}")

    def attempt_keys_supported(self) -> bool:
        """``authorize`` keys its Stripe requests by the service's attempt key."""
        return True

    def keyed_calls_supported(self) -> bool:
        """Captures, cancels and refunds take the service's ``key`` (their idempotency keys
        are made from it), and charges and refunds its ``owner`` (set as metadata)."""
        return True

    def lookups_supported(self) -> bool:
        """:meth:`find_charge` (Stripe's search by metadata), :meth:`find_refund` and
        :meth:`recent_charges` ask Stripe what an earlier call did."""
        return True

    async def authorize(
        self,
        card: CardData,
        amount: int,
        currency: str,
        *,
        capture: bool,
        attempt_key: str | None = None,
        owner: CallOwner | None = None,
        return_url: str | None = None,
    ) -> CardProviderResult:
        """Hold ``amount`` (``capture=False``, no money moves) or charge it (**moves money**).

        With ``attempt_key`` both requests are keyed by it, so a retry of an attempt whose
        answer was lost gets Stripe's first answer (the same PaymentIntent) instead of a second
        charge; a retry with another card under the same key is refused
        (``payment_attempt_in_doubt``). Without one the keys are fresh: only the SDK's own
        retries are covered. The PaymentIntent's metadata names the attempt key
        (``treasury_attempt``, which :meth:`find_charge` searches for) and ``owner``
        (``treasury_company``, ``treasury_intent``).

        A card Stripe wants authenticated answers ``requires_action`` (nothing held yet); with
        ``return_url`` its ``action_url`` is Stripe's page for the customer.
        """
        check_amount(amount)
        stripe_amount = to_stripe_amount(amount, currency)
        number = refuse_unusable_card(card, self._clock.now().date())
        key = _key("authorize", attempt_key)
        method = await self._create_method(card, number, f"{key}-pm")
        return await self._charge(
            method.id,
            stripe_amount,
            currency,
            capture=capture,
            key=key,
            brand=brand_of(number),
            last4=number[-4:],
            metadata=_charge_metadata(attempt_key, owner),
            return_url=return_url,
        )

    async def _create_method(self, card: CardData, number: str, key: str) -> stripe.PaymentMethod:
        """A Stripe PaymentMethod of ``card`` (``number`` is its checked digits)."""
        details = PaymentMethodCreateParamsCard(
            number=number, exp_month=card.expiry_month, exp_year=card.expiry_year
        )
        if card.cvc is not None:
            details["cvc"] = card.cvc
        return await self._call(
            lambda: self._client.v1.payment_methods.create(
                params={"type": "card", "card": details}, options={"idempotency_key": key}
            )
        )

    async def _charge(
        self,
        method: str,
        amount: int,
        currency: str,
        *,
        capture: bool,
        key: str,
        brand: str,
        last4: str,
        metadata: dict[str, str],
        customer: str | None = None,
        return_url: str | None = None,
    ) -> CardProviderResult:
        """Create and confirm a PaymentIntent of ``amount`` (Stripe's units) on the
        PaymentMethod ``method``: a hold (``capture=False``), a charge (``capture=True``,
        **moves money**), or ``requires_action`` when Stripe wants the customer authenticated
        first. With ``customer`` (a saved card's) the charge is off session; ``metadata``
        (none when empty) is set on the PaymentIntent."""
        params: PaymentIntentCreateParams = {
            "amount": amount,
            "currency": currency.lower(),
            "payment_method": method,
            "payment_method_types": ["card"],
            "capture_method": "automatic" if capture else "manual",
            "confirm": True,
        }
        if metadata:
            params["metadata"] = metadata
        if return_url is not None:
            # Where Stripe's 3-D Secure page sends the customer back; with it, Stripe's
            # next_action is a page to redirect to rather than one for Stripe.js.
            params["return_url"] = return_url
        if customer is not None:
            params["customer"] = customer
            params["off_session"] = True
        intent = await self._call(
            lambda: self._client.v1.payment_intents.create(
                params=params, options={"idempotency_key": key}
            )
        )
        if intent.status == "requires_action":
            return CardProviderResult(
                reference=intent.id,
                status=CardProviderStatus.REQUIRES_ACTION,
                brand=brand,
                last4=last4,
                action_url=_action_url(intent),
            )
        expected = "succeeded" if capture else "requires_capture"
        if intent.status != expected:
            # Nothing records this PaymentIntent, so nothing would ever release it: cancel it
            # first (best effort; Stripe refuses to cancel one that is processing, say).
            try:
                await self._cancel(intent.id)
            except TreasuryError:
                log.warning(
                    "could not cancel Stripe PaymentIntent %s left %s", intent.id, intent.status
                )
            raise ProviderError(f"The card provider left the charge {intent.status}")
        return _charged(intent.id, capture, brand, last4)

    async def capture(
        self, reference: str, amount: int, *, key: str | None = None
    ) -> CardProviderResult:
        """Capture up to the held amount. **Moves money.**

        With ``key`` (the service's, one per capture attempt) the request's idempotency key is
        ``treasury-capture-{key}``, so a repeated capture gets Stripe's first answer; without
        one it is fresh. The intent is read first, so a hold Stripe cancelled (an expired
        authorization) is :class:`HoldGone` and a second capture of another amount
        ``already_captured``, from Stripe's state rather than from its error messages. A capture
        of an intent Stripe already captured for exactly ``amount`` succeeds: it is the retry of
        a capture whose answer was lost.
        """
        if key is not None:
            _check_key(key, "key")
        intent = await self._intent(reference)
        check_amount(amount)
        amount = to_stripe_amount(amount, intent.currency)  # compared with Stripe's amounts
        if await self._captured_already(intent, amount):
            return CardProviderResult(reference=reference, status=CardProviderStatus.CAPTURED)
        self._check_capturable(intent)
        # localstripe has no amount_capturable; a hold's capturable amount is its amount there.
        capturable = getattr(intent, "amount_capturable", None) or intent.amount
        if amount > capturable:
            raise refuse("The capture exceeds the authorized amount", "amount_too_large")
        try:
            captured = await self._run(
                lambda: self._client.v1.payment_intents.capture(
                    reference,
                    params={"amount_to_capture": amount},
                    # Never made from the reference alone: Stripe keeps a declined capture's
                    # answer under its key for a day, which would refuse every later try. The
                    # service's key is one per attempt (a decline ends it); without one, fresh.
                    options={"idempotency_key": _key("capture", key)},
                )
            )
        except stripe.InvalidRequestError as exc:
            # The hold changed between the read and the capture (it expired, or a retry of this
            # capture got there first): say why.
            now = await self._intent(reference)
            if await self._captured_already(now, amount):
                return CardProviderResult(reference=reference, status=CardProviderStatus.CAPTURED)
            self._check_capturable(now)
            raise translate(exc) from None
        except stripe.StripeError as exc:
            raise translate(exc) from None
        if captured.status != "succeeded":
            raise ProviderError(f"The card provider left the capture {captured.status}")
        return CardProviderResult(reference=reference, status=CardProviderStatus.CAPTURED)

    async def _captured_already(self, intent: stripe.PaymentIntent, amount: int) -> bool:
        """Whether ``intent`` was captured for exactly ``amount`` (in Stripe's units).

        The service only captures an intent it holds as authorized, so such an intent is a
        capture whose answer was lost (every SDK retry failed): Stripe has the money, and
        refusing would leave the intent authorized until its expiry released the ledger's
        hold. Another amount is a different capture and is refused as ``already_captured``.
        """
        if intent.status != "succeeded":
            return False
        received = getattr(intent, "amount_received", None)
        if received is None:
            # localstripe has no amount_received: what the charge kept of its amount. No
            # refund can have been made yet, as the service refunds only captured intents.
            charge = intent.latest_charge
            if charge is None:
                return False
            if isinstance(charge, str):
                charge_id = charge
                charge = await self._call(lambda: self._client.v1.charges.retrieve(charge_id))
            received = charge.amount - charge.amount_refunded
        return bool(received == amount)

    @staticmethod
    def _check_capturable(intent: stripe.PaymentIntent) -> None:
        if intent.status == "canceled":
            raise HoldGone()
        if intent.status == "succeeded":
            raise refuse("The charge has already been captured", "already_captured")
        if intent.status == "requires_action":
            raise refuse("The customer has not passed 3-D Secure", "authentication_required")
        if intent.status != "requires_capture":
            raise refuse("The charge holds nothing to capture", "charge_not_authorized")

    async def void(self, reference: str, *, key: str | None = None) -> CardProviderResult:
        """Release a hold; voiding twice is harmless. Moves no money.

        With ``key`` the cancel's idempotency key is ``treasury-cancel-{key}``; without, fresh.
        """
        if key is not None:
            _check_key(key, "key")
        intent = await self._intent(reference)
        if intent.status == "succeeded":
            raise refuse("The charge has already been captured", "already_captured")
        if intent.status != "canceled":
            await self._cancel(reference, key)
        return CardProviderResult(reference=reference, status=CardProviderStatus.VOIDED)

    async def _cancel(self, reference: str, key: str | None = None) -> None:
        await self._call(
            lambda: self._client.v1.payment_intents.cancel(
                reference, options={"idempotency_key": _key("cancel", key)}
            )
        )

    async def refund(
        self,
        reference: str,
        amount: int,
        *,
        key: str | None = None,
        owner: CallOwner | None = None,
    ) -> CardProviderResult:
        """Return up to the captured, not yet refunded amount to the card. **Moves money.**

        With ``key`` (the service's, one per refund of ours) the request's idempotency key is
        ``treasury-refund-{key}`` and the Refund's metadata names it (``treasury_refund_key``,
        which :meth:`find_refund` matches) and ``owner`` (``treasury_company``,
        ``treasury_intent``, ``treasury_refund``); a repeated refund gets Stripe's first
        answer, and one refused for want of refundable money is answered with the Refund its
        key already made (the retry of a refund whose answer was lost). Without a key, a fresh
        one: two refunds of the same amount are legitimate.
        """
        if key is not None:
            _check_key(key, "key")
        intent = await self._intent(reference)
        if intent.status == "canceled":
            raise refuse("The authorization was voided", "authorization_voided")
        if intent.status != "succeeded" or intent.latest_charge is None:
            raise refuse("The charge has not been captured", "charge_not_captured")
        check_amount(amount)
        try:
            amount = to_stripe_amount(amount, intent.currency)  # compared with Stripe's amounts
        except ValidationFailed as exc:
            # A refusal the service knows how to undo: the refund it reserved fails and gives
            # its amount back (any other error leaves it pending, as if Stripe might have paid).
            raise refuse(exc.message, "amount_not_supported") from None
        charge = intent.latest_charge
        if isinstance(charge, str):
            charge_id = charge
            charge = await self._call(lambda: self._client.v1.charges.retrieve(charge_id))
        # Stripe counts the part of a partial capture it released as refunded, so this is
        # what is left of the money that moved.
        if amount > charge.amount - charge.amount_refunded:
            made = await self.find_refund(reference, key) if key is not None else None
            if made is not None and made.status is not CardProviderStatus.REFUND_FAILED:
                return made
            raise refuse("The refund exceeds the captured amount", "amount_too_large")
        params: RefundCreateParams = {"payment_intent": reference, "amount": amount}
        metadata = owner_metadata(owner)
        if key is not None:
            metadata[METADATA_REFUND_KEY] = key
        if metadata:
            params["metadata"] = metadata
        try:
            refund = await self._call(
                lambda: self._client.v1.refunds.create(
                    params=params, options={"idempotency_key": _key("refund", key)}
                )
            )
        except ValidationFailed as exc:
            # A refusal the service undoes (the reserved refund fails, its amount given back).
            raise refuse(exc.message, exc.code) from None
        if refund.status in ("failed", "canceled"):
            raise refuse("The card provider refused the refund", "refund_failed")
        if refund.status != "succeeded":
            # pending (or requires_action): Stripe finishes it later and says so by a
            # charge.refund.updated / refund.failed event about this refund id.
            return CardProviderResult(reference=refund.id, status=CardProviderStatus.REFUND_PENDING)
        return CardProviderResult(reference=refund.id, status=CardProviderStatus.REFUNDED)

    # --- lookups: what an earlier call did --------------------------------------------------

    async def find_charge(self, attempt_key: str) -> CardProviderResult | None:
        """The PaymentIntent an ``authorize`` or ``authorize_saved`` with ``attempt_key`` made,
        as Stripe holds it now; ``None`` when there is none. Moves no money.

        Stripe's Search API, ``metadata['treasury_attempt']:'{attempt_key}'``: the key is
        checked first (letters, digits, ``-`` and ``_``, else :class:`ValueError`), as it is
        put in the query. Each PaymentIntent found is then read
        (``GET /v1/payment_intents/{id}``) for its state now, as the search's copy of it may lag
        as well. ``requires_action`` (with Stripe's ``action_url``), ``requires_capture``
        (authorized), ``succeeded`` (captured) and ``canceled`` (voided) are answered with the
        card's brand and last4; ``requires_payment_method`` and ``requires_confirmation`` hold
        nothing (declined, failed authentication) and answer ``None``; ``processing`` is not
        decided yet: :class:`ProviderError`, ask again later. Should Stripe hold several (a
        key reused after Stripe forgot it, 24 hours on), the newest that holds something is
        answered and the others are logged.

        Stripe's search lags writes (under a minute, up to an hour during its incidents): a
        ``None`` soon after the call may be a miss, not proof that nothing was made. The
        services ask again later.
        """
        _check_key(attempt_key, "attempt_key")
        query = f"metadata['{METADATA_ATTEMPT}']:'{attempt_key}'"
        try:
            found = await self._call(
                lambda: self._client.v1.payment_intents.search(
                    params={"query": query, "limit": 100}
                )
            )
        except CardError:
            # A 404 of the search itself: an API without Stripe's search (localstripe, on its
            # own). Not an answer about the charge: nobody can tell yet whether it exists.
            raise ProviderError("The card provider cannot search its charges") from None
        intents: list[stripe.PaymentIntent] = []
        for hit in found.data:
            if not REFERENCE.fullmatch(hit.id):
                continue  # put in a URL path next: only a PaymentIntent's id
            intent = await self._with_card(hit.id)
            # Our key in the metadata, not just the search's word for it.
            if _metadata(intent).get(METADATA_ATTEMPT) == attempt_key:
                intents.append(intent)
        if any(pi.status == "processing" for pi in intents):
            raise ProviderError("The card provider has not decided the charge yet (processing)")
        held = sorted(
            (pi for pi in intents if pi.status in _CHARGE_STATUSES),
            key=lambda pi: pi.created,
            reverse=True,
        )
        if not held:
            unknown = [pi.status for pi in intents if pi.status not in _HOLDS_NOTHING]
            if unknown:
                raise ProviderError(f"The card provider left the charge {unknown[0]}")
            return None
        if len(held) > 1:
            log.error(
                "Stripe holds %d PaymentIntents of one attempt key: %s answered, %s left over",
                len(held),
                held[0].id,
                ", ".join(pi.id for pi in held[1:]),
            )
        intent = held[0]
        brand, last4 = _card_of(intent)
        status = _CHARGE_STATUSES[intent.status]
        return CardProviderResult(
            reference=intent.id,
            status=status,
            brand=brand,
            last4=last4,
            action_url=_action_url(intent)
            if status is CardProviderStatus.REQUIRES_ACTION
            else None,
        )

    async def _with_card(self, reference: str) -> stripe.PaymentIntent:
        """The PaymentIntent ``reference`` with its PaymentMethod (for brand and last4)."""
        return await self._call(
            lambda: self._client.v1.payment_intents.retrieve(
                reference, params={"expand": ["payment_method"]}
            )
        )

    async def find_refund(self, reference: str, key: str) -> CardProviderResult | None:
        """The Refund of the PaymentIntent ``reference`` that a ``refund`` with ``key`` made
        (its metadata ``treasury_refund_key``), or ``None``. Moves no money.

        Every Refund of the PaymentIntent is listed (``GET /v1/refunds?payment_intent=``,
        every page): Stripe's lists, unlike its search, are up to date. ``succeeded`` is
        ``refunded``, ``pending`` and ``requires_action`` ``refund_pending``, ``failed`` and
        ``canceled`` ``refund_failed``. A reference that cannot be a PaymentIntent's (checked
        before any call) or that Stripe does not know has no refunds: ``None``.
        """
        _check_key(key, "key")
        if not REFERENCE.fullmatch(reference):
            return None

        def listed() -> list[stripe.Refund]:
            page = self._client.v1.refunds.list(params={"payment_intent": reference, "limit": 100})
            return [
                refund
                for refund in page.auto_paging_iter()
                if _metadata(refund).get(METADATA_REFUND_KEY) == key
            ]

        try:
            made = await self._call(listed)
        except CardError as exc:
            if exc.failure_reason != "unknown_reference":
                raise
            return None
        if not made:
            return None
        # One key makes one Refund; should Stripe hold more (its key forgotten), a live one
        # is what the refund became.
        made.sort(key=lambda refund: refund.status in ("failed", "canceled"))
        refund = made[0]
        status = _REFUND_STATUSES.get(refund.status or "")
        if status is None:
            raise ProviderError(f"The card provider left the refund {refund.status}")
        return CardProviderResult(reference=refund.id, status=status)

    async def recent_charges(self, since: datetime) -> Sequence[ProviderCharge]:
        """Every PaymentIntent Stripe made on or after ``since`` (timezone-aware, else
        :class:`ValueError`) that holds or held something, newest first, for reconciliation.
        Moves no money.

        ``GET /v1/payment_intents?created[gte]=`` (whole seconds, so a few from just before
        ``since`` may be listed too), every page, each intent's charge expanded. Intents that
        hold nothing (``requires_payment_method``, ``requires_confirmation``) or that Stripe
        has not decided (``processing``) are left out. ``owner`` and ``attempt_key`` are read
        from the metadata (``None`` for intents made without us); ``amount_captured`` is
        Stripe's ``amount_received`` (or the charge's captured amount), ``amount_refunded``
        what its charge gave back of it (Stripe counts the released part of a partial capture
        as refunded; it is not counted here). Amounts are ISO 4217 minor units.
        """
        if since.tzinfo is None or since.utcoffset() is None:
            raise ValueError("since must be a timezone-aware datetime")
        created = int(since.timestamp())

        def listed() -> list[stripe.PaymentIntent]:
            page = self._client.v1.payment_intents.list(
                params={
                    "created": {"gte": created},
                    "limit": 100,
                    "expand": ["data.latest_charge"],
                }
            )
            return list(page.auto_paging_iter())

        charges: list[ProviderCharge] = []
        for intent in await self._call(listed):
            status = _CHARGE_STATUSES.get(intent.status)
            if status is None:
                if intent.status not in _HOLDS_NOTHING:
                    log.info("Stripe PaymentIntent %s left out: %s", intent.id, intent.status)
                continue
            charges.append(await self._provider_charge(intent, status))
        charges.sort(key=lambda charge: charge.created_at, reverse=True)
        return charges

    async def _provider_charge(
        self, intent: stripe.PaymentIntent, status: CardProviderStatus
    ) -> ProviderCharge:
        currency = intent.currency.upper()
        charge = intent.latest_charge
        if isinstance(charge, str):
            charge_id = charge
            charge = await self._call(lambda: self._client.v1.charges.retrieve(charge_id))
        captured = refunded = 0
        if status is CardProviderStatus.CAPTURED:
            received = getattr(intent, "amount_received", None)
            if received is None and charge is not None:
                # localstripe has neither amount_received nor the charge's amount_captured.
                received = getattr(charge, "amount_captured", None) or charge.amount
            captured = received or 0
            if charge is not None:
                released = max(0, charge.amount - captured)
                refunded = max(0, charge.amount_refunded - released)
        metadata = _metadata(intent)
        attempt = metadata.get(METADATA_ATTEMPT)
        return ProviderCharge(
            reference=intent.id,
            owner=owner_from_metadata(metadata),
            attempt_key=attempt
            if isinstance(attempt, str) and CALL_KEY.fullmatch(attempt)
            else None,
            status=status,
            amount=from_stripe_amount(intent.amount, currency),
            currency=currency,
            amount_captured=from_stripe_amount(captured, currency),
            amount_refunded=from_stripe_amount(refunded, currency),
            created_at=datetime.fromtimestamp(intent.created, UTC),
        )

    # --- card on file: a PaymentMethod attached to a Customer ---------------------------------

    def saved_cards_supported(self) -> bool:
        """Saved cards are kept at Stripe, as PaymentMethods attached to Customers."""
        return True

    async def save_card(
        self, card: CardData, *, customer_email: str | None, key: str
    ) -> SavedCardReference:
        """Keep ``card`` at Stripe: a PaymentMethod attached to the e-mail's Customer. Moves no
        money.

        The Customer is the first one Stripe lists with exactly ``customer_email``, else a new
        one with it; without an e-mail, a new Customer of its own. Attaching is where Stripe
        checks the card, so a card it declines is a :class:`CardError` and stays unattached.
        Every request is keyed by ``key``: a repeated save makes no second PaymentMethod, and
        one with other details under the same key is refused (``payment_attempt_in_doubt``).
        """
        number = refuse_unusable_card(card, self._clock.now().date())
        customer = await self._customer(customer_email, f"treasury-save-{key}-customer")
        try:
            method = await self._create_method(card, number, f"treasury-save-{key}-pm")
        except InvalidRequestError as exc:
            if exc.code != "payment_attempt_in_doubt":
                raise
            # The retry of a saving whose answer was lost, with other details of the same card
            # (a retyped expiry or CVC): Stripe may hold the first, so ask for it again.
            raise InvalidRequestError(
                "An earlier submission of this card may have reached the card provider; "
                "submit the same card details again",
                code="payment_attempt_in_doubt",
            ) from None
        await self._call(
            lambda: self._client.v1.payment_methods.attach(
                method.id,
                params={"customer": customer},
                options={"idempotency_key": f"treasury-save-{key}-attach"},
            )
        )
        return SavedCardReference(
            reference=method.id,
            brand=brand_of(number),
            last4=number[-4:],
            expiry_month=card.expiry_month,
            expiry_year=card.expiry_year,
        )

    async def _customer(self, email: str | None, key: str) -> str:
        """The id of the Customer to keep a card of ``email`` on (see :meth:`save_card`)."""
        if email is not None:
            found = await self._call(
                lambda: self._client.v1.customers.list(params={"email": email, "limit": 1})
            )
            if found.data:
                return found.data[0].id
        params: CustomerCreateParams = {} if email is None else {"email": email}
        created = await self._call(
            lambda: self._client.v1.customers.create(
                params=params, options={"idempotency_key": key}
            )
        )
        return created.id

    async def authorize_saved(
        self,
        card: SavedCardReference,
        amount: int,
        currency: str,
        *,
        capture: bool,
        attempt_key: str | None = None,
        owner: CallOwner | None = None,
    ) -> CardProviderResult:
        """As :meth:`authorize`, on the saved PaymentMethod of ``card``, off session (the
        customer is not there to pass 3-D Secure). **Moves money** when ``capture`` is true.
        The PaymentIntent's metadata names ``attempt_key`` and ``owner`` as ``authorize``'s.

        The PaymentMethod is read first for its Customer, which Stripe requires with it: one
        Stripe no longer has, or that was detached from its Customer, is declined with
        ``saved_card_unavailable`` before anything is charged.
        """
        check_amount(amount)
        stripe_amount = to_stripe_amount(amount, currency)
        if not _SAVED_CARD.fullmatch(card.reference):
            raise refuse(_SAVED_CARD_GONE, "saved_card_unavailable")
        try:
            method = await self._call(
                lambda: self._client.v1.payment_methods.retrieve(card.reference)
            )
        except CardError as exc:
            if exc.failure_reason != "unknown_reference":
                raise
            raise refuse(_SAVED_CARD_GONE, "saved_card_unavailable") from None
        customer = method.customer
        if customer is None:
            raise refuse(_SAVED_CARD_GONE, "saved_card_unavailable")
        customer_id = customer if isinstance(customer, str) else customer.id
        return await self._charge(
            method.id,
            stripe_amount,
            currency,
            capture=capture,
            key=_key("authorize", attempt_key),
            brand=card.brand,
            last4=card.last4,
            metadata=_charge_metadata(attempt_key, owner),
            customer=customer_id,
        )

    # --- webhooks -----------------------------------------------------------------------------

    def provider_events_supported(self) -> bool:
        """Webhooks are read once their signing secret (``whsec_…``) is configured."""
        return self._webhook_secret is not None

    def parse_event(self, body: bytes, headers: Mapping[str, str]) -> CardProviderEvent:
        """The event of one webhook delivery, its ``Stripe-Signature`` verified by the SDK.

        Refused (:class:`BadProviderEvent`) without the header, with a signature that is not
        the secret's over the body, or signed more than
        :data:`treasury_stripe.events.WEBHOOK_TOLERANCE_SECONDS` ago
        (a replayed old delivery). Stripe's signature timestamps are real time, not business
        time. Reads the body only: nothing is asked of Stripe.
        """
        secret = self._webhook_secret
        if secret is None:
            raise BadProviderEvent(
                "Stripe webhooks are not configured", code="provider_events_unsupported"
            )
        return verified_event(body, headers, secret)
