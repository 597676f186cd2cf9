"""Input hygiene shared by every request model and service.

Text that reaches storage must be valid Unicode without NUL or other control characters
(PostgreSQL refuses NUL in text, and lone surrogates cannot be encoded at all). Ids must look
like ids before they are used in a lookup, so a hostile path or cursor is simply "not found"
or "invalid", never a driver error.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated

from pydantic import AfterValidator, StringConstraints
from pydantic_core import PydanticCustomError

_ID = re.compile(r"[a-z]{2,5}_[0-9A-Za-z]{1,64}")
_MULTILINE_ALLOWED = frozenset("\n\r\t")


def _clean(value: str, allowed: frozenset[str]) -> str:
    for char in value:
        category = unicodedata.category(char)
        if (category == "Cc" and char not in allowed) or category == "Cs":
            raise PydanticCustomError(
                "string_unsafe", "must not contain control characters or invalid Unicode"
            )
    return value


def _single_line(value: str) -> str:
    return _clean(value, frozenset())


def _multi_line(value: str) -> str:
    return _clean(value, _MULTILINE_ALLOWED)


#: One line of text: no control characters.
SingleLine = Annotated[str, AfterValidator(_single_line)]
#: A one-line name: 1–255 characters, trimmed, no control characters.
Name = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=255),
    AfterValidator(_single_line),
]
#: Free text up to 1000 characters; newlines and tabs allowed, other control characters not.
Description = Annotated[str, StringConstraints(max_length=1000), AfterValidator(_multi_line)]
#: A three-letter code as sent; whether it is an enabled currency is checked by the registry.
CurrencyCode = Annotated[str, StringConstraints(min_length=3, max_length=3)]


def is_resource_id(value: object, prefix: str | None = None) -> bool:
    """Whether ``value`` has the shape of one of our ids (``wal_…``), optionally of ``prefix``."""
    if not isinstance(value, str) or _ID.fullmatch(value) is None:
        return False
    return prefix is None or value.startswith(prefix + "_")
