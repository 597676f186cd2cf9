"""Query strings: only declared parameters, and the filters of the record lists.

A route's :attr:`~treasury_aiohttp.routing.Route.query_params` (plus ``limit`` and
``starting_after`` on a paged list) is the whole of what it accepts: any other parameter is
refused with 400 ``parameter_unknown`` naming it, so a merchant never believes a filter applied
that does not exist. A parameter declared with ``style="deepObject"`` (``metadata``) admits its
family, ``metadata[key]``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from aiohttp import web
from multidict import MultiMapping
from pydantic import Field, StringConstraints, TypeAdapter, ValidationError

from treasury_aiohttp.io import timestamp_query, treasury
from treasury_aiohttp.routing import METADATA_QUERY, Param, Route
from treasury_core.errors import ValidationFailed
from treasury_core.listing import RecordFilter
from treasury_core.metadata import metadata_filter
from treasury_core.payments.intents import IntentStatus
from treasury_core.payments.requests import Reference
from treasury_core.validation import CurrencyCode, Email, ResourceId, whole_number

PAGING = ("limit", "starting_after")
_MAX_INTEGER_ID = 2**63 - 1

#: What an integer id in a query reads as (intent ids, account ids).
QueryId = Annotated[int, Field(ge=1, le=_MAX_INTEGER_ID)]


def accepted(route: Route) -> frozenset[str]:
    """The plain parameter names ``route`` takes."""
    names = set(route.query_params)
    if route.is_list and route.paged:
        names.update(PAGING)
    return frozenset(names)


def check_query(route: Route, query: MultiMapping[str]) -> None:
    """Refuse (400) the first parameter ``route`` does not declare (``parameter_unknown``), one
    given twice (``parameter_duplicated``), and a declared text parameter whose value its type
    refuses (``parameter_invalid``: an id of the wrong shape, an e-mail address that is not one).

    Integers, timestamps and states are read, and refused, by the handler that uses them; the
    currencies enabled by configuration are checked against the registry there too.
    """
    if not query:
        return
    names = accepted(route)
    seen: set[str] = set()
    # Every occurrence, in order (iterating a multidict yields each name once).
    for name, _ in query.items():
        if name in seen:
            raise ValidationFailed(
                f"Received duplicate parameter: {name}"
                if name.isprintable()
                else "Received a duplicate parameter",
                code="parameter_duplicated",
                param=name if name.isprintable() else None,
            )
        seen.add(name)
        param = route.query_params.get(name)
        if param is not None:
            _check_text(name, param, query[name])
            continue
        if name in names or _in_family(route, name):
            continue
        raise ValidationFailed(
            f"Received unknown parameter: {name}"
            if name.isprintable()
            else "Received an unknown parameter",
            code="parameter_unknown",
            param=name if name.isprintable() else None,
        )


_TEXT_CHECKS: dict[int, TypeAdapter[Any] | None] = {}


def _text_adapter(param: Param) -> TypeAdapter[Any] | None:
    """The validator of a text parameter's value (``None``: the handler reads it)."""
    key = id(param)
    if key not in _TEXT_CHECKS:
        adapter: TypeAdapter[Any] | None = TypeAdapter(param.type)
        schema = adapter.json_schema() if adapter is not None else {}
        # Only plain strings with a pattern or a length: numbers (read as JSON writes them,
        # "5.0" included), timestamps and states have their handler's rules and messages.
        if schema.get("type") != "string" or "format" in schema or "enum" in schema:
            adapter = None
        _TEXT_CHECKS[key] = adapter
    return _TEXT_CHECKS[key]


def _check_text(name: str, param: Param, value: str) -> None:
    adapter = _text_adapter(param)
    if adapter is None or param.style is not None:
        return
    try:
        adapter.validate_python(value)
    except ValidationError as error:
        problem = error.errors(include_url=False)[0]["msg"]
        raise ValidationFailed(f"Invalid {name}: {problem}", param=name) from None


def _in_family(route: Route, name: str) -> bool:
    head, bracket, rest = name.partition("[")
    if not bracket or not rest.endswith("]") or len(rest) < 2:
        return False
    param = route.query_params.get(head)
    return param is not None and param.style == "deepObject"


def positive_int(request: web.Request, name: str) -> int | None:
    """Query parameter ``name`` as a positive integer id, if present."""
    raw = request.query.get(name)
    if raw is None:
        return None
    # A whole number as JSON writes it ("5", "5.0"), as the document's "integer" promises.
    value = whole_number(raw)
    if value is None or not 1 <= value <= _MAX_INTEGER_ID:
        raise ValidationFailed(f"{name} must be a positive integer", param=name)
    return value


def text(request: web.Request, name: str) -> str | None:
    """Query parameter ``name`` as given (``None`` when absent); empty is refused."""
    raw = request.query.get(name)
    if raw is not None and not raw:
        raise ValidationFailed(f"{name} must not be empty", param=name)
    return raw


def intent_status(raw: str | None) -> IntentStatus | None:
    """``raw`` as a payment intent's status (``None`` when absent); 400 naming the statuses."""
    if raw is None:
        return None
    try:
        return IntentStatus(raw)
    except ValueError:
        allowed = ", ".join(s.value for s in IntentStatus)
        raise ValidationFailed(f"status must be one of {allowed}", param="status") from None


def currency(request: web.Request) -> str | None:
    """Query parameter ``currency``, an enabled currency (400 ``unknown_currency`` if not)."""
    code = text(request, "currency")
    if code is None:
        return None
    return treasury(request).currencies.get(code, param="currency").code


def record_filter(request: web.Request) -> RecordFilter:
    """The :class:`RecordFilter` of a record list's query (the route admitted only its own)."""
    return RecordFilter(
        status=text(request, "status"),
        created_gte=timestamp_query(request, "created_gte"),
        created_lt=timestamp_query(request, "created_lt"),
        wallet_id=text(request, "wallet_id"),
        currency=currency(request),
        payment_intent_id=positive_int(request, "payment_intent_id"),
        bank_account_id=text(request, "bank_account_id"),
        customer_email=text(request, "customer_email"),
        metadata=metadata_filter(request.query),
    )


def filters(*names: str, statuses: Any = str, noun: str = "records") -> dict[str, Param]:
    """The declared filters of one list: ``status`` (of type ``statuses``), the creation
    window and each of ``names``.

    Every record list builds its parameters here. ``"metadata"`` among ``names`` declares the
    ``metadata[key]=value`` family (one ``deepObject`` :class:`Param`), which
    only the lists of records that carry metadata name: the others refuse ``metadata[…]`` as
    unknown rather than ignore it.
    """
    described: dict[str, Param] = {
        "status": Param(f"Only {noun} in this state.", statuses),
        "created_gte": Param(f"Only {noun} created at or after this ISO 8601 timestamp.", datetime),
        "created_lt": Param(f"Only {noun} created before this ISO 8601 timestamp.", datetime),
    }
    for name in names:
        described[name] = _FIELD_PARAMS[name](noun)
    return described


#: A merchant reference as intents take it (one line, at most 255 characters), not empty.
_Reference = Annotated[Reference, StringConstraints(min_length=1)]

_FIELD_PARAMS = {
    "wallet_id": lambda noun: Param(f"Only {noun} of this wallet (`wal_…`).", ResourceId),
    "currency": lambda noun: Param(f"Only {noun} in this currency.", CurrencyCode),
    "payment_intent_id": lambda noun: Param(f"Only {noun} of this payment intent.", QueryId),
    "bank_account_id": lambda noun: Param(
        f"Only {noun} to this bank account (`ba_…`).", ResourceId
    ),
    "customer_email": lambda noun: Param(f"Only {noun} of this customer e-mail address.", Email),
    "merchant_reference": lambda noun: Param(
        f"Only {noun} with this `merchant_reference`.", _Reference
    ),
    "metadata": lambda noun: METADATA_QUERY,
}
