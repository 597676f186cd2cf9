"""The dashboard's operations pages: events (payloads, delivery attempts, redeliver), webhook
endpoints with their health, and the sandbox controls; and the table of every dashboard route
(the company pages and the operator's, :mod:`treasury_aiohttp.dashboard.bank`).

As on the money pages, each read and action is the API's service call with the signed-in
company's id; the sandbox page exists only in sandbox mode (404 otherwise, as the API's
sandbox routes).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from aiohttp import web
from cryptography.fernet import Fernet

from treasury_aiohttp.dashboard import bank as dashboard_bank
from treasury_aiohttp.dashboard import pages
from treasury_aiohttp.dashboard.auth import (
    SESSION_CIPHER,
    OperatorPage,
    Page,
    Session,
    auth_routes,
    dashboard_page,
    operator_page,
    posted,
    redirect,
    render,
    session_cipher,
)
from treasury_aiohttp.dashboard.format import counted, money, parse_amount
from treasury_aiohttp.io import page_request, treasury
from treasury_aiohttp.keys import TREASURY_KEY
from treasury_core.config import TreasuryConfig
from treasury_core.errors import NotFound, ValidationFailed
from treasury_core.interface.projections import record_of
from treasury_core.listing import RecordFilter
from treasury_core.movements.records import Deposit, Transfer, VirtualAccount, Withdrawal
from treasury_core.pagination import PageRequest
from treasury_core.validation import whole_number

#: The longest one "advance" moves the sandbox clock (a year), as a typed number of seconds.
MAX_ADVANCE_SECONDS = 366 * 24 * 3600


# --- events and webhooks -------------------------------------------------------------------------


async def events(request: web.Request, session: Session) -> web.StreamResponse:
    """The company's events, newest first, paged (``GET /api/v1/events``)."""
    pages.only(request, ("starting_after", "limit", "type"))
    paging = page_request(request)
    page = await treasury(request).notifications.events(
        session.company_id,
        type_=request.query.get("type") or None,
        limit=paging.limit,
        starting_after=paging.starting_after,
    )
    kept = {k: v for k, v in request.query.items() if k != "starting_after" and v}
    next_query = None
    if page.has_more and page.items:
        next_query = {**kept, "starting_after": page.items[-1].id}
    return render(
        request, "events.html", session.prefix, session=session, title="Events",
        events=page.items, next_query=next_query, query=kept,
    )  # fmt: skip


async def event(request: web.Request, session: Session) -> web.StreamResponse:
    """One event: its payload and each delivery with its attempts; redeliver."""
    pages.only(request, ())
    service = treasury(request).notifications
    found = await service.event(session.company_id, request.match_info["event_id"])
    deliveries = await service.deliveries_of(session.company_id, found.id)
    return render(
        request, "event.html", session.prefix, session=session, title=f"Event {found.id}",
        event=found, payload=json.dumps(found.data, indent=2, sort_keys=True),
        deliveries=deliveries,
    )  # fmt: skip


async def redeliver(request: web.Request, session: Session) -> web.StreamResponse:
    """``POST /dashboard/events/{event_id}/redeliver``: send it again (new deliveries)."""
    event_id = request.match_info["event_id"]
    await treasury(request).notifications.redeliver(session.company_id, event_id)
    return redirect(f"{session.prefix}/dashboard/events/{event_id}")


async def webhooks(request: web.Request, session: Session) -> web.StreamResponse:
    """The company's endpoints and their health: failing deliveries, where the retry
    schedule stands, when the next try is."""
    pages.only(request, ())
    service = treasury(request).notifications
    endpoints = await service.endpoints(session.company_id)
    failing = [f for f in (await service.status()).failing if f.company_id == session.company_id]
    by_endpoint = {f.endpoint_id: f for f in failing}
    return render(
        request, "webhooks.html", session.prefix, session=session, title="Webhooks",
        endpoints=endpoints, health=by_endpoint, count=partial(counted, request),
        callbacks=[f for f in failing if f.endpoint_id is None],
    )  # fmt: skip


# --- sandbox -------------------------------------------------------------------------------------


def _sandbox_only(request: web.Request) -> None:
    if not treasury(request).config.sandbox:
        raise NotFound("Sandbox controls are off", code="sandbox_disabled")


async def sandbox(request: web.Request, session: Session) -> web.StreamResponse:
    """The business clock and the pending movements to settle by hand."""
    _sandbox_only(request)
    pages.only(request, ())
    t, company = treasury(request), session.company_id
    pending = RecordFilter(status="pending")
    return render(
        request, "sandbox.html", session.prefix, session=session, title="Sandbox",
        now=await t.sandbox.now(), money=money, req=request,
        deposits=await _records(request, Deposit, company, pending),
        withdrawals=await _records(request, Withdrawal, company, pending),
        transfers=await _records(request, Transfer, company, pending),
        accounts=await _records(request, VirtualAccount, company, RecordFilter()),
    )  # fmt: skip


async def _records(
    request: web.Request, kind: type[Any], company: int, filters: RecordFilter
) -> list[Any]:
    page = await treasury(request).records.list(kind, company, filters, PageRequest(limit=50))
    return [record_of(item) for item in page.items]


def _seconds(raw: Any) -> int:
    value = whole_number(raw.strip()) if isinstance(raw, str) and raw.strip() else None
    if value is None or not 1 <= value <= MAX_ADVANCE_SECONDS:
        raise ValidationFailed(
            f"seconds must be a whole number from 1 to {MAX_ADVANCE_SECONDS}", param="seconds"
        )
    return value


async def advance(request: web.Request, session: Session) -> web.StreamResponse:
    """``POST /dashboard/sandbox/advance``: move the clock and run what falls due."""
    _sandbox_only(request)
    await treasury(request).sandbox.advance(_seconds(posted(request).get("seconds")))
    return redirect(f"{session.prefix}/dashboard/sandbox")


_MOVEMENTS: dict[str, tuple[str, type[Any]]] = {
    "deposits": ("deposits", Deposit),
    "withdrawals": ("withdrawals", Withdrawal),
    "transfers": ("transfers", Transfer),
}


async def settle(request: web.Request, session: Session) -> web.StreamResponse:
    """``POST /dashboard/sandbox/{kind}/{id}/complete|fail``: the bank's answer, by hand."""
    _sandbox_only(request)
    kind, action = request.match_info["kind"], request.match_info["action"]
    service = getattr(treasury(request), _MOVEMENTS[kind][0])
    await getattr(service, action)(session.company_id, request.match_info["record_id"])
    return redirect(f"{session.prefix}/dashboard/sandbox")


async def incoming(request: web.Request, session: Session) -> web.StreamResponse:
    """``POST /dashboard/sandbox/virtual-accounts/{id}/incoming``: funds arrive."""
    _sandbox_only(request)
    t, company = treasury(request), session.company_id
    account_id = request.match_info["virtual_account_id"]
    account = await t.records.get(VirtualAccount, company, account_id)
    form = posted(request)
    amount = parse_amount(request, form.get("amount"), account.source_currency, "amount")
    reference = form.get("reference")
    text = pages.checked_text(
        reference.strip()[:140] if isinstance(reference, str) else None, "reference"
    )
    await t.virtual_accounts.incoming(company, account_id, amount, text)
    return redirect(f"{session.prefix}/dashboard/sandbox")


# --- the routes ----------------------------------------------------------------------------------

_D = "/dashboard"
_PAGES: tuple[tuple[str, str, Page], ...] = (
    ("GET", _D, pages.home),
    ("GET", f"{_D}/payments", pages.payments),
    ("GET", f"{_D}/payments/{{intent_id}}", pages.payment),
    ("POST", f"{_D}/payments/{{intent_id}}/{{action:capture|void|refund}}", pages.payment_action),
    ("GET", f"{_D}/wallets", pages.wallets),
    ("GET", f"{_D}/wallets/{{wallet_id}}", pages.wallet),
    ("GET", f"{_D}/events", events),
    ("GET", f"{_D}/events/{{event_id}}", event),
    ("POST", f"{_D}/events/{{event_id}}/redeliver", redeliver),
    ("GET", f"{_D}/webhooks", webhooks),
    ("GET", f"{_D}/sandbox", sandbox),
    ("POST", f"{_D}/sandbox/advance", advance),
    (
        "POST",
        f"{_D}/sandbox/{{kind:deposits|withdrawals|transfers}}/{{record_id}}/{{action:complete|fail}}",
        settle,
    ),
    ("POST", f"{_D}/sandbox/virtual-accounts/{{virtual_account_id}}/incoming", incoming),
)
#: The operator's pages: an operator session only (a company session gets a 403 page).
_OPERATOR_PAGES: tuple[tuple[str, str, OperatorPage], ...] = (
    ("GET", f"{_D}/bank", dashboard_bank.bank),
)


def _declared(path: str) -> str:
    # aiohttp's canonical form drops the regex of a {name:regex} segment.
    out, depth, skipping = [], 0, False
    for char in path:
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            skipping = False
        elif char == ":" and depth:
            skipping = True
            continue
        if not skipping:
            out.append(char)
    return "".join(out)


#: Every dashboard route as ``(method, path)`` (aiohttp's formatter form): the pages check the
#: session themselves, so the API's auth middleware lets them through (the isolation tests
#: list them).
PAGES: frozenset[tuple[str, str]] = frozenset(
    {(method, _declared(path)) for method, path, _ in _PAGES}
    | {(method, path) for method, path, _ in _OPERATOR_PAGES}
    | {(method, path) for method, path, _ in auth_routes()}
)


def add_routes(app: web.Application, cipher: Fernet | None = None) -> None:
    """Add the dashboard to ``app`` (``treasury serve`` does unless ``TREASURY_DASHBOARD=0``)."""
    app[SESSION_CIPHER] = cipher or session_cipher(app_config(app))
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    for method, path, page in _PAGES:
        handler = dashboard_page(_declared(path))(page)
        app.router.add_route(method, path, handler)
    for method, path, operator in _OPERATOR_PAGES:
        app.router.add_route(method, path, operator_page(path)(operator))
    for method, path, handler in auth_routes():
        app.router.add_route(method, path, handler)


def app_config(app: web.Application) -> TreasuryConfig:
    """The served treasury's configuration."""
    return app[TREASURY_KEY].config
