"""The smallest amount a payment intent may charge, per currency.

Card networks and acquirers refuse charges whose fees would exceed them; Stripe, for one,
publishes a per-currency minimum of roughly half a US dollar. A merchant should learn of it when
the intent is created (400 ``amount_too_small``), not from a decline at the customer's payment.

:data:`DEFAULT_MIN_AMOUNTS` covers the service's default currencies; ``TreasuryConfig.min_amounts``
(``TREASURY_MIN_AMOUNTS``) overrides entries one by one, and a currency in neither has no
minimum beyond one minor unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from treasury_core.errors import ValidationFailed

#: Minor units, per ISO code. The card networks' common practice as Stripe publishes it (USD,
#: EUR, CHF, CAD, AUD and SGD 0.50, GBP 0.30, JPY 50); KWD, which that table does not list, gets
#: the same half a US dollar at a rounded rate (0.150 KWD, three decimals).
DEFAULT_MIN_AMOUNTS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "USD": 50,
        "EUR": 50,
        "GBP": 30,
        "JPY": 50,
        "CHF": 50,
        "CAD": 50,
        "AUD": 50,
        "SGD": 50,
        "KWD": 150,
    }
)


def min_amount(currency: str, overrides: Mapping[str, int]) -> int:
    """The smallest chargeable amount of ``currency``: the override, else the default, else 1."""
    return overrides.get(currency, DEFAULT_MIN_AMOUNTS.get(currency, 1))


def check_min_amount(
    amount: int, currency: str, overrides: Mapping[str, int], *, param: str = "billing_amount"
) -> None:
    """Raise :class:`ValidationFailed` (400 ``amount_too_small``, naming ``param`` and the
    minimum in minor units) when ``amount`` of ``currency`` is below its minimum."""
    minimum = min_amount(currency, overrides)
    if amount < minimum:
        raise ValidationFailed(
            f"{param} must be at least {minimum} (minor units of {currency})",
            code="amount_too_small",
            param=param,
        )
