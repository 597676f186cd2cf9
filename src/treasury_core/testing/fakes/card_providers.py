"""Card providers for tests: one with every optional capability off, one that loses answers.

:class:`SalesOnlyCardProvider` is the least the card provider port accepts: it charges cards
(``authorize`` with ``capture=True``) and nothing else. Every ``*_supported()`` flag answers
``False`` and every call the flags rule out is refused the way the port documents, so a test
can check that code built on the port (the services, an application, a contract) copes with a
provider that offers nothing optional. It keeps its charges in memory and makes no network call.

Its test cards: ``4000000000000002`` is declined (``card_declined``); every other card that
passes :func:`~treasury_core.ports.card_provider.refuse_unusable_card` is approved.

:class:`FlakyCardProvider` is the other end: every capability a real provider like Stripe has
(holds, refunds in part, 3-D Secure, keyed calls, lookups, events), its charges and refunds kept
in memory, and faults on demand: the answer of a call lost *after* the provider acted, or a
call refused *before* it did anything (see its docstring).
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import secrets
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from treasury_core.cards.numbers import brand_of
from treasury_core.errors import CardError, ProviderDidNotAct, ProviderError
from treasury_core.ports import Clock
from treasury_core.ports.card_provider import (
    BadProviderEvent,
    CallOwner,
    CardData,
    CardProviderBase,
    CardProviderEvent,
    CardProviderEventKind,
    CardProviderResult,
    CardProviderStatus,
    HoldGone,
    ProviderCharge,
    refuse_unusable_card,
)

__all__ = [
    "FLAKY_DECLINED_CARD",
    "FLAKY_THREE_D_SECURE_CARD",
    "SALES_ONLY_DECLINED_CARD",
    "Call",
    "FakeCharge",
    "FakeRefund",
    "FlakyCardProvider",
    "SalesOnlyCardProvider",
]

#: The card :class:`SalesOnlyCardProvider` declines at authorization.
SALES_ONLY_DECLINED_CARD = "4000000000000002"


class SalesOnlyCardProvider(CardProviderBase):
    """Charges cards and nothing more: no holds, refunds, 3-D Secure or verification.

    ``clock`` dates the expiry check of cards (the wall clock's UTC date without one).
    :attr:`charges` maps each charge's reference to its amount, for a test to inspect.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock
        self.charges: dict[str, int] = {}

    def _today(self) -> datetime:
        return self._clock.now() if self._clock is not None else datetime.now(UTC)

    # --- capabilities: charges only, every flag off -------------------------------------------

    def manual_capture_supported(self) -> bool:
        """Off: every charge is captured when authorized."""
        return False

    def verification_supported(self) -> bool:
        """Off: cards are saved unverified."""
        return False

    def three_d_secure_supported(self) -> bool:
        """Off: a card that needs 3-D Secure is declined."""
        return False

    def refunds_supported(self) -> bool:
        """Off."""
        return False

    def partial_refunds_supported(self) -> bool:
        """Off."""
        return False

    def attempt_keys_supported(self) -> bool:
        """Off."""
        return False

    def return_urls_supported(self) -> bool:
        """Off."""
        return False

    def saved_cards_supported(self) -> bool:
        """Off: saved cards are sealed in the treasury's vault."""
        return False

    def provider_events_supported(self) -> bool:
        """Off."""
        return False

    def keyed_calls_supported(self) -> bool:
        """Off."""
        return False

    def lookups_supported(self) -> bool:
        """Off."""
        return False

    async def authorize(
        self,
        card: CardData,
        amount: int,
        currency: str,
        *,
        capture: bool,
        attempt_key: str | None = None,
    ) -> CardProviderResult:
        """Charge ``amount`` (**moves money**); a hold (``capture=False``) is refused."""
        if not capture:
            raise CardError(
                "This card provider cannot hold an amount to capture later",
                failure_reason="unsupported",
            )
        number = refuse_unusable_card(card, self._today().date())
        if number == SALES_ONLY_DECLINED_CARD:
            raise CardError("Your card was declined", failure_reason="card_declined")
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            raise CardError(
                "The amount must be a positive whole number of minor units",
                failure_reason="invalid_amount",
            )
        reference = f"so_{secrets.token_hex(12)}"
        self.charges[reference] = amount
        return CardProviderResult(
            reference=reference,
            status=CardProviderStatus.CAPTURED,
            brand=brand_of(number),
            last4=number[-4:],
        )

    def _known(self, reference: str) -> None:
        if reference not in self.charges:
            raise CardError(
                "No such charge at the card provider", failure_reason="unknown_reference"
            )

    async def capture(self, reference: str, amount: int) -> CardProviderResult:
        """Every charge is captured when authorized: refused (``already_captured``)."""
        self._known(reference)
        raise CardError("The charge has already been captured", failure_reason="already_captured")

    async def void(self, reference: str) -> CardProviderResult:
        """Every charge is captured when authorized: refused (``already_captured``)."""
        self._known(reference)
        raise CardError("The charge has already been captured", failure_reason="already_captured")


# --- a provider that loses answers --------------------------------------------------------------

#: The card :class:`FlakyCardProvider` declines at authorization (``card_declined``).
FLAKY_DECLINED_CARD = "4000000000000002"
#: The card for which :class:`FlakyCardProvider` asks for 3-D Secure.
FLAKY_THREE_D_SECURE_CARD = "4000000000003220"

_S = CardProviderStatus
_K = CardProviderEventKind
#: The header carrying the signature of :meth:`FlakyCardProvider.delivery`.
SIGNATURE_HEADER = "Flaky-Signature"


class Call(StrEnum):
    """The calls of :class:`FlakyCardProvider` a fault can be set on."""

    AUTHORIZE = "authorize"
    CAPTURE = "capture"
    VOID = "void"
    REFUND = "refund"
    COMPLETE_ACTION = "complete_action"
    FIND_CHARGE = "find_charge"
    FIND_REFUND = "find_refund"
    RECENT_CHARGES = "recent_charges"


class _Fault(StrEnum):
    LOSE_ANSWER = "lose_answer"  # act, then fail as a timeout would
    REFUSE = "refuse"  # fail before acting


@dataclass
class FakeCharge:
    """A charge as :class:`FlakyCardProvider` holds it (changed in place by later calls).

    ``capture`` is what the authorization asked for (a sale rather than a hold); amounts are
    minor units of ``currency``.
    """

    reference: str
    attempt_key: str | None
    owner: CallOwner | None
    amount: int
    currency: str
    capture: bool
    status: CardProviderStatus
    created_at: datetime
    brand: str
    last4: str
    amount_captured: int = 0
    amount_refunded: int = 0
    #: The hold vanished at the provider (:meth:`FlakyCardProvider.lose_hold`).
    gone: bool = False

    @property
    def holds_money(self) -> bool:
        """Whether the customer's money is held or taken by this charge (and not given back)."""
        if self.status is _S.AUTHORIZED:
            return True
        return self.status is _S.CAPTURED and self.amount_captured > self.amount_refunded

    def result(self) -> CardProviderResult:
        """The charge as a call about it answers."""
        return CardProviderResult(self.reference, self.status, self.brand, self.last4)


@dataclass
class FakeRefund:
    """A refund as :class:`FlakyCardProvider` holds it: of charge ``charge``, made by a call
    with ``key``; ``status`` is ``refunded``, ``refund_pending`` or ``refund_failed``."""

    reference: str
    charge: str
    key: str | None
    owner: CallOwner | None
    amount: int
    status: CardProviderStatus
    created_at: datetime

    def result(self) -> CardProviderResult:
        """The refund as a call about it answers."""
        return CardProviderResult(self.reference, self.status)


_Outcome = CardProviderResult | CardError


class FlakyCardProvider(CardProviderBase):
    """A card provider that keeps its charges and refunds, remembers keys, and fails on demand.

    Every capability is on: holds captured in part, refunds in part, 3-D Secure (card
    :data:`FLAKY_THREE_D_SECURE_CARD`), keyed calls, lookups and events. :data:`FLAKY_DECLINED_CARD`
    is declined; every other usable card is approved. A charge keeps one reference for its life.

    Keys: a call repeated with a key already seen answers that first call's outcome, a decline
    included, without acting again (as Stripe's idempotency keys do); an ``authorize`` with an
    ``attempt_key`` is what :meth:`find_charge` finds, a ``refund`` with a ``key`` what
    :meth:`find_refund` finds. ``owner`` is kept on what a call makes and named by its events.

    Faults, each on the next ``count`` calls of one :class:`Call`, in the order they were set:

    - :meth:`lose_answers`: the call acts (and its outcome is kept under its key), then raises
      :class:`~treasury_core.errors.ProviderError`, as a timeout after the provider acted does;
    - :meth:`refuse_calls`: the call raises :class:`~treasury_core.errors.ProviderDidNotAct`
      before doing anything.

    Refunds succeed at once unless :meth:`hold_refunds` (they answer ``refund_pending``, settled
    later by :meth:`settle_refund`) or :meth:`decline_refunds` says otherwise.

    :attr:`charges` and :attr:`refunds` (by reference) and :attr:`calls` (every call made, in
    order) are there for a test to compare with the treasury's records. Deterministic:
    references count up, times come from ``clock``, nothing sleeps.
    """

    def __init__(
        self, clock: Clock, *, prefix: str = "fk", signing_secret: bytes | None = None
    ) -> None:
        self._clock = clock
        self._prefix = prefix
        # Random unless given: only this instance's deliveries are its own.
        self._secret = signing_secret or secrets.token_bytes(16)
        self._counter = 0
        self._faults: dict[Call, deque[_Fault]] = {}
        # Each planned refund: ``None`` to answer ``refund_pending``, else a decline's reason.
        self._refund_plan: deque[str | None] = deque()
        self._outcomes: dict[tuple[Call, str], _Outcome] = {}
        self.charges: dict[str, FakeCharge] = {}
        self.refunds: dict[str, FakeRefund] = {}
        self.calls: list[Call] = []

    # --- capabilities ----------------------------------------------------------------------

    def manual_capture_supported(self) -> bool:
        """Holds can be captured later, in full or in part."""
        return True

    def three_d_secure_supported(self) -> bool:
        """Card :data:`FLAKY_THREE_D_SECURE_CARD` asks for 3-D Secure."""
        return True

    def refunds_supported(self) -> bool:
        """Captured charges can be refunded."""
        return True

    def partial_refunds_supported(self) -> bool:
        """A refund may be for part of what was captured."""
        return True

    def attempt_keys_supported(self) -> bool:
        """``authorize`` takes ``attempt_key``."""
        return True

    def keyed_calls_supported(self) -> bool:
        """Money-moving calls take ``key`` and ``owner`` (see ``takes_keyed_calls``)."""
        return True

    def lookups_supported(self) -> bool:
        """:meth:`find_charge`, :meth:`find_refund` and :meth:`recent_charges` answer."""
        return True

    def provider_events_supported(self) -> bool:
        """:meth:`parse_event` reads what :meth:`delivery` signed."""
        return True

    def verification_supported(self) -> bool:
        """Off: cards are saved unverified."""
        return False

    def return_urls_supported(self) -> bool:
        """Off: its 3-D Secure verdict is given by the test, not read from a page."""
        return False

    def saved_cards_supported(self) -> bool:
        """Off: saved cards are sealed in the treasury's vault."""
        return False

    # --- faults ----------------------------------------------------------------------------

    def lose_answers(self, call: Call, count: int = 1) -> None:
        """The next ``count`` calls of ``call`` act, then raise ``ProviderError``."""
        self._faults.setdefault(call, deque()).extend([_Fault.LOSE_ANSWER] * count)

    def refuse_calls(self, call: Call, count: int = 1) -> None:
        """The next ``count`` calls of ``call`` raise ``ProviderDidNotAct`` and do nothing."""
        self._faults.setdefault(call, deque()).extend([_Fault.REFUSE] * count)

    def hold_refunds(self, count: int = 1) -> None:
        """The next ``count`` refunds answer ``refund_pending`` (see :meth:`settle_refund`)."""
        self._refund_plan.extend([None] * count)

    def decline_refunds(self, count: int = 1, failure_reason: str = "refund_declined") -> None:
        """The next ``count`` refunds are refused with ``failure_reason``."""
        self._refund_plan.extend([failure_reason] * count)

    def lose_hold(self, reference: str) -> None:
        """The hold of charge ``reference`` vanishes at the provider (as its expiry would): a
        capture raises :class:`HoldGone`."""
        charge = self._charge(reference)
        charge.status, charge.gone = _S.VOIDED, True

    def charge_for(self, attempt_key: str) -> FakeCharge:
        """The charge the ``authorize`` with ``attempt_key`` made (``KeyError`` if none)."""
        for charge in self.charges.values():
            if charge.attempt_key == attempt_key:
                return charge
        raise KeyError(attempt_key)

    def _fault(self, call: Call) -> _Fault | None:
        self.calls.append(call)
        queued = self._faults.get(call)
        return queued.popleft() if queued else None

    def _new_reference(self, kind: str) -> str:
        self._counter += 1
        return f"{self._prefix}_{kind}_{self._counter}"

    async def _keyed(
        self, call: Call, key: str | None, act: Callable[[], CardProviderResult]
    ) -> CardProviderResult:
        fault = self._fault(call)
        if fault is _Fault.REFUSE:
            raise ProviderDidNotAct(f"The card provider refused the {call} call; nothing was done")
        outcome = self._outcomes.get((call, key)) if key is not None else None
        if outcome is None:
            try:
                outcome = act()
            except CardError as refused:
                outcome = refused
            if key is not None:
                self._outcomes[(call, key)] = outcome
        if fault is _Fault.LOSE_ANSWER:
            raise ProviderError(f"The card provider's answer to {call} was lost")
        if isinstance(outcome, CardError):
            raise copy.copy(outcome)
        return outcome

    def _asked(self, call: Call) -> None:
        fault = self._fault(call)
        if fault is _Fault.REFUSE:
            raise ProviderDidNotAct(f"The card provider refused the {call} call")
        if fault is _Fault.LOSE_ANSWER:
            raise ProviderError(f"The card provider did not answer {call}")

    def _charge(self, reference: str) -> FakeCharge:
        charge = self.charges.get(reference)
        if charge is None:
            raise CardError(
                "No such charge at the card provider", failure_reason="unknown_reference"
            )
        return charge

    # --- the calls -------------------------------------------------------------------------

    async def authorize(
        self,
        card: CardData,
        amount: int,
        currency: str,
        *,
        capture: bool,
        attempt_key: str | None = None,
        owner: CallOwner | None = None,
    ) -> CardProviderResult:
        """Hold ``amount`` (``capture=False``) or charge it (**moves money**); the 3-D Secure
        card answers ``requires_action`` first."""

        def act() -> CardProviderResult:
            _check_amount(amount)
            number = refuse_unusable_card(card, self._clock.now().date())
            if number == FLAKY_DECLINED_CARD:
                raise CardError("Your card was declined", failure_reason="card_declined")
            if number == FLAKY_THREE_D_SECURE_CARD:
                status = _S.REQUIRES_ACTION
            else:
                status = _S.CAPTURED if capture else _S.AUTHORIZED
            charge = FakeCharge(
                reference=self._new_reference("ch"),
                attempt_key=attempt_key,
                owner=owner,
                amount=amount,
                currency=currency,
                capture=capture,
                status=status,
                created_at=self._clock.now(),
                brand=brand_of(number),
                last4=number[-4:],
                amount_captured=amount if status is _S.CAPTURED else 0,
            )
            self.charges[charge.reference] = charge
            return charge.result()

        return await self._keyed(Call.AUTHORIZE, attempt_key, act)

    async def capture(
        self, reference: str, amount: int, *, key: str | None = None
    ) -> CardProviderResult:
        """Capture up to the held amount. **Moves money.**"""

        def act() -> CardProviderResult:
            charge = self._charge(reference)
            if charge.gone:
                raise HoldGone()
            if charge.status is _S.CAPTURED:
                raise CardError(
                    "The charge has already been captured", failure_reason="already_captured"
                )
            if charge.status is _S.VOIDED:
                raise CardError(
                    "The authorization was voided", failure_reason="authorization_voided"
                )
            if charge.status is _S.REQUIRES_ACTION:
                raise CardError(
                    "The customer has not passed 3-D Secure",
                    failure_reason="authentication_required",
                )
            _check_amount(amount)
            if amount > charge.amount:
                raise CardError(
                    "The capture exceeds the authorized amount", failure_reason="amount_too_large"
                )
            charge.status, charge.amount_captured = _S.CAPTURED, amount
            return charge.result()

        return await self._keyed(Call.CAPTURE, key, act)

    async def void(self, reference: str, *, key: str | None = None) -> CardProviderResult:
        """Release a hold or abandon a charge awaiting 3-D Secure (twice is harmless)."""

        def act() -> CardProviderResult:
            charge = self._charge(reference)
            if charge.status is _S.CAPTURED:
                raise CardError(
                    "The charge has already been captured", failure_reason="already_captured"
                )
            charge.status = _S.VOIDED
            return charge.result()

        return await self._keyed(Call.VOID, key, act)

    async def refund(
        self,
        reference: str,
        amount: int,
        *,
        key: str | None = None,
        owner: CallOwner | None = None,
    ) -> CardProviderResult:
        """Return up to what is left of the captured amount to the card. **Moves money.**"""

        def act() -> CardProviderResult:
            charge = self._charge(reference)
            if charge.status is not _S.CAPTURED:
                raise CardError("The charge has not been captured", failure_reason="not_captured")
            _check_amount(amount)
            if amount > charge.amount_captured - charge.amount_refunded:
                raise CardError(
                    "The refund exceeds what is left of the charge",
                    failure_reason="amount_too_large",
                )
            pending = False
            if self._refund_plan:
                declined = self._refund_plan.popleft()
                if declined is not None:
                    raise CardError("The refund was declined", failure_reason=declined)
                pending = True
            refund = FakeRefund(
                reference=self._new_reference("re"),
                charge=reference,
                key=key,
                owner=owner,
                amount=amount,
                status=_S.REFUND_PENDING if pending else _S.REFUNDED,
                created_at=self._clock.now(),
            )
            # A pending refund counts against the charge at once, as Stripe's do.
            charge.amount_refunded += amount
            self.refunds[refund.reference] = refund
            return refund.result()

        return await self._keyed(Call.REFUND, key, act)

    async def complete_action(self, reference: str) -> CardProviderResult:
        """After 3-D Secure: hold, or capture (**moves money**) if the charge was a sale."""

        def act() -> CardProviderResult:
            charge = self._charge(reference)
            if charge.status is not _S.REQUIRES_ACTION:
                raise CardError(
                    "No customer action is pending on this charge",
                    failure_reason="no_action_required",
                )
            self._pass_challenge(charge)
            return charge.result()

        return await self._keyed(Call.COMPLETE_ACTION, None, act)

    def _pass_challenge(self, charge: FakeCharge) -> None:
        if charge.capture:
            charge.status, charge.amount_captured = _S.CAPTURED, charge.amount
        else:
            charge.status = _S.AUTHORIZED

    # --- lookups ---------------------------------------------------------------------------

    async def find_charge(self, attempt_key: str) -> CardProviderResult | None:
        """The charge the ``authorize`` with ``attempt_key`` made, as it stands, or ``None``."""
        self._asked(Call.FIND_CHARGE)
        for charge in self.charges.values():
            if charge.attempt_key == attempt_key:
                return charge.result()
        return None

    async def find_refund(self, reference: str, key: str) -> CardProviderResult | None:
        """The refund of charge ``reference`` the ``refund`` with ``key`` made, or ``None``."""
        self._asked(Call.FIND_REFUND)
        for refund in self.refunds.values():
            if refund.charge == reference and refund.key == key:
                return refund.result()
        return None

    async def recent_charges(self, since: datetime) -> Sequence[ProviderCharge]:
        """Every charge made on or after ``since``, oldest first."""
        self._asked(Call.RECENT_CHARGES)
        return [
            ProviderCharge(
                reference=c.reference,
                owner=c.owner,
                attempt_key=c.attempt_key,
                status=c.status,
                amount=c.amount,
                currency=c.currency,
                amount_captured=c.amount_captured,
                amount_refunded=c.amount_refunded,
                created_at=c.created_at,
            )
            for c in self.charges.values()
            if c.created_at >= since
        ]

    # --- what happens at the provider on its own, and its events ---------------------------

    def finish_challenge(self, reference: str) -> CardProviderEvent:
        """The customer passes 3-D Secure on the provider's page: the charge is held (or
        captured, for a sale) there; the event the provider sends about it."""
        charge = self._charge(reference)
        if charge.status is not _S.REQUIRES_ACTION:
            raise ValueError(f"charge {reference} does not wait for 3-D Secure")
        self._pass_challenge(charge)
        return self.event(_K.CAPTURED if charge.capture else _K.AUTHORIZED, reference)

    def settle_refund(
        self, reference: str, *, succeeded: bool = True, failure_reason: str = "refund_failed"
    ) -> CardProviderEvent:
        """Finish the ``refund_pending`` refund ``reference``; the event the provider sends."""
        refund = self.refunds[reference]
        if refund.status is not _S.REFUND_PENDING:
            raise ValueError(f"refund {reference} is not pending")
        if succeeded:
            refund.status = _S.REFUNDED
            return self.event(_K.REFUND_SUCCEEDED, refund.charge, refund=reference)
        refund.status = _S.REFUND_FAILED
        self.charges[refund.charge].amount_refunded -= refund.amount
        return self.event(
            _K.REFUND_FAILED, refund.charge, refund=reference, failure_reason=failure_reason
        )

    def event(
        self,
        kind: CardProviderEventKind,
        reference: str,
        *,
        refund: str | None = None,
        failure_reason: str | None = None,
    ) -> CardProviderEvent:
        """The event the provider sends about charge ``reference`` (and one of its refunds),
        naming the owner its call set: amounts as the port says (``refunded``: the total
        refunded so far; ``authorized`` and ``captured``: the charge's amount)."""
        charge = self._charge(reference)
        owner = charge.owner
        amount: int | None = None
        if refund is not None:
            owner = self.refunds[refund].owner
        elif kind is _K.REFUNDED:
            amount = charge.amount_refunded
        elif kind in (_K.AUTHORIZED, _K.CAPTURED):
            amount = charge.amount
        return CardProviderEvent(
            id=self._new_reference("evt"),
            type=f"flaky.{kind.value}",
            kind=kind,
            reference=reference,
            amount=amount,
            currency=charge.currency,
            failure_reason=failure_reason,
            refund=refund,
            owner=owner,
        )

    def delivery(self, event: CardProviderEvent) -> tuple[bytes, dict[str, str]]:
        """``event`` as the provider delivers it: a JSON body and its signature header, for a
        test that posts it to the treasury's webhook endpoint."""
        fields: dict[str, object] = {
            "id": event.id,
            "type": event.type,
            "kind": None if event.kind is None else event.kind.value,
            "reference": event.reference,
            "amount": event.amount,
            "currency": event.currency,
            "dispute": event.dispute,
            "failure_reason": event.failure_reason,
            "refund": event.refund,
            "owner": None
            if event.owner is None
            else [event.owner.company_id, event.owner.payment_intent_id, event.owner.refund_id],
        }
        body = json.dumps(fields).encode()
        return body, {SIGNATURE_HEADER: self._sign(body)}

    def _sign(self, body: bytes) -> str:
        return hmac.new(self._secret, body, hashlib.sha256).hexdigest()

    def parse_event(self, body: bytes, headers: Mapping[str, str]) -> CardProviderEvent:
        """The event of a body :meth:`delivery` signed; anything else is refused
        (:class:`BadProviderEvent`)."""
        signature = next(
            (v for k, v in headers.items() if k.lower() == SIGNATURE_HEADER.lower()), ""
        )
        if not hmac.compare_digest(signature, self._sign(body)):
            raise BadProviderEvent("The event is not signed by the card provider")
        try:
            fields = json.loads(body)
            owner = fields["owner"]
            kind = fields["kind"]
            return CardProviderEvent(
                id=fields["id"],
                type=fields["type"],
                kind=None if kind is None else CardProviderEventKind(kind),
                reference=fields["reference"],
                amount=fields["amount"],
                currency=fields["currency"],
                dispute=fields["dispute"],
                failure_reason=fields["failure_reason"],
                refund=fields["refund"],
                owner=None if owner is None else CallOwner(*owner),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise BadProviderEvent("The event body is not the card provider's") from exc


def _check_amount(amount: int) -> None:
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise CardError(
            "The amount must be a positive whole number of minor units",
            failure_reason="invalid_amount",
        )
