"""The card provider port (payments issue; shaped here after pretix's payment providers).

Required methods authorize, capture, void and refund. Optional capabilities are announced by
``*_supported()`` methods that default to ``False``. Every refusal is a ``CardError`` with a
``failure_reason``; every other failure a ``ProviderError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class CardProviderResult:
    """What the provider answered: its reference and whether the customer must act (3-D Secure)."""

    reference: str
    requires_action: bool = False


@runtime_checkable
class CardProvider(Protocol):
    """A card acquirer."""

    async def authorize(self, card_ref: str, amount: int, currency: str) -> CardProviderResult:
        """Place a hold of ``amount`` on the card. Reserves money at the issuer; moves none."""
        ...

    async def capture(self, reference: str, amount: int) -> CardProviderResult:
        """Capture a hold in full. Moves money."""
        ...

    async def void(self, reference: str) -> None:
        """Release a hold. Moves no money."""
        ...

    async def refund(self, reference: str, amount: int) -> CardProviderResult:
        """Return captured money to the card. Moves money."""
        ...

    def manual_capture_supported(self) -> bool:
        """Whether holds can be captured later (default ``False``)."""
        ...
