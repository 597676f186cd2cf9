"""Card numbers: normalizing, the Luhn check, the brand, and the checks a card must pass.

Pure functions (standard library only). :func:`check_card` is what a caller runs before a card
reaches the card provider or the vault; the others are its building blocks.

No message raised here contains the card number, any part of it, or the CVC: error messages end
up in logs and HTTP answers, and a card number in either is a PCI incident.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

from treasury_core.errors import ValidationFailed

__all__ = [
    "BRAND_LENGTHS",
    "MAX_YEARS_AHEAD",
    "MSG_EXPIRED_CARD",
    "MSG_INCORRECT_NUMBER",
    "MSG_INVALID_CVC",
    "MSG_INVALID_EXPIRY_MONTH",
    "MSG_INVALID_EXPIRY_YEAR",
    "MSG_INVALID_NUMBER",
    "brand_of",
    "check_card",
    "full_year",
    "luhn_valid",
    "normalize",
]

#: The number is not digits, or its length is not one its brand issues.
MSG_INVALID_NUMBER = "The card number is not a valid card number"
#: The number fails the Luhn check (a typo, most likely).
MSG_INCORRECT_NUMBER = "The card number is incorrect"
#: The expiry month is not 1–12.
MSG_INVALID_EXPIRY_MONTH = "The card's expiry month is invalid"
#: The expiry year is implausible (before 1000, or more than :data:`MAX_YEARS_AHEAD` ahead).
MSG_INVALID_EXPIRY_YEAR = "The card's expiry year is invalid"
#: The card's expiry month is over.
MSG_EXPIRED_CARD = "The card has expired"
#: The security code is not digits, or has the wrong number of digits for the brand.
MSG_INVALID_CVC = "The card's security code is invalid"

#: An expiry year further ahead than this many years is refused as a typo: no issuer prints one.
MAX_YEARS_AHEAD = 50

#: The lengths each brand issues; ``unknown`` accepts any length ISO/IEC 7812 allows.
BRAND_LENGTHS: Mapping[str, frozenset[int]] = {
    "visa": frozenset({13, 16, 19}),
    "mastercard": frozenset({16}),
    "amex": frozenset({15}),
    "discover": frozenset(range(16, 20)),
    "diners": frozenset(range(14, 20)),
    "jcb": frozenset(range(16, 20)),
    "unionpay": frozenset(range(16, 20)),
    "unknown": frozenset(range(12, 20)),
}

# IIN ranges as (prefix length, first, last, brand), all bounds inclusive. Ranges of different
# brands do not overlap, so the order does not matter for correctness.
_IIN_RANGES: tuple[tuple[int, int, int, str], ...] = (
    (1, 4, 4, "visa"),
    (2, 51, 55, "mastercard"),
    (4, 2221, 2720, "mastercard"),
    (2, 34, 34, "amex"),
    (2, 37, 37, "amex"),
    (4, 6011, 6011, "discover"),
    (3, 644, 649, "discover"),
    (2, 65, 65, "discover"),
    (2, 36, 36, "diners"),
    (3, 300, 305, "diners"),
    (2, 38, 39, "diners"),
    (4, 3528, 3589, "jcb"),
    (2, 62, 62, "unionpay"),
)

# Only what card numbers are printed with; anything else (letters, dots, tabs) stays and fails.
_SEPARATORS = str.maketrans("", "", " -")


def normalize(raw: str) -> str:
    """``raw`` without the spaces and dashes card numbers are printed and typed with.

    What remains is not checked: it may still contain other characters or fail the Luhn check
    (see :func:`check_card`).
    """
    return raw.translate(_SEPARATORS)


def _is_ascii_digits(text: str) -> bool:
    # str.isdigit alone accepts superscripts and other scripts' digits ("²", "٣").
    return text.isascii() and text.isdigit()


def luhn_valid(digits: str) -> bool:
    """Whether ``digits`` (ASCII digits only) passes the Luhn (mod 10) check.

    False for an empty string or anything that is not ASCII digits.
    """
    if not _is_ascii_digits(digits):
        return False
    total = 0
    # From the right, every second digit is doubled (and 9 subtracted if it exceeds 9).
    for position, char in enumerate(reversed(digits)):
        digit = ord(char) - 48
        if position % 2 == 1:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def brand_of(digits: str) -> str:
    """The card brand from the leading digits (the IIN) of ``digits``.

    One of ``visa``, ``mastercard``, ``amex``, ``discover``, ``diners``, ``jcb``, ``unionpay``
    or ``unknown``. Only the prefix is looked at; the length is :func:`check_card`'s business
    (:data:`BRAND_LENGTHS`).
    """
    for width, first, last, brand in _IIN_RANGES:
        prefix = digits[:width]
        if len(prefix) == width and _is_ascii_digits(prefix) and first <= int(prefix) <= last:
            return brand
    return "unknown"


def _cvc_lengths(brand: str) -> frozenset[int]:
    # American Express prints 4 digits on the front; the others 3 on the back. An unknown brand
    # could be either, so both are let through.
    if brand == "amex":
        return frozenset({4})
    if brand == "unknown":
        return frozenset({3, 4})
    return frozenset({3})


def full_year(expiry_year: int) -> int:
    """The four-digit year of an expiry: two digits as printed on a card (``27``) are 2027."""
    return 2000 + expiry_year if 0 <= expiry_year < 100 else expiry_year


def check_card(
    number: str, expiry_month: int, expiry_year: int, cvc: str | None, *, today: date
) -> str:
    """The card number's digits if the card passes every check; else :class:`ValidationFailed`.

    Checked in this order, the first failure raised (``code``, ``param``):

    * the number, after :func:`normalize`, is ASCII digits of a length its brand issues
      (``invalid_number``, ``card_number``), and passes the Luhn check (``incorrect_number``);
    * ``expiry_month`` is 1–12 (``invalid_expiry_month``, ``expiry_month``);
    * ``expiry_year`` is at least 1000 and at most :data:`MAX_YEARS_AHEAD` years after
      ``today``'s year (``invalid_expiry_year``, ``expiry_year``). A year below 100 is read as
      two digits, as printed on the card: ``27`` is 2027 (and ``0`` is 2000);
    * the card has not expired: it is valid through the last day of its expiry month, so a card
      expiring this month still passes (``expired_card``, ``expiry_year``);
    * ``cvc``, if given, is 4 ASCII digits for American Express, 3 for other brands, 3 or 4 for
      an unknown brand (``invalid_cvc``, ``cvc``).

    ``today`` is the business date of the caller's clock, so the sandbox clock can expire cards.
    The messages are the ``MSG_*`` constants: none contains the number or the CVC.
    """
    digits = normalize(number)
    if not _is_ascii_digits(digits):
        raise ValidationFailed(MSG_INVALID_NUMBER, code="invalid_number", param="card_number")
    brand = brand_of(digits)
    if len(digits) not in BRAND_LENGTHS[brand]:
        raise ValidationFailed(MSG_INVALID_NUMBER, code="invalid_number", param="card_number")
    if not luhn_valid(digits):
        raise ValidationFailed(MSG_INCORRECT_NUMBER, code="incorrect_number", param="card_number")

    if not 1 <= expiry_month <= 12:
        raise ValidationFailed(
            MSG_INVALID_EXPIRY_MONTH, code="invalid_expiry_month", param="expiry_month"
        )
    # A negative year is not a two-digit year; it falls through to the < 1000 refusal.
    year = full_year(expiry_year)
    if year < 1000 or year > today.year + MAX_YEARS_AHEAD:
        raise ValidationFailed(
            MSG_INVALID_EXPIRY_YEAR, code="invalid_expiry_year", param="expiry_year"
        )
    if (year, expiry_month) < (today.year, today.month):
        raise ValidationFailed(MSG_EXPIRED_CARD, code="expired_card", param="expiry_year")

    if cvc is not None and not (_is_ascii_digits(cvc) and len(cvc) in _cvc_lengths(brand)):
        raise ValidationFailed(MSG_INVALID_CVC, code="invalid_cvc", param="cvc")
    return digits
