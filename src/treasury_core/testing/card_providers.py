"""A card provider with every optional capability off, for tests.

:class:`SalesOnlyCardProvider` is the least the card provider port accepts: it charges cards
(``authorize`` with ``capture=True``) and nothing else. Every ``*_supported()`` flag answers
``False`` and every call the flags rule out is refused the way the port documents, so a test
can check that code built on the port (the services, an application, a contract) copes with a
provider that offers nothing optional. It keeps its charges in memory and makes no network call.

Its test cards: ``4000000000000002`` is declined (``card_declined``); every other card that
passes :func:`~treasury_core.ports.card_provider.refuse_unusable_card` is approved.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from treasury_core.cards.numbers import brand_of
from treasury_core.errors import CardError
from treasury_core.ports import Clock
from treasury_core.ports.card_provider import (
    CardData,
    CardProviderBase,
    CardProviderResult,
    CardProviderStatus,
    refuse_unusable_card,
)

__all__ = ["SALES_ONLY_DECLINED_CARD", "SalesOnlyCardProvider"]

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
