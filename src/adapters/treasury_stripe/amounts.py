"""Amounts between ISO 4217 minor units (the core's) and Stripe's units, which differ for a
few currencies."""

from __future__ import annotations

from treasury_core.errors import (
    ValidationFailed,
)
from treasury_stripe.errors import refuse


def check_amount(amount: int) -> None:
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise refuse("The amount must be a positive whole number of minor units", "invalid_amount")


#: Where Stripe's minor unit is not ISO 4217's (the core's): Stripe's amount is ours times
#: the factor. ISK is zero-decimal in ISO but two-decimal in Stripe's API (whole krónur only,
#: so always a multiple of 100); MGA has two ISO decimals (the core's table) but is zero-decimal
#: in Stripe's, so only whole ariary can be sent.
_STRIPE_SCALE: dict[str, tuple[int, int]] = {"ISK": (100, 1), "MGA": (1, 100)}
#: Three-decimal currencies whose amounts Stripe takes only in tens of the minor unit.
_TENS_ONLY = frozenset({"BHD", "JOD", "KWD", "OMR", "TND"})


def to_stripe_amount(amount: int, currency: str) -> int:
    """``amount`` (ISO 4217 minor units of ``currency``) in Stripe's units.

    Raises :class:`ValidationFailed` (400) for an amount Stripe cannot take exactly, before any
    call: rounding it would charge another amount than the intent's.
    """
    code = currency.upper()
    multiply, divide = _STRIPE_SCALE.get(code, (1, 1))
    if amount % divide:
        raise ValidationFailed(
            f"The card provider takes only whole units of {code}: the amount must be a "
            f"multiple of {divide}",
            param="amount",
        )
    if code in _TENS_ONLY and amount % 10:
        raise ValidationFailed(
            f"The card provider takes {code} amounts only in multiples of 10 minor units "
            "(the last digit must be 0)",
            param="amount",
        )
    return amount * multiply // divide


def from_stripe_amount(amount: int, currency: str) -> int:
    """``amount`` in Stripe's units of ``currency`` as ISO 4217 minor units (the inverse of
    :func:`to_stripe_amount`; Stripe's ISK amounts are whole krónur, so nothing is lost)."""
    multiply, divide = _STRIPE_SCALE.get(currency.upper(), (1, 1))
    return amount * divide // multiply
