"""Reading requests and writing responses: strict JSON in, pydantic-rendered JSON out."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from aiohttp import web
from pydantic import BaseModel, TypeAdapter, ValidationError

from treasury_aiohttp.keys import CLAIM, IDEMPOTENCY_DONE, PARSED_BODY, PRINCIPAL, TREASURY_KEY
from treasury_core import Treasury
from treasury_core.companies import Principal
from treasury_core.errors import ValidationFailed
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.interface.idempotency import ResponseRecorder
from treasury_core.interface.idempotency import json_bytes as json_bytes
from treasury_core.pagination import DEFAULT_LIMIT, MAX_LIMIT, MIN_LIMIT, Page, PageRequest
from treasury_core.validation import validation_failed, whole_number

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")

JSON = "application/json"
_adapters: dict[type[BaseModel], TypeAdapter[list[Any]]] = {}


def treasury(request: web.Request) -> Treasury:
    """The treasury this app serves."""
    return request.app[TREASURY_KEY]


def mount_prefix(request: web.Request, route_path: str) -> str:
    """Where this app is mounted: ``""`` at the root, ``/treasury`` as a sub-app there.

    ``route_path`` is the matched route's path as this app declared it; aiohttp prefixes the
    resources of a sub-app, so the difference is the mount point.
    """
    resource = request.match_info.route.resource
    canonical = resource.canonical if resource is not None else ""
    if not route_path or not canonical.endswith(route_path):
        return ""
    return canonical.removesuffix(route_path)


def principal(request: web.Request) -> Principal:
    """The authenticated caller (set by the auth middleware)."""
    return request[PRINCIPAL]


def is_empty(raw: bytes) -> bool:
    """Whether a body holds nothing but whitespace (it is then read as ``{}``)."""
    return not raw or raw.isspace()


def require_json(request: web.Request) -> None:
    """Refuse (415) a body whose ``Content-Type`` is not ``application/json``, with a UTF-8
    charset or none.

    Call it only for a body that is there: an empty body needs no ``Content-Type`` (``curl -X
    POST`` sends none), as in Stripe-like APIs.
    """
    # aiohttp lower-cases the media type; a missing header reads as application/octet-stream.
    if request.content_type != JSON:
        raise web.HTTPUnsupportedMediaType()
    charset = request.charset
    if charset is not None and charset.lower() != "utf-8":
        raise web.HTTPUnsupportedMediaType()


class _RepeatedName(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


def _refuse_repeats(pairs: list[tuple[str, Any]]) -> None:
    # Called for every object of the body, with its members in order and their names decoded
    # ("n\u0061me" is "name"). Nothing is built: the check needs the names only.
    if len(pairs) > 1 and len({name for name, _ in pairs}) < len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _RepeatedName(name)
            seen.add(name)


# One decoder for all requests: ``json.loads(..., object_pairs_hook=…)`` builds a new one per
# call, which costs more than the parse itself.
_REPEATS = json.JSONDecoder(object_pairs_hook=_refuse_repeats)


def refuse_repeated_names(raw: bytes) -> None:
    """Refuse (400 ``parameter_duplicated``) a JSON body that names a member twice in an object.

    pydantic, like most parsers, keeps the last value silently; a body meant as one amount
    must not move another. Run it on a body pydantic accepted: that is valid UTF-8 JSON, not
    deeply nested, and (request models being flat) its repeated names are parameters.
    """
    try:
        _REPEATS.decode(raw.decode())
    except _RepeatedName as repeated:
        raise ValidationFailed(
            f"Received duplicate parameter: {repeated.name}",
            code="parameter_duplicated",
            param=repeated.name,
        ) from None
    except (ValueError, RecursionError):
        # Not reachable for a body pydantic accepted; refused rather than let through unchecked.
        raise ValidationFailed("The request body is not valid JSON", code="body_invalid") from None


async def parse_body(request: web.Request, model: type[M]) -> M:
    """The body validated strictly against ``model``; an empty body counts as ``{}``.

    A body that is not declared JSON is refused with 415 (see :func:`require_json`), one that
    names a parameter twice with 400 (see :func:`refuse_repeated_names`). A whole number
    written with a fraction or an exponent (``5.0``, ``5e0``) is the integer it denotes, as
    JSON Schema's ``integer`` says; ``5.5`` is refused.
    """
    earlier = request.get(PARSED_BODY)
    if earlier is not None and earlier[0] is model:
        # Read already for this request (by the route's authorize hook); models are immutable.
        parsed: M = earlier[1]
        return parsed
    raw = await request.read()
    if is_empty(raw):
        raw = b"{}"
    else:
        require_json(request)
    parsed = _validate(raw, model)
    # After validation, not before: a malformed body gets pydantic's own error, not the
    # standard library's idea of it. The original bytes, not a rewritten body: a rewrite keeps
    # only the last of two values.
    refuse_repeated_names(raw)
    request[PARSED_BODY] = (model, parsed)
    return parsed


def _validate(raw: bytes, model: type[M]) -> M:
    try:
        return model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        error = exc
    # Rare, so the fast path above stays one parse: only a body whose integer field got a
    # number with a fraction or exponent is read again, from its text, so no value is rounded.
    if any(e["type"] == "int_type" and isinstance(e["input"], float) for e in error.errors()):
        rewritten = _whole_numbers_as_integers(raw)
        if rewritten is not None:
            try:
                return model.model_validate_json(rewritten, strict=True)
            except ValidationError as again:
                error = again
    raise validation_failed(error) from None


class _NotRewritable(ValueError):
    pass


def _whole_number_or_float(text: str) -> int | float:
    number = whole_number(text)
    if number is not None:
        return number
    value = float(text)
    if not math.isfinite(value):
        raise _NotRewritable(text)
    return value


def _refuse_constant(text: str) -> float:
    raise _NotRewritable(text)


def _whole_numbers_as_integers(raw: bytes) -> bytes | None:
    """``raw`` with each whole number written as an integer, or ``None`` if that cannot be done
    faithfully (not JSON, or a number out of a double's range); the caller's error stands."""
    try:
        value = json.loads(raw, parse_float=_whole_number_or_float, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return None
    return json.dumps(value).encode()


def timestamp_query(request: web.Request, name: str) -> datetime | None:
    """Query parameter ``name`` as an aware timestamp (ISO 8601 with an offset), if present."""
    raw = request.query.get(name)
    if raw is None:
        return None
    # An unescaped "+" of "+00:00" arrives as a space; take it back rather than refuse.
    text = raw.replace(" ", "+")
    try:
        value: datetime | None = datetime.fromisoformat(text)
    except ValueError:
        value = None
    if value is None or value.utcoffset() is None:
        raise ValidationFailed(
            f"{name} must be an ISO 8601 timestamp with a UTC offset", param=name
        )
    try:
        value.astimezone(UTC)
    except OverflowError:
        # The year 1 or 9999 in a far offset (RFC 3339 allows it) lies outside what datetime
        # can hold in UTC: as a bound it is before, or after, every record.
        return (
            datetime.min.replace(tzinfo=UTC)
            if value.year == 1
            else datetime.max.replace(tzinfo=UTC)
        )
    return value


def page_request(request: web.Request) -> PageRequest:
    """``limit`` (1–100, default 20) and ``starting_after`` from the query string.

    The services check ``starting_after`` is an id; here only ``limit`` needs parsing.
    """
    query = request.query
    limit = DEFAULT_LIMIT
    if "limit" in query:
        # A whole number as JSON writes it ("20", "20.0"), as the document's "integer" says.
        number = whole_number(query["limit"])
        if number is None or not MIN_LIMIT <= number <= MAX_LIMIT:
            raise ValidationFailed(
                f"limit must be an integer from {MIN_LIMIT} to {MAX_LIMIT}", param="limit"
            )
        limit = number
    return PageRequest(limit=limit, starting_after=query.get("starting_after"))


def json_response(model: BaseModel | bytes, status: int = 200) -> web.Response:
    """A record as a JSON response."""
    return web.Response(body=json_bytes(model), status=status, content_type=JSON)


def list_response(
    request: web.Request,
    items: Sequence[BaseModel],
    page: Page[Any],
    model: type[BaseModel],
    cursor: Callable[[Any], str],
) -> web.Response:
    """A JSON array, with ``Link: <…>; rel="next"`` when more remain."""
    adapter = _adapters.get(model)
    if adapter is None:
        adapter = _adapters[model] = TypeAdapter(list[model])  # type: ignore[valid-type]
    response = web.Response(body=adapter.dump_json(list(items)), content_type=JSON)
    if page.has_more and page.items:
        url = request.url.update_query(starting_after=cursor(page.items[-1]))
        if "limit" not in request.query:
            url = url.update_query(limit=len(page.items))
        # Percent-encoded as received: a decoded query could put control characters (or any
        # non-ASCII) into a header.
        response.headers["Link"] = f'<{url.raw_path_qs}>; rel="next"'
    return response


class Responder(Generic[R]):
    """Renders a service result once, for the response and the idempotency record alike.

    When the request holds an idempotency claim, :meth:`ticket` hands the service a ticket that
    stores the rendered response in the service's own transaction. ``render_stored`` renders
    the stored copy differently (without secrets); the route's ``replay`` then completes it.
    The wire's :class:`~treasury_core.interface.idempotency.ResponseRecorder` does the work.
    """

    def __init__(
        self,
        request: web.Request,
        render: Callable[[R], BaseModel | bytes],
        status: int = 200,
        *,
        render_stored: Callable[[R], BaseModel | bytes] | None = None,
    ) -> None:
        self._request = request
        self._recorder = ResponseRecorder(
            request.get(CLAIM), render, status, render_stored=render_stored
        )

    def ticket(self) -> IdempotencyTicket[R] | None:
        """The ticket for the service call, or ``None`` without an ``Idempotency-Key``."""
        return self._recorder.ticket()

    def respond(self, result: R) -> web.Response:
        """The response for ``result`` (the exact bytes stored for replays, if any)."""
        if self._recorder.stored:
            self._request[IDEMPOTENCY_DONE] = True
        answer = self._recorder.response(result)
        return web.Response(body=answer.body, status=answer.status, content_type=JSON)
