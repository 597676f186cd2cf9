"""Amounts and counts for people on the dashboard, in the page's locale.

The page's locale is the browser's (:func:`~treasury_aiohttp.hosted.pages.page_locale`: the
first language of ``Accept-Language`` that Babel knows, else en-US). Amounts are written in it,
and an amount typed into a form is read in it with Babel's strict parser, so what the merchant
reads on the page is what they type back: ``12,50`` is twelve euros fifty in de-DE and refused
in en-US, where it could be 1,250 or 12.50. An amount is never guessed at: one Babel cannot
read exactly, with more decimals than the currency has, or written with anything but the digits
0-9 and the locale's separators is refused with the reason.
"""

from __future__ import annotations

from decimal import Decimal

from aiohttp import web
from babel import Locale
from babel.numbers import NumberFormatError, format_decimal, parse_decimal

from treasury_aiohttp.hosted.pages import format_amount, page_locale
from treasury_aiohttp.io import treasury
from treasury_core.errors import ValidationFailed

#: The longest amount read: no Decimal arithmetic on a number of a thousand digits.
MAX_TYPED = 32
#: Separators a typed amount may hold besides the locale's own: Babel reads a plain space for a
#: no-break one, and reads ``.`` as the decimal point where the locale groups with a space.
_SEPARATORS = frozenset(".,' \u00a0\u202f\u2019")
#: The text is English: its plural rules are English's (CLDR, from Babel).
_ENGLISH = Locale.parse("en")


def money(request: web.Request, amount: int, currency: str) -> str:
    """``amount`` minor units of ``currency`` as the page's locale writes it (``12,50 €``)."""
    return format_amount(request, amount, currency)


def iso_amount(request: web.Request, amount: int, currency: str) -> str:
    """``amount`` minor units as a plain decimal and the ISO code (``12.50 EUR``): the same in
    every locale, as the API and bank files state it."""
    places = treasury(request).currencies.get(currency).decimal_places
    return f"{Decimal(amount).scaleb(-places)} {currency}"


def _pattern(places: int) -> str:
    return "#,##0" + ("." + "0" * places if places else "")


def typed_amount(request: web.Request, amount: int, currency: str) -> str:
    """``amount`` as a person types it in the page's locale (``1.234,50``; no symbol)."""
    places = treasury(request).currencies.get(currency).decimal_places
    value = Decimal(amount).scaleb(-places)
    return format_decimal(value, format=_pattern(places), locale=page_locale(request))


def locale_tag(request: web.Request) -> str:
    """The page's locale as a BCP 47 tag (``de-DE``), as the page names it."""
    return str(page_locale(request)).replace("_", "-")


def parse_amount(request: web.Request, raw: object, currency: str, param: str) -> int:
    """A typed amount in major units of ``currency``, in the page's locale, as minor units.

    Refused (:class:`ValidationFailed` naming ``param``, with the reason): empty, not read
    exactly by Babel (``1,0,0``, ``,,1``; ``12,50`` in en-US), more decimals than the currency
    has (``1.000`` USD in en-US, where a German reader means a thousand), zero or negative.
    """
    if not isinstance(raw, str) or not raw.strip():
        raise ValidationFailed(f"{param} is required", param=param)
    text = raw.strip()
    locale = page_locale(request)
    found = treasury(request).currencies.get(currency)
    example = format_decimal(
        Decimal(123450).scaleb(-2), format=_pattern(found.decimal_places), locale=locale
    )
    written = f"{param} must be an amount as {locale_tag(request)} writes it, such as {example}"
    # Only the digits 0-9 and separators: Decimal (and so Babel) also reads "1e5", "NaN" and
    # other scripts' digits ("١" is 1), which a person typing an amount of money does not mean.
    symbols = locale.number_symbols["latn"]
    allowed = _SEPARATORS | {symbols["decimal"], symbols["group"]}
    body = text.removeprefix("-")
    if len(text) > MAX_TYPED or not all(c in allowed or c in "0123456789" for c in body):
        raise ValidationFailed(written, param=param)
    try:
        value = parse_decimal(text, locale=locale, strict=True)
    except NumberFormatError as error:
        hints = getattr(error, "suggestions", None) or []
        guess = f" Did you mean {' or '.join(hints)}?" if hints else ""
        raise ValidationFailed(f"{written}.{guess}", param=param) from None
    exponent = value.as_tuple().exponent
    places = found.decimal_places
    if not isinstance(exponent, int) or -exponent > places:
        raise ValidationFailed(
            f"{param} has more decimals than {currency} has ({places})", param=param
        )
    minor = found.minor_units(value)
    if minor is None or minor <= 0:
        raise ValidationFailed(f"{param} must be more than zero", param=param)
    return minor


def counted(request: web.Request, count: int, one: str, other: str) -> str:
    """``count`` and the noun agreeing with it (``1 payment``, ``2 payments``), the number
    grouped as the page's locale groups it."""
    noun = one if _ENGLISH.plural_form(count) == "one" else other
    return f"{number(request, count)} {noun}"


def number(request: web.Request, value: int) -> str:
    """A whole number grouped as the page's locale groups it (``1,234``; ``1.234``)."""
    return format_decimal(value, locale=page_locale(request))
