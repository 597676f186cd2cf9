"""Stand-ins for two Stripe features localstripe lacks, behind a fault-injecting proxy.

localstripe (a stateful fake of Stripe's API) has neither of these, and the Stripe adapter's
lookups use both. Behind a :class:`~treasury_pytest.faults.FaultProxy` with
:data:`LOCALSTRIPE_STAND_INS`, they are answered from localstripe's own PaymentIntents:

- ``GET /v1/payment_intents/search`` (Stripe's Search API), for queries made of
  ``metadata['key']:'value'`` clauses joined by ``AND``: a ``search_result`` of the matching
  PaymentIntents, newest first, ``limit`` (default 10, at most 100) at a time with Stripe's
  ``page`` / ``next_page`` tokens. Any other query is refused (400) naming what is supported.
  Unlike Stripe's search, which lags writes by up to a minute, it sees every write at once:
  a test of a lookup "right after the call" passes here and may miss against Stripe.
- ``GET /v1/payment_intents`` with ``created`` (``created=T`` or ``created[gt|gte|lt|lte]=T``,
  which localstripe refuses): the filter is taken off, every page fetched, and the matching
  PaymentIntents listed newest first, as Stripe orders lists, paged with ``limit``,
  ``starting_after`` and ``ending_before``.

Each is answered by paging through ``GET /v1/payment_intents?limit=100`` at localstripe with
the client's own credentials (other parameters, ``expand`` say, passed on). Everything else,
a list without ``created`` included, reaches localstripe as it is. These are stand-ins for
Stripe itself: against Stripe's test mode, use neither.

    with localstripe_proxy(localstripe_url) as proxy:
        provider = StripeCardProvider(KEY, clock, api_base=proxy.url)
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any

from treasury_pytest.faults import (
    FaultProxy,
    Plan,
    ProxyAnswer,
    ProxyRequest,
    StandIn,
    Upstream,
    stripe_error_body,
)

__all__ = [
    "LOCALSTRIPE_STAND_INS",
    "list_payment_intents_created",
    "localstripe_proxy",
    "search_payment_intents",
]

_INTENTS = "/v1/payment_intents"
_SEARCH = "/v1/payment_intents/search"
#: localstripe's page size for the walk through every PaymentIntent (Stripe's maximum).
_PAGE = 100
#: Pages walked at most (ten million PaymentIntents): a fake that always says ``has_more``
#: fails the request instead of hanging the test.
_MAX_PAGES = 100_000

#: One clause of the supported search queries: ``metadata['key']:'value'`` (either quote;
#: a backslash escapes a quote in the value, as in Stripe's query language).
_CLAUSE = re.compile(
    r"""metadata\[(?P<kq>['"])(?P<key>[^'"\\\]]+)(?P=kq)\]:(?P<vq>['"])(?P<value>(?:[^'"\\]|\\.)*)(?P=vq)"""
)
_AND = re.compile(r"\s+AND\s+")
_CREATED = re.compile(r"created(?:\[(gt|gte|lt|lte)\])?")


class _Refusal(Exception):
    """A request the stand-in answers 400, as Stripe would."""

    def __init__(self, message: str, code: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message, self.code, self.param = message, code, param

    def answer(self) -> ProxyAnswer:
        body = json.loads(stripe_error_body("invalid_request_error", self.code, self.message))
        if self.param is not None:
            body["error"]["param"] = self.param
        return _json(400, body)


class _UpstreamRefused(Exception):
    """localstripe did not answer a page with a list: its answer goes back as it is."""

    def __init__(self, answer: ProxyAnswer) -> None:
        super().__init__(answer.status)
        self.answer = answer


def _json(status: int, payload: object) -> ProxyAnswer:
    return ProxyAnswer(status, json.dumps(payload).encode(), {"Content-Type": "application/json"})


def _one(params: list[tuple[str, str]], name: str) -> str | None:
    values = [v for k, v in params if k == name]
    if len(values) > 1:
        raise _Refusal(f"{name} is given more than once", "parameter_invalid", name)
    return values[0] if values else None


def _integer(value: str, param: str) -> int:
    if not re.fullmatch(r"-?[0-9]{1,18}", value):
        raise _Refusal(f"Invalid integer: {value}", "parameter_invalid_integer", param)
    return int(value)


def _limit(params: list[tuple[str, str]]) -> int:
    raw = _one(params, "limit")
    if raw is None:
        return 10
    limit = _integer(raw, "limit")
    if not 1 <= limit <= 100:
        raise _Refusal("limit must be from 1 to 100", "parameter_invalid_integer", "limit")
    return limit


async def _every_intent(
    request: ProxyRequest, upstream: Upstream, passed_on: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """Every PaymentIntent localstripe holds, newest first (Stripe's order)."""
    intents: list[dict[str, Any]] = []
    after: str | None = None
    for _ in range(_MAX_PAGES):
        params = [("limit", str(_PAGE)), *passed_on]
        if after is not None:
            params.append(("starting_after", after))
        answer = await upstream.send(
            "GET", f"{_INTENTS}?{urllib.parse.urlencode(params)}", headers=request.headers
        )
        if answer.status != 200:
            raise _UpstreamRefused(answer)
        page = answer.json()
        data = page.get("data") if isinstance(page, dict) else None
        if not isinstance(data, list) or not all(
            isinstance(item, dict) and isinstance(item.get("id"), str) for item in data
        ):
            raise _UpstreamRefused(answer)
        intents.extend(data)
        if not page.get("has_more") or not data:
            break
        after = data[-1]["id"]
    else:
        raise _UpstreamRefused(
            _json(502, json.loads(stripe_error_body("api_error", None, "Too many pages")))
        )
    # localstripe lists in creation order; Stripe newest first. Reversed first, so that the
    # stable sort keeps the newest first among those created in the same second.
    newest_first = intents[::-1]
    newest_first.sort(key=lambda intent: _created(intent), reverse=True)
    return newest_first


def _created(intent: dict[str, Any]) -> int:
    created = intent.get("created")
    return created if isinstance(created, int) and not isinstance(created, bool) else 0


def _search_clauses(query: str) -> list[tuple[str, str]]:
    clauses: list[tuple[str, str]] = []
    position = 0
    while True:
        clause = _CLAUSE.match(query, position)
        if clause is None:
            raise _Refusal(
                "The test bed's search supports only metadata['key']:'value' clauses joined "
                f"by AND; cannot read {query[position : position + 40]!r}",
                "parameter_invalid",
                "query",
            )
        clauses.append((clause["key"], re.sub(r"\\(.)", r"\1", clause["value"])))
        position = clause.end()
        if position == len(query):
            return clauses
        joined = _AND.match(query, position)
        if joined is None:
            raise _Refusal(
                "The test bed's search joins clauses only with AND", "parameter_invalid", "query"
            )
        position = joined.end()


async def search_payment_intents(request: ProxyRequest, upstream: Upstream) -> ProxyAnswer | None:
    """``GET /v1/payment_intents/search`` by metadata (see the module); ``None`` for any
    other request."""
    if request.method != "GET" or request.path != _SEARCH:
        return None
    params = request.params
    try:
        query = _one(params, "query")
        if query is None:
            raise _Refusal("Missing required param: query.", "parameter_missing", "query")
        clauses = _search_clauses(query.strip())
        limit = _limit(params)
        page = _one(params, "page")
        offset = 0 if page is None else _integer(page, "page")
        if offset < 0:
            raise _Refusal("Invalid page token", "parameter_invalid", "page")
        passed_on = [(k, v) for k, v in params if k not in ("query", "limit", "page")]
        intents = await _every_intent(request, upstream, passed_on)
    except _Refusal as refusal:
        return refusal.answer()
    except _UpstreamRefused as refused:
        return refused.answer
    found = [
        intent
        for intent in intents
        if all(_metadata(intent).get(key) == value for key, value in clauses)
    ]
    more = len(found) > offset + limit
    return _json(
        200,
        {
            "object": "search_result",
            "url": _SEARCH,
            "data": found[offset : offset + limit],
            "has_more": more,
            "next_page": str(offset + limit) if more else None,
        },
    )


def _metadata(intent: dict[str, Any]) -> dict[str, Any]:
    metadata = intent.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _created_bounds(params: list[tuple[str, str]]) -> list[tuple[str, int]]:
    bounds: list[tuple[str, int]] = []
    for name, value in params:
        match = _CREATED.fullmatch(name)
        if match is not None:
            bounds.append((match[1] or "eq", _integer(value, name)))
        elif name.startswith("created"):
            raise _Refusal(
                f"Received unknown parameter: {name}; created takes gt, gte, lt or lte",
                "parameter_unknown",
                name,
            )
    return bounds


_COMPARE = {
    "eq": lambda created, bound: created == bound,
    "gt": lambda created, bound: created > bound,
    "gte": lambda created, bound: created >= bound,
    "lt": lambda created, bound: created < bound,
    "lte": lambda created, bound: created <= bound,
}


async def list_payment_intents_created(
    request: ProxyRequest, upstream: Upstream
) -> ProxyAnswer | None:
    """``GET /v1/payment_intents`` filtered by ``created`` (see the module); ``None`` for any
    other request, a list without ``created`` included."""
    if request.method != "GET" or request.path != _INTENTS:
        return None
    params = request.params
    if not any(name.startswith("created") for name, _ in params):
        return None
    try:
        bounds = _created_bounds(params)
        limit = _limit(params)
        after = _one(params, "starting_after")
        before = _one(params, "ending_before")
        if after is not None and before is not None:
            raise _Refusal(
                "starting_after and ending_before cannot both be given",
                "parameter_invalid",
                "ending_before",
            )
        paging = ("limit", "starting_after", "ending_before")
        passed_on = [(k, v) for k, v in params if not k.startswith("created") and k not in paging]
        intents = await _every_intent(request, upstream, passed_on)
        found = [
            intent
            for intent in intents
            if all(_COMPARE[op](_created(intent), bound) for op, bound in bounds)
        ]
        if after is not None:
            start = _position(found, after, "starting_after") + 1
            window, more = found[start : start + limit], len(found) > start + limit
        elif before is not None:
            end = _position(found, before, "ending_before")
            window, more = found[max(0, end - limit) : end], end > limit
        else:
            window, more = found[:limit], len(found) > limit
    except _Refusal as refusal:
        return refusal.answer()
    except _UpstreamRefused as refused:
        return refused.answer
    return _json(200, {"object": "list", "url": _INTENTS, "data": window, "has_more": more})


def _position(intents: list[dict[str, Any]], reference: str, param: str) -> int:
    for i, intent in enumerate(intents):
        if intent.get("id") == reference:
            return i
    raise _Refusal(f"No such payment_intent: '{reference}'", "resource_missing", param)


#: Both stand-ins, for :class:`~treasury_pytest.faults.FaultProxy`'s ``stand_ins``.
LOCALSTRIPE_STAND_INS: tuple[StandIn, ...] = (search_payment_intents, list_payment_intents_created)


def localstripe_proxy(upstream: str, *, plan: Plan | None = None) -> FaultProxy:
    """A started :class:`~treasury_pytest.faults.FaultProxy` in front of the localstripe at
    ``upstream``, with Stripe's idempotency and :data:`LOCALSTRIPE_STAND_INS`."""
    return FaultProxy.start(upstream, plan=plan, stand_ins=LOCALSTRIPE_STAND_INS)
