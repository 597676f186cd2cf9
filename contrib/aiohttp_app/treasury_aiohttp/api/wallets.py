"""Endpoint handlers: JSON to service calls and back. Nothing about money is decided here."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from treasury_aiohttp.api.shapes import create_one, get_one
from treasury_aiohttp.io import (
    json_response,
    list_response,
    page_request,
    principal,
    treasury,
)
from treasury_aiohttp.rendering import balance_json
from treasury_aiohttp.routing import METADATA_QUERY, Auth, Route
from treasury_core.interface.records import CurrencyRecord, WalletRecord
from treasury_core.ledger import BalanceRecord
from treasury_core.metadata import metadata_filter
from treasury_core.pagination import Page
from treasury_core.wallets import CreateWalletRequest, Wallet


def wallet_renderer(request: web.Request) -> Callable[[Wallet], WalletRecord]:
    """How this app renders a wallet: its record, with its currency described."""
    currencies = treasury(request).currencies

    def render(wallet: Wallet) -> WalletRecord:
        return WalletRecord.of(wallet, currencies.describe(wallet.currency))

    return render


async def create_wallet(request: web.Request) -> web.StreamResponse:
    """Create a wallet in an enabled currency."""
    create = treasury(request).wallets.create
    return await create_one(request, CreateWalletRequest, create, wallet_renderer(request))


async def get_wallet(request: web.Request) -> web.StreamResponse:
    """One wallet of the caller's company."""
    read = treasury(request).wallets.get
    return await get_one(request, read, "wallet_id", wallet_renderer(request))


async def get_wallet_balance(request: web.Request) -> web.StreamResponse:
    """A wallet's balance record."""
    wallet_id = request.match_info["wallet_id"]
    balance = await treasury(request).wallets.balance(principal(request).company_id, wallet_id)
    return json_response(balance_json(balance))


def _paged(request: web.Request) -> bool:
    # The interface returns "all wallets of the company"; a caller asks for pages with either
    # of the paging parameters.
    return "limit" in request.query or "starting_after" in request.query


async def list_wallets(request: web.Request) -> web.StreamResponse:
    """The company's wallets, newest first: all of them, or a page with ``limit``."""
    service = treasury(request).wallets
    company_id = principal(request).company_id
    metadata = metadata_filter(request.query)
    render = wallet_renderer(request)
    if not _paged(request):
        wallets = await service.all(company_id, metadata=metadata)
        return list_response(
            request, [render(w) for w in wallets], Page(wallets, False), WalletRecord, str
        )
    page = await service.list(company_id, page_request(request), metadata=metadata)
    records = [render(w) for w in page.items]
    return list_response(request, records, page, WalletRecord, lambda w: w.id)


async def list_wallet_balances(request: web.Request) -> web.StreamResponse:
    """Balance records of the company's wallets in one call, newest wallet first: all of them,
    or a page with ``limit``."""
    service = treasury(request).wallets
    company_id = principal(request).company_id
    if not _paged(request):
        balances = await service.all_balances(company_id)
        return list_response(request, balances, Page(balances, False), BalanceRecord, str)
    page = await service.balances(company_id, page_request(request))
    return list_response(request, page.items, page, BalanceRecord, lambda b: b.wallet_id)


async def list_currencies(request: web.Request) -> web.StreamResponse:
    """Every enabled currency, with ``can_vban``."""
    records = [CurrencyRecord.of(c) for c in treasury(request).currencies]
    return web.json_response([r.model_dump(mode="json") for r in records])


WALLET_ID = {"wallet_id": "Wallet id (`wal_…`)."}

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/api/v1/wallet",
        create_wallet,
        "Create a wallet",
        body=CreateWalletRequest,
        response=WalletRecord,
        tags=("Wallets",),
    ),
    Route(
        "GET",
        "/api/v1/wallet/{wallet_id}",
        get_wallet,
        "Get a wallet",
        response=WalletRecord,
        tags=("Wallets",),
        path_params=WALLET_ID,
    ),
    Route(
        "GET",
        "/api/v1/wallet/{wallet_id}/balance",
        get_wallet_balance,
        "Get a wallet's balance",
        response=BalanceRecord,
        tags=("Wallets",),
        path_params=WALLET_ID,
    ),
    Route(
        "GET",
        "/api/v1/wallets",
        list_wallets,
        "List wallets",
        response=WalletRecord,
        is_list=True,
        tags=("Wallets",),
        query_params={"metadata": METADATA_QUERY},
    ),
    Route(
        "GET",
        "/api/v1/wallets/balances",
        list_wallet_balances,
        "List wallet balances",
        response=BalanceRecord,
        is_list=True,
        tags=("Wallets",),
    ),
    Route(
        "GET",
        "/api/v1/currencies",
        list_currencies,
        "List enabled currencies",
        response=CurrencyRecord,
        is_list=True,
        paged=False,
        tags=("Currencies",),
        auth=Auth.SECRET,
    ),
)
