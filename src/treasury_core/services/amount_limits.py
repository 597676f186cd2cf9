"""The configured ceiling on one amount, checked before anything moves."""

from __future__ import annotations

from treasury_core.errors import ValidationFailed


def check_amount(amount: int, param: str, maximum: int) -> int:
    """``amount`` if it is at most ``maximum`` (the configured ``max_amount``)."""
    if amount > maximum:
        raise ValidationFailed(
            f"{param} must be at most {maximum}",
            param=param,
            code="amount_too_large",
        )
    return amount
