"""The card provider port, shaped after pretix's payment providers.

A provider has required methods (:meth:`~CardProvider.authorize`, :meth:`~CardProvider.capture`,
:meth:`~CardProvider.void`, :meth:`~CardProvider.refund`,
:meth:`~CardProvider.complete_action`) and optional capabilities announced by ``*_supported()``
methods; :class:`CardProviderBase` answers ``False`` to all of them, so an adapter only overrides
what it can do. Each method's docstring says whether it moves money.

Errors: every refusal (by the issuer, the network or the provider) is a
:class:`~treasury_core.errors.CardError` whose ``failure_reason`` says why; a capture refused
because the hold no longer exists is the subclass :class:`HoldGone`. Every other failure
(timeouts, nonsense answers) is a :class:`~treasury_core.errors.ProviderError`.

References: the ``reference`` of each result supersedes the one passed in. The caller keeps the
latest reference of a charge and passes it to the next call (a provider whose references never
change simply returns the same one), which lets a provider keep a charge's state in the
reference itself.

Card data: the card number and CVC reach the provider only inside :class:`CardData`; they never
appear in a reference, a result, an error message or a log line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum
from typing import Literal, Protocol, TypeGuard, runtime_checkable

from treasury_core.cards.numbers import luhn_valid, normalize
from treasury_core.errors import CardError, InvalidRequestError

#: How a chargeback the provider announced ends: the merchant ``lost`` or ``won`` the dispute.
ChargebackOutcome = Literal["lost", "won"]

#: The ``failure_reason`` of :class:`HoldGone`.
HOLD_GONE_FAILURE_REASON = "authorization_expired"


@dataclass(frozen=True, slots=True)
class CardData:
    """A card as the service resolved it, from the hosted form or the vault.

    ``number`` and ``cvc`` are left out of ``repr`` so a logged or traced ``CardData`` leaks
    neither. The CVC is ``None`` for a vaulted card: it is never stored.
    """

    number: str = field(repr=False)
    expiry_month: int
    expiry_year: int
    cvc: str | None = field(default=None, repr=False)
    cardholder_name: str | None = None

    @property
    def last4(self) -> str:
        """The last four digits of the number (safe to show and store)."""
        return self.number[-4:]


class CardProviderStatus(StrEnum):
    """Where a charge stands at the provider after a call."""

    REQUIRES_ACTION = "requires_action"  # the customer must pass 3-D Secure first
    AUTHORIZED = "authorized"  # a hold: money reserved at the issuer, none moved
    CAPTURED = "captured"  # money moved to the merchant
    VOIDED = "voided"  # the hold released
    REFUNDED = "refunded"  # money returned to the card (the result of a refund)
    #: The provider took the refund but has not finished it: its outcome comes later, as a
    #: provider event (:attr:`CardProviderEventKind.REFUND_SUCCEEDED` or ``REFUND_FAILED``).
    REFUND_PENDING = "refund_pending"
    VERIFIED = "verified"  # the card checked out (a verification); nothing held or moved
    #: A refund the provider refused or cancelled (only :meth:`CardProviderLookups.find_refund`
    #: answers it: a refund call raises :class:`CardError` instead).
    REFUND_FAILED = "refund_failed"


@dataclass(frozen=True, slots=True)
class CardProviderResult:
    """What the provider answered.

    ``reference`` is the provider's reference to keep for the next call on this charge (for
    :meth:`CardProvider.refund`, the refund's own reference). ``brand`` and ``last4`` are set
    when the provider knows the card (always on :meth:`CardProvider.authorize`).

    ``action_url``, with status ``requires_action``, is the provider's page where the customer
    authenticates (an ``http(s)`` URL the hosted challenge page sends them to); ``None`` when
    the customer acts elsewhere (the sandbox's own challenge page, the provider's SDK).
    """

    reference: str
    status: CardProviderStatus
    brand: str | None = None
    last4: str | None = None
    action_url: str | None = None

    @property
    def requires_action(self) -> bool:
        """Whether the customer must act (3-D Secure) before the charge is authorized."""
        return self.status is CardProviderStatus.REQUIRES_ACTION


@dataclass(frozen=True, slots=True)
class CallOwner:
    """The record of ours a provider call acts for: the company, the payment intent and, for a
    refund, the refund's id.

    Passed to a provider whose ``keyed_calls_supported()`` answers ``True``
    (:func:`takes_keyed_calls`), which sets it on every object the call makes there (Stripe:
    metadata), so that an object or event found at the provider later names its owner here
    even when the call's answer was lost.

    ``tag`` proves the owner: derived from the intent's secret lookup id, it is what another
    treasury sharing the provider account (a test database, a restored backup), whose intent
    and company ids repeat ours, cannot set. A provider keeps it with the rest and gives it
    back; the services adopt a charge found by its owner only when the tag is the intent's.
    """

    company_id: int
    payment_intent_id: int
    refund_id: str | None = None
    tag: str | None = None


class HoldGone(CardError):
    """A capture was refused because the hold no longer exists at the provider.

    The payments service cancels the intent with reason ``expired`` instead of leaving it
    ``AUTHORIZED``. ``failure_reason`` defaults to :data:`HOLD_GONE_FAILURE_REASON`.
    """

    def __init__(
        self,
        message: str = "The authorization no longer exists at the card provider",
        *,
        failure_reason: str = HOLD_GONE_FAILURE_REASON,
    ) -> None:
        super().__init__(message, failure_reason=failure_reason)


def refuse_unusable_card(card: CardData, today: date) -> str:
    """The card's number, digits only, or the 402 a card network gives a card it cannot use.

    For adapters: a number that fails its length or Luhn check, an impossible expiry month, an
    expired card or a malformed CVC is refused as a decline (:class:`CardError` with
    ``invalid_number``, ``invalid_expiry_month``, ``expired_card`` or ``invalid_cvc``), the
    same with every provider and before any network call. The services validate cards before
    they reach a provider (400); this is the provider's own line, for a caller that did not.
    """
    number = normalize(card.number)
    if not (number.isdigit() and 12 <= len(number) <= 19 and luhn_valid(number)):
        raise CardError("Your card number is invalid", failure_reason="invalid_number")
    if not 1 <= card.expiry_month <= 12:
        raise CardError(
            "Your card's expiration month is invalid", failure_reason="invalid_expiry_month"
        )
    if (card.expiry_year, card.expiry_month) < (today.year, today.month):
        raise CardError("Your card has expired", failure_reason="expired_card")
    if card.cvc is not None and not (card.cvc.isdigit() and 3 <= len(card.cvc) <= 4):
        raise CardError("Your card's security code is invalid", failure_reason="invalid_cvc")
    return number


@runtime_checkable
class CardProvider(Protocol):
    """A card acquirer. Subclass :class:`CardProviderBase` to get the optional defaults."""

    async def authorize(
        self,
        card: CardData,
        amount: int,
        currency: str,
        *,
        capture: bool,
        attempt_key: str | None = None,
    ) -> CardProviderResult:
        """Authorize ``amount`` (minor units of ``currency``) on ``card``.

        ``attempt_key`` names the payment attempt: the service passes the same key when it
        retries an attempt whose outcome it never learned (a :class:`ProviderError`), and a new
        one once an attempt's outcome is recorded. A provider that can should make a call with
        a key it has seen answer with that first outcome rather than charge again. Passed only
        to a provider whose :meth:`attempt_keys_supported` answers ``True``, so an adapter whose
        ``authorize`` takes no such keyword leaves the flag off.

        ``return_url``, a keyword passed only to a provider whose :meth:`return_urls_supported`
        answers ``True`` and only when the server knows its public address, is where the
        provider's 3-D Secure page sends the customer back; the service then calls
        :meth:`complete_action`. Without it the provider may still answer ``requires_action``,
        with no ``action_url`` of its own page to send the customer to.

        With ``capture=False`` this places a hold: money is reserved at the issuer, none moves.
        With ``capture=True`` it authorizes and captures at once: **moves money**. A result with
        status ``requires_action`` moves nothing until :meth:`complete_action`.
        Raises ``CardError`` when declined.
        """
        ...

    async def capture(self, reference: str, amount: int) -> CardProviderResult:
        """Capture ``amount`` of a hold (never more than was authorized). **Moves money.**

        Raises ``CardError`` when refused (``already_captured``, ``amount_too_large``, …) and
        :class:`HoldGone` when the hold no longer exists.
        """
        ...

    async def void(self, reference: str) -> CardProviderResult:
        """Release a hold, or abandon a charge awaiting 3-D Secure. Moves no money."""
        ...

    async def refund(self, reference: str, amount: int) -> CardProviderResult:
        """Return ``amount`` of a captured charge to the card. **Moves money.**

        The result carries the refund's own reference. The caller keeps the total refunded
        within the captured amount. Status ``refunded`` when the money went back;
        ``refund_pending`` when the provider finishes it later and tells by a provider event
        (only a provider with :meth:`CardProviderEvents.provider_events_supported` may answer
        it: nothing else would ever settle the refund).
        """
        ...

    async def complete_action(self, reference: str) -> CardProviderResult:
        """Finish a charge after the customer passed 3-D Secure.

        Authorizes (a hold, no money moves) or, if the charge was started with
        ``capture=True``, authorizes and captures (**moves money**). Raises ``CardError`` when
        authentication failed or no action was pending. A provider that learns the verdict
        from its own page answers ``requires_action`` while the customer has not finished
        there: nothing changed, and the challenge keeps waiting.
        """
        ...

    async def verify(self, card: CardData) -> CardProviderResult:
        """Check that ``card`` (number, expiry, CVC) is good, before it is saved. Moves no money.

        An account verification: nothing is held. Raises ``CardError`` when declined. Only
        called when :meth:`verification_supported` says so.
        """
        ...

    def manual_capture_supported(self) -> bool:
        """Whether ``authorize(..., capture=False)`` holds can be captured later.

        When not, the services never ask for a hold, and the provider refuses one with a
        ``CardError`` whose ``failure_reason`` is ``unsupported``.
        """
        ...

    def verification_supported(self) -> bool:
        """Whether :meth:`verify` checks cards (otherwise cards are saved unverified).

        When not, :meth:`verify` raises ``CardError`` with ``failure_reason`` ``unsupported``.
        """
        ...

    def three_d_secure_supported(self) -> bool:
        """Whether authorize may answer ``requires_action`` (3-D Secure).

        When not, authorize never does (a card that needs 3-D Secure is declined) and
        :meth:`complete_action` raises ``CardError`` with ``failure_reason``
        ``no_action_required``.
        """
        ...

    def refunds_supported(self) -> bool:
        """Whether captured charges can be refunded.

        When not, :meth:`refund` raises ``CardError`` with ``failure_reason`` ``unsupported``.
        """
        ...

    def partial_refunds_supported(self) -> bool:
        """Whether a refund may be for less than the captured amount.

        When not, the services never ask for one, and the provider refuses it with a
        ``CardError`` whose ``failure_reason`` is ``unsupported``.
        """
        ...

    def chargeback_outcome(self, reference: str) -> ChargebackOutcome | None:
        """A chargeback the provider will open on this charge once captured, and its end.

        Only simulating providers know this in advance; real ones report chargebacks by
        webhook and answer ``None``. Moves no money.
        """
        ...

    def attempt_keys_supported(self) -> bool:
        """Whether :meth:`authorize` takes ``attempt_key`` (default ``False``: never passed)."""
        ...

    def return_urls_supported(self) -> bool:
        """Whether :meth:`authorize` takes ``return_url`` and :meth:`complete_action` reads the
        verdict of the provider's own 3-D Secure page (default ``False``: never passed)."""
        ...

    def saved_cards_supported(self) -> bool:
        """Whether the provider keeps saved cards itself (:class:`SavedCardProvider`; default
        ``False``: saved cards are sealed in the treasury's vault)."""
        ...

    def provider_events_supported(self) -> bool:
        """Whether the provider reports by event (:class:`CardProviderEvents`; default
        ``False``: its deliveries are refused unread)."""
        ...

    def keyed_calls_supported(self) -> bool:
        """Whether money-moving calls take ``key`` and ``owner`` (:func:`takes_keyed_calls`;
        default ``False``: never passed)."""
        ...

    def lookups_supported(self) -> bool:
        """Whether the provider can be asked what a call did (:class:`CardProviderLookups`;
        default ``False``: a lost answer waits for the provider's events)."""
        ...


#: Every optional capability a card provider declares, by the name of its ``*_supported()``
#: method (each answers ``False`` on :class:`CardProviderBase`).
CAPABILITIES: tuple[str, ...] = (
    "attempt_keys_supported",
    "keyed_calls_supported",
    "lookups_supported",
    "manual_capture_supported",
    "partial_refunds_supported",
    "provider_events_supported",
    "refunds_supported",
    "return_urls_supported",
    "saved_cards_supported",
    "three_d_secure_supported",
    "verification_supported",
)


class CardProviderBase(ABC):
    """Base class for card providers: required methods abstract, optional capabilities off."""

    @abstractmethod
    async def authorize(
        self,
        card: CardData,
        amount: int,
        currency: str,
        *,
        capture: bool,
        attempt_key: str | None = None,
    ) -> CardProviderResult:
        """See :meth:`CardProvider.authorize`. Moves money when ``capture`` is true."""

    @abstractmethod
    async def capture(self, reference: str, amount: int) -> CardProviderResult:
        """See :meth:`CardProvider.capture`. Moves money."""

    @abstractmethod
    async def void(self, reference: str) -> CardProviderResult:
        """See :meth:`CardProvider.void`. Moves no money."""

    async def refund(self, reference: str, amount: int) -> CardProviderResult:
        """See :meth:`CardProvider.refund`. Moves money. Refused unless overridden."""
        raise CardError("This card provider does not support refunds", failure_reason="unsupported")

    async def complete_action(self, reference: str) -> CardProviderResult:
        """See :meth:`CardProvider.complete_action`. Refused unless overridden."""
        raise CardError("No customer action is pending", failure_reason="no_action_required")

    async def verify(self, card: CardData) -> CardProviderResult:
        """See :meth:`CardProvider.verify`. Refused unless overridden."""
        raise CardError("This card provider does not verify cards", failure_reason="unsupported")

    def verification_supported(self) -> bool:
        """Default: cards are not verified before they are saved."""
        return False

    def manual_capture_supported(self) -> bool:
        """Default: holds cannot be captured later."""
        return False

    def attempt_keys_supported(self) -> bool:
        """Default: ``attempt_key`` is not passed, so an adapter whose ``authorize`` does not
        take it keeps working."""
        return False

    def three_d_secure_supported(self) -> bool:
        """Default: no 3-D Secure."""
        return False

    def return_urls_supported(self) -> bool:
        """Default: ``return_url`` is not passed to ``authorize`` (see
        :meth:`CardProvider.authorize`), so adapters whose ``authorize`` does not take it keep
        working."""
        return False

    def refunds_supported(self) -> bool:
        """Default: no refunds."""
        return False

    def partial_refunds_supported(self) -> bool:
        """Default: no partial refunds."""
        return False

    def chargeback_outcome(self, reference: str) -> ChargebackOutcome | None:
        """Default: chargebacks are not known in advance."""
        return None

    def saved_cards_supported(self) -> bool:
        """Default: saved cards are sealed in the treasury's vault, not kept by the provider
        (see :class:`SavedCardProvider`)."""
        return False

    def provider_events_supported(self) -> bool:
        """Default: the provider reports nothing by event (webhook); see
        :class:`CardProviderEvents`."""
        return False

    def keyed_calls_supported(self) -> bool:
        """Default: no ``key`` or ``owner`` keywords are passed (see :func:`takes_keyed_calls`),
        so adapters whose methods do not take them keep working."""
        return False

    def lookups_supported(self) -> bool:
        """Default: the provider cannot be asked what a call did (see
        :class:`CardProviderLookups`); a lost answer waits for the provider's events."""
        return False

    def parse_event(self, body: bytes, headers: Mapping[str, str]) -> CardProviderEvent:
        """See :meth:`CardProviderEvents.parse_event`. Refused unless overridden."""
        raise BadProviderEvent(
            "This card provider does not send events", code="provider_events_unsupported"
        )


# --- keyed calls and lookups ------------------------------------------------------------------


def takes_keyed_calls(provider: CardProvider) -> bool:
    """Whether the services pass keys and owners to ``provider``'s money-moving calls.

    With ``keyed_calls_supported()`` answering ``True`` the services call
    ``authorize(..., attempt_key=, owner=)``, ``authorize_saved(..., attempt_key=, owner=)``,
    ``capture(reference, amount, key=)``, ``void(reference, key=)`` and
    ``refund(reference, amount, key=, owner=)``. Each ``key`` is derived from our record of the
    call (the refund's id, the intent's attempt), never fresh per call, so a call repeated
    after its answer was lost makes nothing twice at the provider; each ``owner`` is a
    :class:`CallOwner` the provider keeps on what it makes.
    """
    return provider.keyed_calls_supported() is True


@dataclass(frozen=True, slots=True)
class ProviderCharge:
    """A charge as the provider holds it now (:meth:`CardProviderLookups.recent_charges`).

    ``owner`` and ``attempt_key`` are what our calls set on it (``None`` for a charge made
    without us, at the provider's dashboard say). Amounts are in ISO 4217 minor units of
    ``currency``: ``amount`` authorized, ``amount_captured`` moved to the merchant,
    ``amount_refunded`` returned to the card. ``status`` is ``requires_action``,
    ``authorized``, ``captured`` or ``voided``.
    """

    reference: str
    owner: CallOwner | None
    attempt_key: str | None
    status: CardProviderStatus
    amount: int
    currency: str
    amount_captured: int
    amount_refunded: int
    created_at: datetime


@runtime_checkable
class CardProviderLookups(Protocol):
    """The optional capability of a provider that can be asked what a call did
    (``lookups_supported()`` answering ``True``; see :func:`answers_lookups`).

    The services ask before any new attempt on a record whose last call's answer was lost, and a
    background job asks for every record left in doubt, so an unknown outcome ends in agreement
    with the provider rather than pending for ever. None of these moves money.
    """

    def lookups_supported(self) -> bool:
        """Whether :meth:`find_charge`, :meth:`find_refund` and :meth:`recent_charges` work."""
        ...

    async def find_charge(self, attempt_key: str) -> CardProviderResult | None:
        """The charge an ``authorize`` or ``authorize_saved`` with ``attempt_key`` made, as it
        stands now (``requires_action``, ``authorized``, ``captured`` or ``voided``, with
        ``brand`` and ``last4`` when known), or ``None`` when the provider holds none: the call
        never reached it, or it was declined before anything was made."""
        ...

    async def find_refund(self, reference: str, key: str) -> CardProviderResult | None:
        """The refund of charge ``reference`` made by a ``refund`` with ``key``: status
        ``refunded``, ``refund_pending`` or ``refund_failed``, its reference the refund's own;
        ``None`` when the provider made none."""
        ...

    async def recent_charges(self, since: datetime) -> Sequence[ProviderCharge]:
        """Every charge the provider made on or after ``since``, for reconciliation."""
        ...


def answers_lookups(provider: CardProvider) -> TypeGuard[CardProviderLookups]:
    """Whether ``provider`` can be asked what a call did (see :class:`CardProviderLookups`)."""
    return provider.lookups_supported() is True


# --- card on file kept by the provider --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SavedCardReference:
    """A saved card the provider keeps itself: its ``reference`` there and what may be shown.

    What a token of a provider that keeps saved cards resolves to, instead of a
    :class:`CardData`: the card number never left the provider after it was saved, so the
    treasury charges the card by ``reference`` (:meth:`SavedCardProvider.authorize_saved`).
    """

    reference: str
    brand: str
    last4: str
    expiry_month: int
    expiry_year: int


@runtime_checkable
class SavedCardProvider(Protocol):
    """The optional capability of a provider that keeps saved cards itself (card on file).

    A provider announces it with ``saved_cards_supported()`` answering ``True``
    (:func:`keeps_saved_cards`); the card-on-file service then saves cards with
    :meth:`save_card` instead of sealing them in the treasury's vault, and the payments
    service charges their tokens with :meth:`authorize_saved`. Neither is called otherwise.
    """

    def saved_cards_supported(self) -> bool:
        """Whether the provider keeps saved cards (``save_card`` and ``authorize_saved``)."""
        ...

    async def save_card(
        self, card: CardData, *, customer_email: str | None, key: str
    ) -> SavedCardReference:
        """Check ``card`` and keep it at the provider for later charges. Moves no money.

        ``customer_email`` groups the customer's cards at the provider (``None``: the card is
        kept on its own). ``key`` names the saving: a call repeated with the same key (the retry
        of one whose answer was lost) keeps no second card. Raises ``CardError`` when the card
        is declined; the CVC is used for the check and never kept.
        """
        ...

    async def authorize_saved(
        self,
        card: SavedCardReference,
        amount: int,
        currency: str,
        *,
        capture: bool,
        attempt_key: str | None = None,
    ) -> CardProviderResult:
        """As :meth:`CardProvider.authorize`, on a card :meth:`save_card` kept, the customer
        absent (an off-session charge). **Moves money** when ``capture`` is true. A card the
        provider no longer has is declined (``CardError``)."""
        ...


def keeps_saved_cards(provider: CardProvider) -> TypeGuard[SavedCardProvider]:
    """Whether ``provider`` keeps saved cards itself (see :class:`SavedCardProvider`): its
    :meth:`~CardProvider.saved_cards_supported` answers ``True``."""
    return provider.saved_cards_supported() is True


# --- Provider events (webhooks) ---------------------------------------------------------------


class CardProviderEventKind(StrEnum):
    """What a provider's event says happened to a charge, in the port's terms."""

    #: The customer passed 3-D Secure and the charge is authorized (a hold), not captured.
    AUTHORIZED = "authorized"
    #: The charge is captured: money moved to the merchant.
    CAPTURED = "captured"
    #: The provider released the hold or abandoned the charge (its own expiry, a dashboard).
    CANCELED = "canceled"
    #: The payment attempt failed (3-D Secure failed or the issuer declined after it).
    PAYMENT_FAILED = "payment_failed"
    #: The cardholder's bank disputes the charge: the disputed amount is withheld.
    DISPUTE_OPENED = "dispute_opened"
    #: The dispute was decided for the merchant: the withheld amount comes back.
    DISPUTE_WON = "dispute_won"
    #: The dispute was decided for the cardholder: the withheld amount is gone.
    DISPUTE_LOST = "dispute_lost"
    #: Money of the charge was returned to the card; ``amount`` is the total refunded so far.
    REFUNDED = "refunded"
    #: One refund (``refund``: its reference as :meth:`CardProvider.refund` returned it) reached
    #: the card.
    REFUND_SUCCEEDED = "refund_succeeded"
    #: One refund (``refund``) failed or was cancelled at the provider, pending or even after
    #: it had succeeded: the money stays with (or comes back to) the merchant.
    REFUND_FAILED = "refund_failed"


@dataclass(frozen=True, slots=True)
class CardProviderEvent:
    """One event a provider reported about a charge, stripped of the provider's own format.

    ``id`` is the provider's id of the event (a redelivery has the same one); ``reference`` is
    the charge's reference as :meth:`CardProvider.authorize` returned it (a provider that sends
    events keeps one reference per charge: an event naming a reference the intent no longer
    holds is taken as about an abandoned charge and changes nothing). ``amount`` is in ISO
    4217 minor units of ``currency``: for a dispute the disputed amount, for
    :attr:`~CardProviderEventKind.REFUNDED` the charge's total refunded so far (refunds are
    reported cumulatively, so a missed event is made up by the next). ``dispute`` is the
    provider's id of the dispute (the same on its opening and its closing). ``failure_reason``
    is a provider code of :attr:`~CardProviderEventKind.PAYMENT_FAILED` or
    :attr:`~CardProviderEventKind.REFUND_FAILED` (snake_case, never a message). ``refund`` is
    the provider's reference of the refund a ``REFUND_*`` event is about; ``owner`` the
    record our call set on the provider's object (:class:`CallOwner`). ``kind`` is ``None``
    for an event the port does not map: it is acknowledged and ignored.
    """

    id: str
    type: str
    kind: CardProviderEventKind | None
    reference: str | None
    amount: int | None = None
    currency: str | None = None
    dispute: str | None = None
    failure_reason: str | None = None
    refund: str | None = None
    #: The record of ours the provider's object names in what our call set on it (Stripe:
    #: metadata), when the adapter reads it: an event about a charge whose answer was lost
    #: still finds its intent.
    owner: CallOwner | None = None


class BadProviderEvent(InvalidRequestError):
    """An event body that is not the provider's: a missing or wrong signature, a timestamp
    outside the tolerance, a body that is not the provider's JSON. Nothing was applied."""

    default_code = "webhook_signature_invalid"


class CardProviderEvents(Protocol):
    """The optional event capability of a card provider (see
    :meth:`CardProviderBase.provider_events_supported`)."""

    def provider_events_supported(self) -> bool:
        """Whether :meth:`parse_event` can verify and read this provider's event deliveries."""
        ...

    def parse_event(self, body: bytes, headers: Mapping[str, str]) -> CardProviderEvent:
        """The verified event of one delivery (``body`` as received, its HTTP headers).

        Raises :class:`BadProviderEvent` unless the delivery is authentic. Moves no money and
        calls nothing: only the delivery itself is read.
        """
        ...
