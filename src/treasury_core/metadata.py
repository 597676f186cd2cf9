"""Metadata: the merchant's own key-value pairs on a record.

Rules (decisions.md, "Metadata"):

- At most :data:`MAX_KEYS` keys; a key is 1 to :data:`MAX_KEY_LENGTH` characters, a value at
  most :data:`MAX_VALUE_LENGTH`; both are strings.
- A key holds no control or bidirectional characters (see :mod:`treasury_core.validation`) and
  no ``[`` or ``]``, which would make the list filter ``metadata[key]=value`` ambiguous.
- Set on create, where an empty value means "no such key"; changed by a merge
  (:func:`merged_metadata`) in which an empty value deletes its key.
- A bad pair is a 400 naming it: ``param`` is ``metadata[<key>]`` (``metadata`` for the count).

The record keeps its metadata inside itself, so every read and every event's ``data.object``
carries it; storage adapters filter lists on it (:func:`metadata_matches` is what they must agree
with).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Final

from pydantic import Field

from treasury_core.errors import ValidationFailed
from treasury_core.validation import (
    MULTILINE_ALLOWED,
    SchemaComponent,
    StrictRequest,
    refused_class,
)

MAX_KEYS: Final = 50
MAX_KEY_LENGTH: Final = 40
MAX_VALUE_LENGTH: Final = 500

_BAD_KEY = re.compile(f"[\\[\\]{refused_class()}]")
_BAD_VALUE = re.compile(f"[{refused_class(MULTILINE_ALLOWED)}]")
#: The same rules as JSON Schema patterns (ECMA-262), for the OpenAPI document.
KEY_PATTERN: Final = f"^[^\\[\\]{refused_class()}]*$"
VALUE_PATTERN: Final = f"^[^{refused_class(MULTILINE_ALLOWED)}]*$"

#: ``metadata`` as a request takes it: the OpenAPI document shows the limits; the service
#: enforces them with :func:`checked_metadata`, whose errors name the key.
MetadataInput = Annotated[
    dict[str, str],
    Field(
        description=(
            f"Your own key-value pairs: up to {MAX_KEYS} keys of at most {MAX_KEY_LENGTH} "
            f"characters (no `[` or `]`), string values of at most {MAX_VALUE_LENGTH}."
        ),
        json_schema_extra={
            "maxProperties": MAX_KEYS,
            "propertyNames": {
                "minLength": 1,
                "maxLength": MAX_KEY_LENGTH,
                "pattern": KEY_PATTERN,
            },
            "additionalProperties": {
                "type": "string",
                "maxLength": MAX_VALUE_LENGTH,
                "pattern": VALUE_PATTERN,
            },
        },
    ),
    SchemaComponent("MetadataInput"),
]

#: ``metadata`` on a record: always present, ``{}`` when nothing is set (declare it ``= {}``;
#: pydantic copies the default for each record).
MetadataField = Annotated[
    dict[str, str],
    Field(description="Your own key-value pairs (see `metadata` on create)."),
    SchemaComponent("Metadata"),
]


class MetadataUpdateRequest(StrictRequest):
    """``POST …/{id}/metadata``: pairs merged into the record's metadata; ``""`` deletes a key."""

    metadata: MetadataInput


def _param(key: str) -> str:
    shown = key if len(key) <= MAX_KEY_LENGTH and not _BAD_KEY.search(key) else "…"
    return f"metadata[{shown}]"


def _check_pair(key: str, value: str) -> None:
    if not key:
        raise ValidationFailed("metadata keys must not be empty", param="metadata")
    if len(key) > MAX_KEY_LENGTH:
        raise ValidationFailed(
            f"metadata key {key[:MAX_KEY_LENGTH]!r}… is longer than {MAX_KEY_LENGTH} characters",
            param=_param(key),
        )
    if _BAD_KEY.search(key):
        raise ValidationFailed(
            "metadata keys must not contain '[', ']' or control characters", param=_param(key)
        )
    if len(value) > MAX_VALUE_LENGTH:
        raise ValidationFailed(
            f"metadata[{key}] is longer than {MAX_VALUE_LENGTH} characters", param=_param(key)
        )
    if _BAD_VALUE.search(value):
        raise ValidationFailed(
            f"metadata[{key}] must not contain control characters", param=_param(key)
        )


def checked_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """Metadata given on create, checked; pairs with an empty value are left out."""
    if not metadata:
        return {}
    for key, value in metadata.items():
        _check_pair(key, value)
    kept = {k: v for k, v in metadata.items() if v != ""}
    _check_count(kept)
    return kept


def merged_metadata(current: Mapping[str, str], update: Mapping[str, str]) -> dict[str, str]:
    """``current`` with ``update`` merged in: a value replaces or adds its key, ``""`` deletes it.

    Raises :class:`ValidationFailed` for a bad pair or when the result holds too many keys.
    """
    # Pairs given from Python are checked as the HTTP app checks a body: a value that is not a
    # string is refused naming ``metadata.<key>``.
    MetadataUpdateRequest(metadata=dict(update))
    for key, value in update.items():
        _check_pair(key, value)
    merged = dict(current)
    for key, value in update.items():
        if value == "":
            merged.pop(key, None)
        else:
            merged[key] = value
    _check_count(merged)
    return merged


def _check_count(metadata: Mapping[str, Any]) -> None:
    if len(metadata) > MAX_KEYS:
        raise ValidationFailed(
            f"metadata may hold at most {MAX_KEYS} keys; this would make {len(metadata)}",
            param="metadata",
        )


def metadata_matches(metadata: Mapping[str, str], wanted: Mapping[str, str] | None) -> bool:
    """Whether ``metadata`` holds every pair of ``wanted`` (the list filter; ``None``: any)."""
    return not wanted or all(metadata.get(k) == v for k, v in wanted.items())


#: ``metadata[key]=value`` in a query string.
_QUERY_KEY = re.compile(r"^metadata\[(.*)\]$", re.DOTALL)


def metadata_filter(query: Mapping[str, str]) -> dict[str, str] | None:
    """The ``metadata[key]=value`` pairs of a list's query parameters, checked (``None``: none).

    For list handlers: the other parameters are theirs to read; a ``metadata[…]`` name with a bad
    key is a 400 naming it, as on create. An empty value matches nothing, since no stored value
    is empty.
    """
    wanted: dict[str, str] = {}
    for name, value in query.items():
        found = _QUERY_KEY.match(name)
        if found is None:
            continue
        key = found.group(1)
        _check_pair(key, value)
        wanted[key] = value
    _check_count(wanted)
    return wanted or None


def is_metadata_param(name: str) -> bool:
    """Whether a query parameter's name is a ``metadata[key]`` filter (for the lists' checks of
    unknown parameters)."""
    return _QUERY_KEY.match(name) is not None
