"""The sandbox card provider: the test-card table of the decisions, and no state of its own.

Every charge's behaviour, amount and state live in its reference, so any number of server
processes, and a process after a restart, answer the same for the same reference::

    ch_<token>_<behaviour>_<amount>_<state>     a charge
    re_<token>_<amount>                          a refund

``token`` is 24 random hex digits (stable for the life of a charge); ``amount`` is in minor
units (the captured amount once captured); ``behaviour`` and ``state`` are one of:

==========  ==================================================================================
behaviour   meaning
==========  ==================================================================================
``ok``      approved; captures succeed
``cd``      4000000000000341: every capture refused, ``capture_declined``
``hg``      4000000000000259: the hold disappears; capture raises :class:`HoldGone`
            (``failure_reason`` ``authorization_expired``)
``cl``      4000000000000051: captured, then a chargeback opens and is lost
``cw``      4000000000000077: captured, then a chargeback opens and is won
==========  ==================================================================================

==========  ==================================================================================
state       meaning
==========  ==================================================================================
``a``       authorized: a hold
``c``       captured
``v``       voided
``ra``      requires 3-D Secure, then a hold (started with ``capture=False``)
``rc``      requires 3-D Secure, then a capture (started with ``capture=True``)
==========  ==================================================================================

Each call returns the charge's next reference. Being stateless, the provider cannot tell that
an older reference of the same charge is stale: the caller keeps the latest one (the port's
contract) and its own record of what was captured and refunded.

Declines raise ``CardError`` before any reference exists. No card number or CVC is ever put in a
reference, a result or a message, and nothing is logged.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from treasury_core.cards.numbers import brand_of
from treasury_core.errors import CardError
from treasury_core.ports import Clock
from treasury_core.ports.card_provider import (
    CardData,
    CardProviderBase,
    CardProviderResult,
    CardProviderStatus,
    ChargebackOutcome,
    HoldGone,
    refuse_unusable_card,
)

#: Test cards refused at authorization, with their ``failure_reason``.
DECLINED_CARDS: dict[str, str] = {
    "4000000000000002": "card_declined",
    "4000000000009995": "insufficient_funds",
    "4000000000000069": "expired_card",
    "4000000000000127": "incorrect_cvc",
}

#: The test card that requires 3-D Secure.
THREE_D_SECURE_CARD = "4000000000003220"

#: Test cards that are approved but behave specially afterwards, with their behaviour code.
SPECIAL_CARDS: dict[str, str] = {
    "4000000000000341": "cd",
    "4000000000000259": "hg",
    "4000000000000051": "cl",
    "4000000000000077": "cw",
}

_DECLINE_MESSAGES: dict[str, str] = {
    "card_declined": "Your card was declined",
    "insufficient_funds": "Your card has insufficient funds",
    "expired_card": "Your card has expired",
    "incorrect_cvc": "Your card's security code is incorrect",
}

_CHARGE = re.compile(
    r"ch_(?P<token>[0-9a-f]{24})_(?P<code>ok|cd|hg|cl|cw)_(?P<amount>[1-9]\d*)_(?P<state>a|c|v|ra|rc)"
)
_REFUND = re.compile(r"re_[0-9a-f]{24}_[1-9]\d*")

_STATUS = {
    "a": CardProviderStatus.AUTHORIZED,
    "c": CardProviderStatus.CAPTURED,
    "v": CardProviderStatus.VOIDED,
    "ra": CardProviderStatus.REQUIRES_ACTION,
    "rc": CardProviderStatus.REQUIRES_ACTION,
}

_CHARGEBACKS: dict[str, ChargebackOutcome] = {"cl": "lost", "cw": "won"}


@dataclass(frozen=True, slots=True)
class _Charge:
    token: str
    code: str
    amount: int
    state: str

    @property
    def reference(self) -> str:
        return f"ch_{self.token}_{self.code}_{self.amount}_{self.state}"

    def moved_to(self, state: str, amount: int | None = None) -> _Charge:
        return _Charge(self.token, self.code, self.amount if amount is None else amount, state)

    def result(self, number: str | None = None) -> CardProviderResult:
        return CardProviderResult(
            reference=self.reference,
            status=_STATUS[self.state],
            brand=None if number is None else brand_of(number),
            last4=None if number is None else number[-4:],
        )


def _refuse(message: str, failure_reason: str) -> CardError:
    return CardError(message, failure_reason=failure_reason)


def _check_amount(amount: int) -> None:
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise _refuse("The amount must be a positive whole number of minor units", "invalid_amount")


def _charge(reference: str) -> _Charge:
    match = _CHARGE.fullmatch(reference) if isinstance(reference, str) else None
    if match is None:
        raise _refuse("No such charge at the card provider", "unknown_reference")
    return _Charge(
        token=match["token"], code=match["code"], amount=int(match["amount"]), state=match["state"]
    )


class SandboxCardProvider(CardProviderBase):
    """A card provider that follows the sandbox test-card table; stateless (see the module)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def manual_capture_supported(self) -> bool:
        """Holds can be captured later."""
        return True

    def three_d_secure_supported(self) -> bool:
        """Card 4000000000003220 requires 3-D Secure."""
        return True

    def refunds_supported(self) -> bool:
        """Captured charges can be refunded."""
        return True

    def partial_refunds_supported(self) -> bool:
        """A refund may be for part of the captured amount."""
        return True

    def attempt_keys_supported(self) -> bool:
        """Off: the sandbox loses no answers, so there is no retry to recognize."""
        return False

    def return_urls_supported(self) -> bool:
        """Off: the sandbox has no 3-D Secure page of its own to send the customer back from."""
        return False

    def saved_cards_supported(self) -> bool:
        """Off: saved cards are sealed in the treasury's vault."""
        return False

    def provider_events_supported(self) -> bool:
        """Off: the sandbox answers every call at once and sends no events."""
        return False

    def keyed_calls_supported(self) -> bool:
        """Off: no ``key`` or ``owner`` is passed (no answer is ever lost)."""
        return False

    def lookups_supported(self) -> bool:
        """Off: the sandbox keeps no charges to be asked about (it is stateless)."""
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
        """Hold ``amount`` (``capture=False``, no money moves) or charge it (**moves money**).

        ``attempt_key`` is never passed (``attempt_keys_supported`` is off): the sandbox loses
        no answers, so there is no retry to recognize.
        """
        _check_amount(amount)
        number = refuse_unusable_card(card, self._clock.now().date())
        if number in DECLINED_CARDS:
            reason = DECLINED_CARDS[number]
            raise _refuse(_DECLINE_MESSAGES[reason], reason)
        token = secrets.token_hex(12)
        if number == THREE_D_SECURE_CARD:
            pending = _Charge(token, "ok", amount, "rc" if capture else "ra")
            return pending.result(number)
        code = SPECIAL_CARDS.get(number, "ok")
        if capture and code == "cd":
            raise _refuse("The card provider refused the capture", "capture_declined")
        return _Charge(token, code, amount, "c" if capture else "a").result(number)

    def verification_supported(self) -> bool:
        """Cards are verified before they are saved."""
        return True

    async def verify(self, card: CardData) -> CardProviderResult:
        """A zero-amount check before a card is saved; moves no money.

        The cards declined at authorization are declined here too, except
        4000000000009995: a check of nothing cannot lack funds, so that card is saved and
        declined when it is charged (as real networks behave). 3-D Secure is asked for when
        the saved card is charged, not when it is saved.
        """
        number = refuse_unusable_card(card, self._clock.now().date())
        reason = DECLINED_CARDS.get(number)
        if reason is not None and reason != "insufficient_funds":
            raise _refuse(_DECLINE_MESSAGES[reason], reason)
        return CardProviderResult(
            reference=f"vf_{secrets.token_hex(12)}",
            status=CardProviderStatus.VERIFIED,
            brand=brand_of(number),
            last4=number[-4:],
        )

    async def capture(self, reference: str, amount: int) -> CardProviderResult:
        """Capture up to the held amount. **Moves money.**"""
        charge = _charge(reference)
        if charge.state == "c":
            raise _refuse("The charge has already been captured", "already_captured")
        if charge.state == "v":
            raise _refuse("The authorization was voided", "authorization_voided")
        if charge.state in ("ra", "rc"):
            raise _refuse("The customer has not passed 3-D Secure", "authentication_required")
        _check_amount(amount)
        if amount > charge.amount:
            raise _refuse("The capture exceeds the authorized amount", "amount_too_large")
        if charge.code == "cd":
            raise _refuse("The card provider refused the capture", "capture_declined")
        if charge.code == "hg":
            raise HoldGone()
        return charge.moved_to("c", amount).result()

    async def void(self, reference: str) -> CardProviderResult:
        """Release a hold or abandon a charge awaiting 3-D Secure; voiding twice is harmless."""
        charge = _charge(reference)
        if charge.state == "c":
            raise _refuse("The charge has already been captured", "already_captured")
        return charge.moved_to("v").result()

    async def refund(self, reference: str, amount: int) -> CardProviderResult:
        """Return up to the captured amount to the card. **Moves money.**"""
        charge = _charge(reference)
        if charge.state == "v":
            raise _refuse("The authorization was voided", "authorization_voided")
        if charge.state != "c":
            raise _refuse("The charge has not been captured", "charge_not_captured")
        _check_amount(amount)
        if amount > charge.amount:
            raise _refuse("The refund exceeds the captured amount", "amount_too_large")
        return CardProviderResult(
            reference=f"re_{secrets.token_hex(12)}_{amount}", status=CardProviderStatus.REFUNDED
        )

    async def complete_action(self, reference: str) -> CardProviderResult:
        """After 3-D Secure: hold, or capture (**moves money**) if started with ``capture``."""
        charge = _charge(reference)
        if charge.state not in ("ra", "rc"):
            raise _refuse("No customer action is pending on this charge", "no_action_required")
        return charge.moved_to("c" if charge.state == "rc" else "a").result()

    def chargeback_outcome(self, reference: str) -> ChargebackOutcome | None:
        """``lost`` for 4000000000000051, ``won`` for 4000000000000077, else ``None``."""
        if _REFUND.fullmatch(reference):
            return None
        return _CHARGEBACKS.get(_charge(reference).code)
