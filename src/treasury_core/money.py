"""Money arithmetic: the one rounding function and FX conversion with ``Decimal`` rates.

Rules:
- Amounts are ``int`` minor units; rates are ``Decimal``; a ``float`` is refused everywhere.
- :func:`round_minor` is the only place a fractional amount becomes an integer: half-even
  (banker's rounding), so rounding errors do not drift one way over many conversions.
- :func:`convert` scales by both currencies' exponents, multiplies by the rate exactly, then rounds
  once. The result differs from the exact value by at most half a minor unit.
"""

from __future__ import annotations

from decimal import (
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    DivisionByZero,
    InvalidOperation,
    Overflow,
    localcontext,
)

from treasury_core.currency import Currency

# Wide enough that amounts up to 10^18 minor units times any sane rate are exact before rounding.
# Inexact and Rounded are not trapped (the result is rounded once, by round_minor); invalid
# operations and overflow are, so a nonsense input raises instead of becoming NaN.
_EXACT = Context(prec=60, traps=[InvalidOperation, Overflow, DivisionByZero])


def round_minor(value: Decimal) -> int:
    """Round an exact amount in minor units to an ``int``, half to even. The project's one rule."""
    if not isinstance(value, Decimal):
        raise TypeError(f"round_minor takes a Decimal, not {type(value).__name__}")
    if not value.is_finite():
        raise ValueError("cannot round a non-finite amount")
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_EVEN, context=_EXACT))


def exact_conversion(amount: int, source: Currency, target: Currency, rate: Decimal) -> Decimal:
    """The exact value of ``amount`` (minor units of ``source``) in minor units of ``target``.

    ``rate`` is major units of ``target`` per one major unit of ``source``.
    """
    _check_amount(amount)
    _check_rate(rate)
    with localcontext(_EXACT):
        scale = Decimal(10) ** (target.decimal_places - source.decimal_places)
        return Decimal(amount) * rate * scale


def convert(amount: int, source: Currency, target: Currency, rate: Decimal) -> int:
    """Convert ``amount`` minor units of ``source`` into minor units of ``target`` at ``rate``."""
    return round_minor(exact_conversion(amount, source, target, rate))


def _check_amount(amount: int) -> None:
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise TypeError(f"amounts are int minor units, not {type(amount).__name__}")


def _check_rate(rate: Decimal) -> None:
    if not isinstance(rate, Decimal):
        raise TypeError(f"rates are Decimal, not {type(rate).__name__}")
    if not rate.is_finite() or rate <= 0:
        raise ValueError(f"a rate must be a positive finite Decimal, got {rate}")
