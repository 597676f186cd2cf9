"""Wallet transactions and statements: a wallet's ledger history over HTTP, JSON or CSV."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, date, datetime

from aiohttp import web

from treasury_aiohttp.io import (
    json_response,
    list_response,
    page_request,
    principal,
    timestamp_query,
    treasury,
)
from treasury_aiohttp.routing import Param, Route
from treasury_core.errors import ValidationFailed
from treasury_core.ledger import EntryType
from treasury_core.services.movements.statements import (
    TransactionFilter,
    WalletStatement,
    WalletTransaction,
)

CSV = "text/csv"
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
#: The CSV's columns: one ``opening`` row, the transactions, one ``total`` row per type (its
#: ``amount`` the balance total, ``pending_amount`` the pending one) and one ``closing`` row.
CSV_COLUMNS = (
    "record",
    "id",
    "created_at",
    "type",
    "counter",
    "amount",
    "pending_amount",
    "count",
    "currency_code",
    "balance_after",
    "available_balance_after",
    "pending_in_after",
    "source_id",
)


def _type(request: web.Request) -> EntryType | None:
    raw = request.query.get("type")
    if raw is None:
        return None
    try:
        return EntryType(raw)
    except ValueError:
        allowed = ", ".join(t.value for t in EntryType)
        raise ValidationFailed(f"type must be one of {allowed}", param="type") from None


def _date(request: web.Request, name: str) -> date:
    raw = request.query.get(name)
    if raw is None:
        raise ValidationFailed(f"{name} is required (YYYY-MM-DD)", param=name)
    try:
        if _DATE.fullmatch(raw) is None:
            raise ValueError(raw)
        return date.fromisoformat(raw)
    except ValueError:
        raise ValidationFailed(f"{name} must be a date, YYYY-MM-DD", param=name) from None


def wants_csv(request: web.Request) -> bool:
    """Whether ``Accept`` ranks ``text/csv`` above JSON (an absent header, or one naming
    neither, gets JSON, as every other route answers)."""
    best = {CSV: 0.0, "application/json": 0.0}
    for part in request.headers.get("Accept", "").split(","):
        media, *params = (p.strip() for p in part.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        media = media.lower()
        for offered in best:
            if media in (offered, offered.split("/")[0] + "/*", "*/*"):
                # An exact range outranks a wildcard at the same quality.
                weight = quality + (0.001 if media == offered else 0.0)
                best[offered] = max(best[offered], weight)
    return best[CSV] > 0.001 and best[CSV] > best["application/json"]


async def list_wallet_transactions(request: web.Request) -> web.StreamResponse:
    """The wallet's transactions, newest first: every posting that changed its balance or its
    pending figures, with the wallet's figures right after it."""
    filters = TransactionFilter(
        created_gte=timestamp_query(request, "created_gte"),
        created_lt=timestamp_query(request, "created_lt"),
        type=_type(request),
    )
    page = await treasury(request).statements.transactions(
        principal(request).company_id,
        request.match_info["wallet_id"],
        page_request(request),
        filters,
    )
    return list_response(request, page.items, page, WalletTransaction, lambda r: r.id)


async def get_wallet_statement(request: web.Request) -> web.StreamResponse:
    """The wallet's statement for the UTC days `from` to `to` (both included): opening figures,
    the transactions oldest first, totals per type and closing figures."""
    from_date, to_date = _date(request, "from"), _date(request, "to")
    wallet_id = request.match_info["wallet_id"]
    statement = await treasury(request).statements.statement(
        principal(request).company_id, wallet_id, from_date, to_date
    )
    if not wants_csv(request):
        return json_response(statement)
    response = web.Response(body=statement_csv(statement).encode(), content_type=CSV)
    response.charset = "utf-8"
    response.headers["Content-Disposition"] = (
        f'attachment; filename="statement-{wallet_id}-{from_date}-{to_date}.csv"'
    )
    return response


def _time(value: datetime) -> str:
    # As the JSON records render it (treasury_core.serialization): ISO 8601 with +00:00.
    return value.astimezone(UTC).isoformat()


def statement_csv(statement: WalletStatement) -> str:
    """The statement as CSV (see :data:`CSV_COLUMNS`); every cell is a number, a date, an id
    or a fixed word, so no cell can read as a spreadsheet formula."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    currency = statement.currency_code

    def figures(record: str, at: datetime, balance: int, available: int) -> list[object]:
        return [record, "", _time(at), "", "", "", "", "", currency, balance, available, "", ""]

    writer.writerow(
        figures(
            "opening",
            statement.period_start,
            statement.opening_balance,
            statement.opening_available_balance,
        )
    )
    for t in statement.transactions:
        writer.writerow(
            [
                "transaction",
                t.id,
                _time(t.created_at),
                t.type.value,
                t.counter.value,
                t.amount,
                "",
                "",
                t.currency_code,
                t.balance_after,
                t.available_balance_after,
                t.pending_in_after,
                t.source_id,
            ]
        )
    for total in statement.totals:
        writer.writerow(
            [
                "total",
                "",
                "",
                total.type.value,
                "",
                total.balance_amount,
                total.pending_amount,
                total.count,
                currency,
                "",
                "",
                "",
                "",
            ]
        )
    writer.writerow(
        figures(
            "closing",
            statement.period_end,
            statement.closing_balance,
            statement.closing_available_balance,
        )
    )
    return out.getvalue()


_WALLET_ID = {"wallet_id": "Wallet id (`wal_…`)."}

ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        "/api/v1/wallet/{wallet_id}/transactions",
        list_wallet_transactions,
        "List a wallet's transactions",
        response=WalletTransaction,
        is_list=True,
        tags=("Wallets",),
        path_params=_WALLET_ID,
        description="`starting_after` is the `id` of the last transaction of the previous "
        "page; a transaction of another wallet is 404. Types: "
        + ", ".join(f"`{t.value}`" for t in EntryType)
        + ".",
        query_params={
            "created_gte": Param(
                "Only transactions created at or after this ISO 8601 timestamp.", datetime
            ),
            "created_lt": Param(
                "Only transactions created before this ISO 8601 timestamp.", datetime
            ),
            "type": Param("Only transactions of this type.", EntryType),
        },
    ),
    Route(
        "GET",
        "/api/v1/wallet/{wallet_id}/statement",
        get_wallet_statement,
        "Get a wallet's statement",
        response=WalletStatement,
        tags=("Wallets",),
        path_params=_WALLET_ID,
        description="With `Accept: text/csv` the same statement comes as CSV: an `opening` "
        "row, one `transaction` row each, a `total` row per type and a `closing` row. A period "
        "covers at most 366 days (`statement_period_invalid`).",
        query_params={
            "from": Param("The first day (UTC), YYYY-MM-DD.", date, required=True),
            "to": Param("The last day (UTC), YYYY-MM-DD, included.", date, required=True),
        },
        media_types=(CSV,),
    ),
)
