"""What every part of the payments service shares: job kinds, error codes, ids and keys.

Pure functions and constants: the service classes beside this module use them, and so do the
services that act on intents from outside (jobs, provider events, chargebacks, payment links).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from treasury_core.errors import (
    InvalidRequestError,
    PermissionDenied,
)
from treasury_core.money import round_minor
from treasury_core.payments.intents import (
    CaptureMethod,
    PaymentIntent,
)
from treasury_core.payments.records import (
    Transaction,
)
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports.card_provider import (
    CallOwner,
    CardData,
    SavedCardReference,
)
from treasury_core.ports.ids import SORTABLE_DIGITS

log = logging.getLogger("treasury.payments")


def check_publishable_create(request: CreateIntentRequest) -> None:
    """Raise :class:`PermissionDenied` (403) for an intent a publishable key may not create.

    Manual capture needs a secret key (part 5). So does ``card_token``: a publishable key and a
    ``pmt_`` id are both in a browser's reach, and together they must not charge the customer
    whatever amount they name.
    """
    if request.capture_method is CaptureMethod.MANUAL:
        raise PermissionDenied(
            "capture_method manual requires a secret key", param="capture_method"
        )
    if request.card_token is not None:
        raise PermissionDenied("card_token requires a secret key", param="card_token")


#: Job kinds of the payments service (run by the job runner on the clock).
EXPIRE_AUTHORIZATION = "expire_authorization"
#: Voids at the card provider a hold the expiry released in the ledger (after it committed).
RELEASE_HOLD = "release_hold"
PAYOUT = "payout"
PAYOUT_APPLY = "payout_apply"
CHARGEBACK_OPEN = "chargeback_open"
CHARGEBACK_RESOLVE = "chargeback_resolve"
#: Asks the card provider what a charge attempt whose answer was lost did, and records it
#: (resource :func:`charge_attempt_resource`); run outside transactions.
RESOLVE_CHARGE = "resolve_charge"
#: Asks the card provider what a refund whose answer was lost did, and settles it (resource:
#: the refund's id); run outside transactions.
RESOLVE_REFUND = "resolve_refund"

#: Default delays of decisions.md's sandbox (payouts 2 days after capture) and of the simulated
#: card network (a chargeback opens a day after capture and is decided a day later; a payout
#: is applied an hour after it was confirmed). ``TreasuryConfig.payment_delays_seconds``
#: overrides each by name.
DEFAULT_DELAYS: dict[str, float] = {
    PAYOUT: 2 * 24 * 3600,
    PAYOUT_APPLY: 3600,
    CHARGEBACK_OPEN: 24 * 3600,
    CHARGEBACK_RESOLVE: 24 * 3600,
}

#: Finds a saved card for ``(company_id, card_token)``: the card from the vault, or the reference
#: of one the card provider keeps; ``None`` when the company has no such token. Supplied by the
#: card-on-file service; without one no token is known.
SavedCards = Callable[[int, str], Awaitable[CardData | SavedCardReference | None]]


#: The ``code`` of the 400 refusing what the card provider says it cannot do (decisions.md).
CAPABILITY_UNSUPPORTED = "provider_capability_unsupported"
#: The ``code`` of the 400 answering a 3-D Secure completion the provider has no verdict for
#: yet (the customer has not finished at its page); the challenge keeps waiting.
AUTHENTICATION_INCOMPLETE = "authentication_incomplete"


def unsupported(message: str, param: str | None = None) -> InvalidRequestError:
    """The refusal of a request the card provider's ``*_supported()`` flags rule out.

    Raised before the provider is called and before anything is written: the provider's
    flags are its contract, and asking it anyway would move money (or hold it) in ways the
    adapter has said it cannot follow through.
    """
    return InvalidRequestError(message, code=CAPABILITY_UNSUPPORTED, param=param)


def intent_job_key(intent_id: int) -> str:
    """The ``resource_id`` of an intent's jobs (intent ids are integers, job resources strings)."""
    return f"pi:{intent_id}"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)


def new_lookup_id(now: datetime, secret: str) -> str:
    """An unguessable ``payment_intent_lookup_id``: ``pil_``, the creation time's milliseconds
    as 9 base32 digits, then ``secret``, the id source's token of 192 random bits (it addresses
    the hosted payment page, so it is a bearer secret; the randomness alone makes it
    unguessable).

    Why the time first: the lookup id has a unique index, and fully random keys land each
    insert on a random leaf of it, so a group commit of creates wrote as many scattered index
    pages, and an insert grew dearer as the table grew. Ids made together share a page (the
    figures are in CHANGELOG.md, "Performance history").
    The prefix tells whoever holds the link when the intent was made, to the millisecond; that
    is all it gives away, and it helps no one guess another id.
    """
    ms = (now - _EPOCH) // _MILLISECOND
    stamp = "".join([SORTABLE_DIGITS[(ms >> shift) & 31] for shift in range(40, -1, -5)])
    return "pil_" + stamp + secret


def processing_share(intent: PaymentIntent, billing_amount: int) -> int:
    """The part of ``processing_amount`` that ``billing_amount`` of the billing amount stands for.

    Rounded by the one rounding rule. A refund takes the share of the cumulative refunded amount
    minus what earlier refunds took, so the shares of all refunds of an intent add up to exactly
    ``processing_amount``.
    """
    if intent.processing_currency == intent.billing_currency:
        return billing_amount
    return round_minor(
        Decimal(billing_amount) * intent.processing_amount / Decimal(intent.billing_amount)
    )


@dataclass(frozen=True, slots=True)
class PaymentOutcome:
    """What a payment attempt did: the intent as it is now and the attempt's record.

    ``transaction.status`` ``requires_action`` means the customer must pass 3-D Secure at
    ``POST /pay/{lookup_id}/challenge`` before anything is held or moved.
    """

    intent: PaymentIntent
    transaction: Transaction


def attempt_key(intent: PaymentIntent) -> str:
    """The key of the intent's next payment attempt, for the card provider.

    Stable until an attempt's outcome is recorded: a decline or a 3-D Secure challenge records
    a transaction (the next attempt, maybe with another card, gets a new key), while a
    :class:`ProviderError` records nothing, so the retry reuses the key and the provider can
    answer with the first outcome instead of charging twice. Made from the lookup id, which
    is random, rather than the intent id, which another treasury sharing the provider account
    (a test database, a restored backup) reuses; hashed because the lookup id is a secret.
    """
    return _derived(intent, intent.latest_transaction_id or "")


def _derived(intent: PaymentIntent, *parts: str) -> str:
    # The lookup id, random, keeps two treasuries sharing one provider account apart (an
    # intent id repeats across databases); hashed because the lookup id is a bearer secret.
    seed = ":".join((intent.payment_intent_lookup_id, *parts))
    return hashlib.sha256(seed.encode()).hexdigest()[:40]


def capture_key(intent: PaymentIntent, transaction_id: str) -> str:
    """The provider key of a capture: one per capture attempt (its transaction's id), which a
    client's retry with the same ``Idempotency-Key`` resumes, so Stripe-like providers answer
    a repeated capture with its first outcome."""
    return _derived(intent, "capture", transaction_id)


def void_key(intent: PaymentIntent) -> str:
    """The provider key of releasing the intent's current charge (voiding twice is harmless)."""
    return _derived(intent, "void", intent.provider_reference or "")


def refund_key(intent: PaymentIntent, refund_id: str) -> str:
    """The provider key of one refund: derived from our refund, so every call about it, a
    client's retry and the resolver's question included, names the same refund."""
    return _derived(intent, "refund", refund_id)


def call_owner(intent: PaymentIntent, refund_id: str | None = None) -> CallOwner:
    """The record a provider call acts for (set on what the provider makes), with the intent's
    tag (see :class:`CallOwner`)."""
    return CallOwner(intent.company_id, intent.id, refund_id, owner_tag(intent))


def owner_tag(intent: PaymentIntent) -> str:
    """The :attr:`CallOwner.tag` of the intent's calls: 24 hex digits of a digest of its lookup
    id, which only this treasury knows."""
    return _derived(intent, "owner")[:24]


#: The ``code`` of the 400 refusing another card under the key of an attempt whose outcome is
#: unknown (the Stripe adapter's translation of Stripe's ``idempotency_error``).
ATTEMPT_IN_DOUBT = "payment_attempt_in_doubt"


def intent_resource(intent_id: int) -> str:
    """What an ``Idempotency-Key`` is bound to when its request created this intent."""
    return f"pi:{intent_id}"


def intent_of_resource(resource: str | None) -> int | None:
    """The intent id of :func:`intent_resource`'s value, else ``None``."""
    if resource is None or not resource.startswith("pi:"):
        return None
    digits = resource[3:]
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses.
    return int(digits) if digits.isascii() and digits.isdigit() else None


def charge_attempt_resource(intent_id: int, key: str) -> str:
    """The ``resource_id`` of a :data:`RESOLVE_CHARGE` job: the intent and the attempt key
    (at most 64 characters: an intent id has at most 19 digits, a key 40)."""
    return f"pi:{intent_id}:{key}"


#: What a lookup id can look like (the check runs before any query, on every poll).
_LOOKUP_ID = re.compile(r"pil_[A-Za-z0-9_-]{4,60}")


def is_lookup_id(value: str) -> bool:
    return isinstance(value, str) and _LOOKUP_ID.fullmatch(value) is not None


def safe_last4(card: CardData | SavedCardReference) -> str | None:
    if isinstance(card, SavedCardReference):
        return card.last4
    digits = "".join(c for c in card.number if c.isdigit())
    return digits[-4:] if len(digits) >= 12 else None
