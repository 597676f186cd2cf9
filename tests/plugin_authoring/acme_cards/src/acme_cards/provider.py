"""The card provider adapter: treasury-core's card provider port on top of Acme's API.

Money moves on ``authorize(capture=True)``, ``capture`` and ``refund``; ``authorize(capture=False)``
and ``void`` only place and release holds. Acme's answers are translated at this boundary:
a refusal (402, or a 4xx about the charge's state) becomes a ``CardError`` with a
``failure_reason`` from treasury-core's vocabulary, an expired hold becomes ``HoldGone``, and
anything else (5xx, timeouts) becomes a ``ProviderError``; Acme's exception is kept as the
cause and never shown to the customer.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from acme_cards.api import AcmeApi, AcmeApiError
from treasury_core.cards.numbers import brand_of
from treasury_core.errors import CardError, ProviderError
from treasury_core.ports.card_provider import (
    CardData,
    CardProviderBase,
    CardProviderResult,
    CardProviderStatus,
    HoldGone,
)

T = TypeVar("T")

#: Acme's codes for refusals, and the ``failure_reason`` each becomes.
FAILURE_REASONS = {
    "do_not_honor": "card_declined",
    "insufficient_funds": "insufficient_funds",
    "charge_captured": "already_captured",
    "charge_voided": "authorization_voided",
    "charge_not_captured": "charge_not_captured",
    "amount_too_large": "amount_too_large",
    "no_such_charge": "unknown_reference",
}

_STATUS = {
    "authorized": CardProviderStatus.AUTHORIZED,
    "captured": CardProviderStatus.CAPTURED,
    "voided": CardProviderStatus.VOIDED,
}


class AcmeCardProvider(CardProviderBase):
    """Cards through Acme Payments: holds, captures, voids, full and partial refunds."""

    def __init__(self, api: AcmeApi) -> None:
        self.api = api

    def manual_capture_supported(self) -> bool:
        """Acme holds can be captured later."""
        return True

    def refunds_supported(self) -> bool:
        """Captured charges can be refunded."""
        return True

    def partial_refunds_supported(self) -> bool:
        """Refunds may be for part of the captured amount."""
        return True

    # 3-D Secure and card verification stay off (CardProviderBase's defaults): Acme's API has
    # them, this adapter does not implement them yet, and the services then never ask.

    async def authorize(
        self, card: CardData, amount: int, currency: str, *, capture: bool
    ) -> CardProviderResult:
        """Hold ``amount`` (no money moves), or with ``capture`` charge it: **moves money**."""
        charge = await _call(
            self.api.create_charge(
                card.number,
                card.expiry_month,
                card.expiry_year,
                card.cvc,
                amount,
                currency,
                capture=capture,
            )
        )
        return CardProviderResult(
            reference=charge.id,
            status=_STATUS[charge.status],
            brand=brand_of(card.number),
            last4=charge.last4,
        )

    async def capture(self, reference: str, amount: int) -> CardProviderResult:
        """Capture ``amount`` of a hold. **Moves money.**"""
        charge = await _call(self.api.capture(reference, amount))
        return CardProviderResult(reference=charge.id, status=_STATUS[charge.status])

    async def void(self, reference: str) -> CardProviderResult:
        """Release a hold. Moves no money."""
        charge = await _call(self.api.void(reference))
        return CardProviderResult(reference=charge.id, status=_STATUS[charge.status])

    async def refund(self, reference: str, amount: int) -> CardProviderResult:
        """Return ``amount`` of a captured charge to the card. **Moves money.**"""
        refund_id = await _call(self.api.refund(reference, amount))
        return CardProviderResult(reference=refund_id, status=CardProviderStatus.REFUNDED)


async def _call(request: Awaitable[T]) -> T:
    """Await an Acme call, translating its errors into treasury-core's."""
    try:
        return await request
    except AcmeApiError as error:
        if error.code == "authorization_expired":
            raise HoldGone() from error
        reason = FAILURE_REASONS.get(error.code)
        if reason is not None and error.status < 500:
            raise CardError("The card payment was refused", failure_reason=reason) from error
        raise ProviderError("The card provider is unavailable; try again later") from error
