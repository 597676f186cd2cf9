"""Input hygiene shared by every request model and service.

Text that reaches storage must be valid Unicode without NUL or other control characters
(PostgreSQL refuses NUL in text, and lone surrogates cannot be encoded at all), and text shown
to a person must display in the order it is stored: bidirectional embeddings, overrides and
isolates are refused ("Trojan Source": ``"Payroll\\u202egpj.exe"`` shows as
``Payrollexe.jpg``). :data:`REFUSED_RANGES` is the one list of refused characters; the request
models, the patterns of the OpenAPI document and the sandbox bank rail's field formats are all
built from it. Ids must look like ids before they are used in a lookup, so a hostile path or
cursor is simply "not found" or "invalid", never a driver error.

Every request model derives from :class:`StrictRequest`: strict types, no unknown fields, and a
bad value given from Python raises the same :class:`~treasury_core.errors.ValidationFailed` (and
so a :class:`~treasury_core.errors.TreasuryError`) that the HTTP app answers with 400, through
:func:`validation_failed`, the one translation of pydantic's errors both use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StringConstraints,
    ValidationError,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

from treasury_core.errors import ValidationFailed

#: Characters no text field accepts, as inclusive ``(first, last)`` code point ranges: the C0
#: and C1 controls (DEL among them), the line and paragraph separators (a line break that most
#: displays honour but a one-line field must not hold) and Unicode's whole Bidi_Control set: the
#: marks (U+061C, U+200E, U+200F), the embeddings and overrides (U+202A–U+202E) and the isolates
#: (U+2066–U+2069). Even a mark reorders the digits and punctuation around it on screen.
REFUSED_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x061C, 0x061C),
    (0x200E, 0x200F),
    (0x2028, 0x2029),
    (0x202A, 0x202E),
    (0x2066, 0x2069),
)
#: What multi-line text (descriptions) may hold of the refused characters.
MULTILINE_ALLOWED = "\t\n\r"


def refused_class(allowed: str = "") -> str:
    r"""The refused characters, less ``allowed``, as the inside of a regex character class.

    Written with ``\uXXXX`` escapes, so the same text works in Python and in ECMA-262 (the
    regex dialect of JSON Schema): ``f"^[^{refused_class()}]*$"`` matches acceptable text.
    """
    keep = {ord(char) for char in allowed}
    parts: list[str] = []
    for first, last in REFUSED_RANGES:
        start: int | None = None
        for code in range(first, last + 2):
            inside = code <= last and code not in keep
            if inside and start is None:
                start = code
            elif not inside and start is not None:
                end = code - 1
                parts.append(f"\\u{start:04X}" if start == end else f"\\u{start:04X}-\\u{end:04X}")
                start = None
    return "".join(parts)


#: One line of text: none of the refused characters (JSON Schema and Python alike).
SINGLE_LINE_PATTERN = f"^[^{refused_class()}]*$"
#: Multi-line text: as one line, but tabs and line breaks are allowed.
MULTILINE_PATTERN = f"^[^{refused_class(MULTILINE_ALLOWED)}]*$"

_REFUSED = re.compile(f"[{refused_class()}]")
_REFUSED_MULTILINE = re.compile(f"[{refused_class(MULTILINE_ALLOWED)}]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean(value: str, refused: re.Pattern[str]) -> str:
    if refused.search(value) is not None or _SURROGATE.search(value) is not None:
        raise PydanticCustomError(
            "string_unsafe",
            "must not contain control characters, bidirectional controls or invalid Unicode",
        )
    return value


def _single_line(value: str) -> str:
    return _clean(value, _REFUSED)


def _multi_line(value: str) -> str:
    return _clean(value, _REFUSED_MULTILINE)


def _single_line_untrimmed(value: object) -> object:
    # Before trimming: "Acme\n" is refused as its pattern says, not stored as "Acme". Anything
    # but a string is left to the type check that follows.
    return _single_line(value) if isinstance(value, str) else value


@dataclass(frozen=True, slots=True)
class SchemaPattern:
    """Annotation metadata that adds ``pattern`` to a field's JSON Schema only.

    For rules a validator enforces with its own, clearer message: the document states the rule
    without pydantic enforcing it a second time.
    """

    pattern: str

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The wrapped type's schema with :attr:`pattern`."""
        schema: dict[str, Any] = handler(core_schema)
        schema["pattern"] = self.pattern
        return schema


#: The characters ``str.strip()`` removes that are not refused anyway (the refused ones are
#: tabs, line breaks and other controls), as the inside of a regex character class. Spelled
#: out rather than ``\s``, whose members differ between Python and ECMA-262.
WHITESPACE_CLASS = "\\u0020\\u00A0\\u1680\\u2000-\\u200A\\u202F\\u205F\\u3000"

#: A name: at least one character that is neither whitespace nor refused (names are trimmed,
#: and a blank one is refused), none refused.
NAME_PATTERN = f"^[^{refused_class()}]*[^{refused_class()}{WHITESPACE_CLASS}][^{refused_class()}]*$"


#: One line of text: no control characters, no bidirectional controls, valid Unicode.
SingleLine = Annotated[str, AfterValidator(_single_line), SchemaPattern(SINGLE_LINE_PATTERN)]
#: A one-line name: 1–255 characters, trimmed, no control or bidirectional characters.
Name = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=255),
    BeforeValidator(_single_line_untrimmed),
    SchemaPattern(NAME_PATTERN),
]
#: Free text up to 1000 characters; tabs and line breaks allowed, other control characters and
#: bidirectional controls not.
Description = Annotated[
    str,
    StringConstraints(max_length=1000),
    AfterValidator(_multi_line),
    SchemaPattern(MULTILINE_PATTERN),
]


@dataclass(frozen=True, slots=True)
class SchemaMark:
    """Annotation metadata that marks a field's JSON Schema with ``x-treasury: kind``.

    The HTTP app's OpenAPI document replaces each mark with what the running configuration
    enforces: ``currency`` becomes the ``enum`` of enabled codes, ``vban_currency`` that of
    the codes with virtual accounts, ``amount`` the ``maximum`` amount. The request models
    themselves do not know the configuration.
    """

    kind: str

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The wrapped type's schema with the mark."""
        schema: dict[str, Any] = handler(core_schema)
        schema["x-treasury"] = self.kind
        return schema


#: The key :class:`SchemaComponent` puts in a JSON Schema.
COMPONENT_KEY = "x-treasury-component"


@dataclass(frozen=True, slots=True)
class SchemaComponent:
    """Annotation metadata that names a type's JSON Schema: ``x-treasury-component: name``.

    The HTTP app's OpenAPI document moves such a schema to ``components/schemas/{name}`` and
    leaves a ``$ref`` in each field of the type, so that a client generated from the document
    has one type (``Currency``) where pydantic would inline the schema into every field. Put it
    after the annotations that shape the schema (a :class:`SchemaMark`, ``WithJsonSchema``).
    """

    name: str

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The wrapped type's schema with the name."""
        schema: dict[str, Any] = handler(core_schema)
        schema[COMPONENT_KEY] = self.name
        return schema


class SchemaRule:
    """Annotation metadata that adds keywords to a field's JSON Schema only
    (``SchemaRule(enum=["Tokenization"])``), for a rule a service enforces with its own message.
    """

    def __init__(self, **rule: Any) -> None:
        """``rule``: the JSON Schema keywords to add."""
        self.rule = rule

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The wrapped type's schema with :attr:`rule`."""
        schema: dict[str, Any] = handler(core_schema)
        schema.update(self.rule)
        return schema


#: A three-letter code as sent; whether it is an enabled currency is checked by the registry.
CurrencyCode = Annotated[
    str,
    StringConstraints(min_length=3, max_length=3),
    SchemaMark("currency"),
    SchemaComponent("Currency"),
]
#: A currency code for a virtual account: the registry checks it has ``can_vban``.
VbanCurrencyCode = Annotated[
    str,
    StringConstraints(min_length=3, max_length=3),
    SchemaMark("vban_currency"),
    SchemaComponent("VirtualAccountCurrency"),
]
#: An amount in minor units: a positive integer; the configured maximum is the services' check.
Amount = Annotated[
    int, Field(gt=0, description="Minor units of the currency."), SchemaMark("amount")
]


def _shape(pattern: str, message: str) -> AfterValidator:
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if compiled.fullmatch(value) is None:
            raise PydanticCustomError("string_shape", message)
        return value

    return AfterValidator(check)


_TEXT = refused_class() + WHITESPACE_CLASS
#: An http(s) URL with a host, as JSON Schema and the check below both read it.
URL_PATTERN = f"^https?://[^{_TEXT}/?#]+[^{_TEXT}]*$"
#: Something@something.tld, no spaces: an e-mail address's shape, not its deliverability.
EMAIL_PATTERN = f"^[^@{_TEXT}]+@[^@{_TEXT}]+\\.[^@{_TEXT}]+$"


def _dns_host(value: str) -> str:
    # A host no resolver can be asked about (a label over 63 characters, an empty label, an
    # ``xn--`` label that is not Punycode) would fail every delivery: refuse it when given.
    # Encoded and decoded back, as HTTP clients do both when they build a request.
    host = urlsplit(value).hostname or ""
    try:
        host.encode("idna").decode("idna")
    except UnicodeError:
        raise PydanticCustomError("dns_host", "its host cannot be encoded for DNS (IDNA)") from None
    return value


#: An http:// or https:// URL of 8 to 2048 characters whose host can be encoded for DNS.
Url = Annotated[
    str,
    StringConstraints(min_length=8, max_length=2048),
    AfterValidator(_single_line),
    _shape(URL_PATTERN, "must be an http:// or https:// URL with a host"),
    AfterValidator(_dns_host),
    SchemaPattern(URL_PATTERN),
]
#: An e-mail address of at most 254 characters.
Email = Annotated[
    str,
    StringConstraints(max_length=254),
    AfterValidator(_single_line),
    _shape(EMAIL_PATTERN, "must be an e-mail address"),
    SchemaPattern(EMAIL_PATTERN),
]

#: The shape of our ids: a 2-5 letter prefix, ``_``, 1-64 letters and digits.
RESOURCE_ID_PATTERN = "^[a-z]{2,5}_[0-9A-Za-z]{1,64}$"


def id_pattern(prefix: str) -> str:
    """:data:`RESOURCE_ID_PATTERN` for ids of one kind (``id_pattern("evt")``)."""
    return f"^{re.escape(prefix)}_[0-9A-Za-z]{{1,64}}$"


#: Any of our ids (the cursor of most lists).
ResourceId = Annotated[str, StringConstraints(pattern=RESOURCE_ID_PATTERN)]


_ID = re.compile(RESOURCE_ID_PATTERN)


def is_resource_id(value: object, prefix: str | None = None) -> bool:
    """Whether ``value`` has the shape of one of our ids (``wal_…``), optionally of ``prefix``."""
    if not isinstance(value, str) or _ID.fullmatch(value) is None:
        return False
    return prefix is None or value.startswith(prefix + "_")


#: Beyond this many digits a whole number written with a fraction or an exponent is not
#: expanded (``1e999999999`` would take minutes); no amount or id comes near it.
_WHOLE_NUMBER_DIGITS = 40
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def whole_number(text: str) -> int | None:
    """The integer a JSON number's text denotes, or ``None`` when it is not a whole number.

    JSON has one number type, and JSON Schema's ``integer`` is any number without a fraction:
    ``5``, ``5.0`` and ``5e0`` are the same integer, ``5.5`` and ``5.000000000000000001`` are
    not. Read from the text, so nothing is rounded on the way (a double would take
    ``5.000000000000000001`` for 5).
    """
    # The JSON grammar first: Decimal alone would also take " 5", "5_000", "+5" and "٥".
    if _JSON_NUMBER.fullmatch(text) is None:
        return None
    try:
        number = Decimal(text)
    except InvalidOperation:  # pragma: no cover - the grammar above admits only numbers
        return None
    if not number.is_finite() or number.adjusted() > _WHOLE_NUMBER_DIGITS:
        return None
    if number != number.to_integral_value():
        return None
    return int(number)


def validation_failed(exc: ValidationError) -> ValidationFailed:
    """The first problem pydantic found, as the error naming the field (``param``: its path,
    ``metadata.note`` for a member of ``metadata``).

    What the HTTP app answers for a body its request model refuses, and what building a request
    model from Python raises: one wording for both.
    """
    error = exc.errors(include_url=False)[0]
    param = ".".join(str(p) for p in error["loc"]) or None
    kind = error["type"]
    if kind == "json_invalid":
        return ValidationFailed("The request body is not valid JSON", code="body_invalid")
    if kind in ("model_type", "model_attributes_type", "dict_type") and not error["loc"]:
        return ValidationFailed("The request body must be a JSON object", code="body_invalid")
    if kind == "missing":
        return ValidationFailed(
            f"Missing required parameter: {param}", code="parameter_missing", param=param
        )
    if kind == "extra_forbidden":
        return ValidationFailed(
            f"Received unknown parameter: {param}", code="parameter_unknown", param=param
        )
    return ValidationFailed(f"Invalid {param}: {error['msg']}", param=param)


class StrictRequest(BaseModel):
    """Base of the request models: strict types, unknown fields refused, immutable.

    Built from Python (``CreateWalletRequest(name=..., currency_id=...)``), a bad value raises
    :class:`~treasury_core.errors.ValidationFailed` with the ``param`` and message the HTTP app
    answers for the same value, so an embedding application's ``except TreasuryError`` covers
    bad input too. pydantic's own parsing class methods (``model_validate``,
    ``model_validate_json``) keep pydantic's :class:`~pydantic.ValidationError`, with every
    problem found, for a caller that wants them all; :func:`validation_failed` turns it into
    the same error.
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    def __init__(self, /, **data: Any) -> None:
        """Validate ``data``; :class:`~treasury_core.errors.ValidationFailed` if it is bad."""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            # Chained: the traceback still shows every problem pydantic found.
            raise validation_failed(exc) from exc

    # pydantic routes validation through a model's own ``__init__`` unless it carries this mark
    # (as pydantic's own ``BaseModel`` and ``RootModel`` initialisers do). Marked, the parsing
    # class methods validate as before: JSON in JSON mode, with pydantic's error.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]
