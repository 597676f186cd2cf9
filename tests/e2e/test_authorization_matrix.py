"""Issue 7, item 4: an authorization matrix over every route of the JSON API.

Every ``(method, path)`` the app serves from its route table has an entry in :data:`MATRIX`
(a route added later without one fails :func:`test_every_route_has_a_matrix_entry`). Each entry
says how the route is called with real resource ids and what another company's secret key must
see when it uses *this* company's ids: ``404 not_found`` (never data, never 403), an empty
list, a zero count, or data that is the same for everybody. The same request made with this
company's own key is the control: it succeeds, so the 404 comes from tenancy, not from a
wrong id, and nothing the other company tried changed anything.

The operator's routes (a bank statement) are the exception: every company's key is 403 there,
its own included, and the control is the operator's key, which in turn opens no merchant route.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp.test_utils import TestClient

from tests.bankfiles import Entry, camt053
from tests.e2e.conftest import Tenant
from treasury_aiohttp.api import bank_statements as bank_handlers
from treasury_aiohttp.api import cards as card_handlers
from treasury_aiohttp.api import disputes as dispute_handlers
from treasury_aiohttp.api import endpoints as endpoint_handlers
from treasury_aiohttp.api import links as link_handlers
from treasury_aiohttp.api import metadata as metadata_handlers
from treasury_aiohttp.api import movements as treasury_handlers
from treasury_aiohttp.api import notifications as notification_handlers
from treasury_aiohttp.api import payments as payment_handlers
from treasury_aiohttp.api import records as record_handlers
from treasury_aiohttp.api import sandbox as sandbox_handlers
from treasury_aiohttp.api import statements as statement_handlers
from treasury_aiohttp.api import wallets as handlers
from treasury_aiohttp.dashboard import ops as dashboard_ops
from treasury_aiohttp.hosted import pages as hosted_pages
from treasury_aiohttp.routing import Auth, Route
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.services.payments.chargebacks import open_chargeback
from treasury_core.testing.fakes.clock import FakeClock

Client = TestClient[Any, Any]
Ids = dict[str, Any]

USD_BANK = {
    "bank_name": "JPMorgan Chase",
    "account_name": "Acme Ltd",
    "account_number": "000123456789",
    "routing_number": "021000021",
    "currency_id": "USD",
}
APPROVED = "4242424242424242"
THREE_D_SECURE = "4000000000003220"
CHARGEBACK_LOST = "4000000000000051"
CARD = {
    "cardholder_name": "Jane Doe",
    "card_number": APPROVED,
    "expiry_month": 12,
    "expiry_year": 2030,
    "cvc": "123",
}
OPENAPI = ("GET", "/api/v1/openapi.json")


@pytest.fixture
def treasury(database_url: str, clock: FakeClock) -> Treasury:
    """The e2e treasury on the files rail, so the bank-statement route does its work here; the
    other routes behave as on the sandbox rail (the matrix never waits for a settlement).
    The matrix sends every route each wrong key from one address, so failed authentications
    are not limited here (tests/e2e/test_auth_throttle.py covers that limit)."""
    return bootstrap(
        TreasuryConfig(
            database_url=database_url,
            pool_size=4,
            auth_failure_limit_per_second=0,
            withdrawal_fees={"*": (25, 100)},
            bank_rail="files",
            bank_debtor_name="Acme Treasury BV",
            bank_debtor_iban="NL91ABNA0417164300",
            bank_accounts={"USD": [USD_TREASURY_ACCOUNT]},
        ),
        clock=clock,
        wall_clock=clock,
    )


class Cross(Enum):
    """What another company's secret key gets when it names this company's resources."""

    NOT_FOUND = "404 not_found"
    EMPTY = "200 []"
    ZERO = '200 {"count": 0}'
    SAME = "200, the same answer as this company's (data that belongs to nobody)"
    PER_COMPANY = "200, its own answer, different from this company's"
    SANDBOX = "200 (a sandbox control shared by every company)"
    OWN = "200, a resource of its own (the body names nothing of this company's)"
    OPERATOR = "403 for every company's key, its own too; the operator's key is the control"
    NO_KEY = "no key needed (Auth.NONE)"


@dataclass(frozen=True)
class Case:
    """One request of a route, formatted with the ids of :func:`setup`."""

    cross: Cross
    path: str
    body: Callable[[Ids], Any] | None = None
    #: With this company's key (the control); with another company's ids in the body: 404.
    owner_status: int = 200
    #: For EMPTY lists: the id of this company's that its own key does see in the list.
    owner_sees: str | None = None
    #: The body mixes this company's ids with the other company's (needs its resources).
    mixed: bool = False

    def url(self, ids: Ids) -> str:
        return self.path.format(**ids)


def _deposit(ids: Ids) -> Any:
    return {"wallet_id": ids["wallet_id"], "from_amount": 500, "from_currency_id": "USD"}


def _withdraw(wallet: str, bank: str) -> Callable[[Ids], Any]:
    return lambda ids: {
        "wallet_id": ids[wallet],
        "from_amount": 1_000,
        "from_currency_id": "USD",
        "bank_account_id": ids[bank],
    }


def _transfer(source: str, target: str) -> Callable[[Ids], Any]:
    return lambda ids: {
        "from_wallet_id": ids[source],
        "to_wallet_id": ids[target],
        "from_amount": 100,
    }


def _intent(ids: Ids) -> Any:
    return {
        "account_id": ids["account_id"],
        "billing_amount": 1_000,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
        "merchant_reference": "matrix",
    }


def _pmti(ids: Ids) -> Any:
    return {
        "account_id": ids["account_id"],
        "payment_type": "Tokenization",
        "customer_email": "ada@example.com",
        "customer_phone_number": "+447700900123",
    }


def _empty(_: Ids) -> Any:
    return {}


#: The treasury's USD account at its bank, whose statements the matrix imports.
USD_TREASURY_ACCOUNT = "8271930045"


def _statement(ids: Ids) -> Any:
    """A camt.053 (XML text, sent as ``application/xml``) of the treasury's USD account,
    booking this company's withdrawal."""
    entry = Entry(
        "MATRIX-1",
        credit=False,
        amount="10.00",
        currency="USD",
        end_to_end=ids["withdraw_complete_id"],
    )
    return camt053([entry], account=USD_TREASURY_ACCOUNT, currency="USD").decode()


def _action(key: str) -> Callable[[Ids], Any]:
    return lambda ids: {"payment_intent_id": ids[key]}


NF = Cross.NOT_FOUND
MATRIX: dict[tuple[str, str], tuple[Case, ...]] = {
    # Wallets.
    ("POST", "/api/v1/wallet"): (
        Case(Cross.OWN, "/api/v1/wallet", lambda _: {"name": "Theirs", "currency_id": "USD"}),
    ),
    ("GET", "/api/v1/wallet/{wallet_id}"): (Case(NF, "/api/v1/wallet/{wallet_id}"),),
    ("GET", "/api/v1/wallet/{wallet_id}/balance"): (
        Case(NF, "/api/v1/wallet/{wallet_id}/balance"),
    ),
    ("GET", "/api/v1/wallet/{wallet_id}/transactions"): (
        Case(NF, "/api/v1/wallet/{wallet_id}/transactions"),
        Case(NF, "/api/v1/wallet/{wallet_id}/transactions?type=deposit&limit=1"),
    ),
    ("GET", "/api/v1/wallet/{wallet_id}/statement"): (
        Case(NF, "/api/v1/wallet/{wallet_id}/statement?from=2026-01-01&to=2026-01-31"),
    ),
    ("GET", "/api/v1/wallets"): (
        Case(Cross.EMPTY, "/api/v1/wallets", owner_sees="wallet_id"),
        Case(Cross.EMPTY, "/api/v1/wallets?metadata[tag]=m", owner_sees="wallet_id"),
    ),
    ("GET", "/api/v1/wallets/balances"): (
        Case(Cross.EMPTY, "/api/v1/wallets/balances", owner_sees="wallet_id"),
    ),
    ("GET", "/api/v1/currencies"): (Case(Cross.SAME, "/api/v1/currencies"),),
    # Deposits, bank accounts, withdrawals, transfers, virtual accounts.
    ("POST", "/api/v1/deposit"): (Case(NF, "/api/v1/deposit", _deposit),),
    ("GET", "/api/v1/deposit/{deposit_id}"): (Case(NF, "/api/v1/deposit/{deposit_id}"),),
    ("POST", "/api/v1/bank-account"): (
        Case(Cross.OWN, "/api/v1/bank-account", lambda _: USD_BANK),
    ),
    ("GET", "/api/v1/bank-account/formats"): (Case(Cross.SAME, "/api/v1/bank-account/formats"),),
    ("GET", "/api/v1/bank-account/bank-names"): (
        Case(Cross.SAME, "/api/v1/bank-account/bank-names"),
        Case(Cross.SAME, "/api/v1/bank-account/bank-names?currency=USD"),
    ),
    ("POST", "/api/v1/withdraw"): (
        Case(NF, "/api/v1/withdraw", _withdraw("wallet_id", "bank_account_id")),
        # Their own wallet to this company's bank account, and the other way round.
        Case(
            NF,
            "/api/v1/withdraw",
            _withdraw("other_wallet_id", "bank_account_id"),
            owner_status=404,
            mixed=True,
        ),
        Case(
            NF,
            "/api/v1/withdraw",
            _withdraw("wallet_id", "other_bank_account_id"),
            owner_status=404,
            mixed=True,
        ),
    ),
    ("GET", "/api/v1/withdraw/{withdraw_id}"): (
        Case(NF, "/api/v1/withdraw/{withdraw_complete_id}"),
    ),
    ("GET", "/api/v1/withdrawals"): (
        Case(Cross.EMPTY, "/api/v1/withdrawals", owner_sees="withdraw_complete_id"),
        Case(
            Cross.EMPTY,
            "/api/v1/withdrawals?metadata[tag]=m",
            owner_sees="withdraw_complete_id",
        ),
    ),
    ("POST", "/api/v1/transfer"): (
        Case(NF, "/api/v1/transfer", _transfer("wallet_id", "wallet2_id")),
        # Taking this company's money, and pushing money into this company's wallet.
        Case(
            NF,
            "/api/v1/transfer",
            _transfer("wallet_id", "other_wallet_id"),
            owner_status=404,
            mixed=True,
        ),
        Case(
            NF,
            "/api/v1/transfer",
            _transfer("other_wallet_id", "wallet_id"),
            owner_status=404,
            mixed=True,
        ),
    ),
    ("GET", "/api/v1/transfer/{transfer_id}"): (
        Case(NF, "/api/v1/transfer/{transfer_complete_id}"),
    ),
    ("GET", "/api/v1/transfers"): (
        Case(Cross.EMPTY, "/api/v1/transfers", owner_sees="transfer_complete_id"),
        Case(Cross.EMPTY, "/api/v1/transfers?metadata[tag]=m", owner_sees="transfer_complete_id"),
    ),
    ("POST", "/api/v1/virtual-account"): (
        Case(
            NF,
            "/api/v1/virtual-account",
            lambda ids: {"wallet_id": ids["wallet_id"], "source_currency": "USD"},
        ),
    ),
    ("GET", "/api/v1/virtual-accounts"): (
        Case(Cross.EMPTY, "/api/v1/virtual-accounts", owner_sees="virtual_account_id"),
        Case(
            Cross.EMPTY,
            "/api/v1/virtual-accounts?metadata[tag]=m",
            owner_sees="virtual_account_id",
        ),
    ),
    # Metadata updates (issue 24): another company's id is not found.
    **{
        ("POST", f"{route}/metadata"): (
            Case(NF, f"{path}/metadata", lambda _: {"metadata": {"matrix": "changed"}}),
        )
        for route, path in (
            ("/api/v1/wallet/{wallet_id}", "/api/v1/wallet/{wallet_id}"),
            ("/api/v1/deposit/{deposit_id}", "/api/v1/deposit/{deposit_id}"),
            ("/api/v1/withdraw/{withdraw_id}", "/api/v1/withdraw/{withdraw_complete_id}"),
            ("/api/v1/transfer/{transfer_id}", "/api/v1/transfer/{transfer_complete_id}"),
            ("/api/v1/bank-account/{bank_account_id}", "/api/v1/bank-account/{bank_account_id}"),
            (
                "/api/v1/virtual-account/{virtual_account_id}",
                "/api/v1/virtual-account/{virtual_account_id}",
            ),
            (
                "/api/v1/payment_method_token_intent/{pmti_id}",
                "/api/v1/payment_method_token_intent/{pmti_id}",
            ),
        )
    },
    # Payment intents.
    ("POST", "/api/v1/payments/intent"): (Case(NF, "/api/v1/payments/intent", _intent),),
    ("GET", "/api/v1/payments/intent"): (
        Case(NF, "/api/v1/payments/intent?payment_intent_lookup_id={refund_lookup_id}"),
    ),
    ("POST", "/api/v1/payments/intent/capture"): (
        Case(NF, "/api/v1/payments/intent/capture", _action("capture_intent_id")),
    ),
    ("POST", "/api/v1/payments/intent/cancel-authorization"): (
        Case(NF, "/api/v1/payments/intent/cancel-authorization", _action("cancel_intent_id")),
    ),
    ("POST", "/api/v1/payments/intent/refund"): (
        Case(
            NF,
            "/api/v1/payments/intent/refund",
            lambda ids: {"payment_intent_id": ids["refund_intent_id"], "amount": 100},
        ),
    ),
    ("GET", "/api/v1/payments/intents"): (
        Case(Cross.EMPTY, "/api/v1/payments/intents", owner_sees="refund_intent_id"),
        Case(
            Cross.EMPTY,
            "/api/v1/payments/intents?metadata[matrix]=yes",
            owner_sees="expire_intent_id",
        ),
        Case(
            Cross.EMPTY,
            "/api/v1/payments/intents?account_id={account_id}",
            owner_sees="refund_intent_id",
        ),
        Case(
            Cross.EMPTY,
            "/api/v1/payments/intents?status=PROCESSED",
            owner_sees="refund_intent_id",
        ),
    ),
    ("POST", "/api/v1/payments/intent/expire"): (
        Case(NF, "/api/v1/payments/intent/expire", _action("expire_intent_id")),
    ),
    ("POST", "/api/v1/payments/intent/{payment_intent_id}/metadata"): (
        Case(
            NF,
            "/api/v1/payments/intent/{refund_intent_id}/metadata",
            lambda _: {"metadata": {"matrix": "changed"}},
        ),
    ),
    ("GET", "/api/v1/payments/intents/count"): (
        Case(Cross.ZERO, "/api/v1/payments/intents/count"),
        Case(Cross.ZERO, "/api/v1/payments/intents/count?account_id={account_id}"),
    ),
    ("POST", "/pay/{payment_intent_lookup_id}"): (
        Case(Cross.NO_KEY, "/pay/{pay_lookup_id}", lambda _: CARD),
    ),
    ("POST", "/pay/{payment_intent_lookup_id}/challenge"): (
        Case(Cross.NO_KEY, "/pay/{challenge_lookup_id}/challenge", lambda _: {"outcome": "pass"}),
    ),
    # Card on file.
    ("POST", "/api/v1/payment_method_token_intent"): (
        Case(NF, "/api/v1/payment_method_token_intent", _pmti),
    ),
    ("GET", "/api/v1/payment_method_token_intent/{pmti_id}"): (
        Case(NF, "/api/v1/payment_method_token_intent/{pmti_id}"),
    ),
    ("POST", "/api/v1/payment_method_token_intent/{pmti_id}/confirm/{secret}"): (
        Case(Cross.NO_KEY, "{confirm_path}", lambda _: CARD),
    ),
    ("GET", "/api/v1/payment_method_tokens/{token_id}"): (
        Case(NF, "/api/v1/payment_method_tokens/{token_id}"),
    ),
    # Disputes (issue 24): the controls submit evidence, then accept.
    ("POST", "/api/v1/payments/chargeback/{chargeback_id}/evidence"): (
        Case(
            NF,
            "/api/v1/payments/chargeback/{chargeback_id}/evidence",
            lambda _: {"uncategorized_text": "delivered"},
        ),
    ),
    ("POST", "/api/v1/payments/chargeback/{chargeback_id}/accept"): (
        Case(NF, "/api/v1/payments/chargeback/{chargeback_id}/accept", _empty),
    ),
    # Every record readable (issue 24).
    ("GET", "/api/v1/payments/intent/{payment_intent_id}"): (
        Case(NF, "/api/v1/payments/intent/{refund_intent_id}"),
    ),
    ("GET", "/api/v1/payments/refund/{refund_id}"): (
        Case(NF, "/api/v1/payments/refund/{refund_id}"),
    ),
    ("GET", "/api/v1/payments/refunds"): (
        Case(Cross.EMPTY, "/api/v1/payments/refunds", owner_sees="refund_id"),
        Case(
            Cross.EMPTY,
            "/api/v1/payments/refunds?payment_intent_id={records_intent_id}",
            owner_sees="refund_id",
        ),
    ),
    ("GET", "/api/v1/payments/chargeback/{chargeback_id}"): (
        Case(NF, "/api/v1/payments/chargeback/{chargeback_id}"),
    ),
    ("GET", "/api/v1/payments/chargebacks"): (
        Case(Cross.EMPTY, "/api/v1/payments/chargebacks", owner_sees="chargeback_id"),
    ),
    ("GET", "/api/v1/payments/payout/{payout_id}"): (
        Case(NF, "/api/v1/payments/payout/{payout_id}"),
    ),
    ("GET", "/api/v1/payments/payouts"): (
        Case(Cross.EMPTY, "/api/v1/payments/payouts", owner_sees="payout_id"),
    ),
    ("GET", "/api/v1/deposits"): (
        Case(Cross.EMPTY, "/api/v1/deposits", owner_sees="deposit_id"),
        Case(Cross.EMPTY, "/api/v1/deposits?wallet_id={wallet_id}", owner_sees="deposit_id"),
    ),
    ("GET", "/api/v1/bank-account/{bank_account_id}"): (
        Case(NF, "/api/v1/bank-account/{bank_account_id}"),
    ),
    ("DELETE", "/api/v1/bank-account/{bank_account_id}"): (
        Case(NF, "/api/v1/bank-account/{spare_bank_account_id}"),
    ),
    ("GET", "/api/v1/bank-accounts"): (
        Case(Cross.EMPTY, "/api/v1/bank-accounts", owner_sees="bank_account_id"),
    ),
    ("GET", "/api/v1/payment_method_tokens"): (
        Case(
            Cross.EMPTY,
            "/api/v1/payment_method_tokens?customer_email=ada@example.com",
            owner_sees="token_id",
        ),
    ),
    ("DELETE", "/api/v1/payment_method_tokens/{token_id}"): (
        Case(NF, "/api/v1/payment_method_tokens/{spare_token_id}"),
    ),
    # Events and webhooks.
    ("POST", "/api/v1/webhook-endpoints"): (
        Case(
            Cross.OWN,
            "/api/v1/webhook-endpoints",
            lambda _: {"url": "https://other.example/hooks"},
        ),
    ),
    ("GET", "/api/v1/webhook-endpoints"): (
        Case(Cross.EMPTY, "/api/v1/webhook-endpoints", owner_sees="endpoint_id"),
    ),
    ("DELETE", "/api/v1/webhook-endpoints/{endpoint_id}"): (
        Case(NF, "/api/v1/webhook-endpoints/{endpoint_id}"),
    ),
    ("POST", "/api/v1/webhook-endpoints/{endpoint_id}"): (
        Case(NF, "/api/v1/webhook-endpoints/{managed_endpoint_id}", lambda _: {"enabled": True}),
    ),
    ("POST", "/api/v1/webhook-endpoints/{endpoint_id}/rotate-secret"): (
        Case(
            NF,
            "/api/v1/webhook-endpoints/{managed_endpoint_id}/rotate-secret",
            lambda _: {"overlap_seconds": 0},
        ),
    ),
    ("GET", "/api/v1/events"): (
        Case(Cross.EMPTY, "/api/v1/events", owner_sees="event_id"),
        Case(Cross.EMPTY, "/api/v1/events?type={event_type}", owner_sees="event_id"),
    ),
    ("GET", "/api/v1/events/{event_id}"): (Case(NF, "/api/v1/events/{event_id}"),),
    ("GET", "/api/v1/events/{event_id}/deliveries"): (
        Case(NF, "/api/v1/events/{event_id}/deliveries"),
    ),
    ("POST", "/api/v1/events/{event_id}/redeliver"): (
        Case(NF, "/api/v1/events/{event_id}/redeliver"),
    ),
    ("GET", "/api/v1/callback-secret"): (Case(Cross.PER_COMPANY, "/api/v1/callback-secret"),),
    # Sandbox controls.
    ("GET", "/api/v1/sandbox/clock"): (Case(Cross.SANDBOX, "/api/v1/sandbox/clock"),),
    ("POST", "/api/v1/sandbox/clock/advance"): (
        Case(Cross.SANDBOX, "/api/v1/sandbox/clock/advance", lambda _: {"seconds": 1}),
    ),
    ("POST", "/api/v1/sandbox/deposits/{deposit_id}/complete"): (
        Case(NF, "/api/v1/sandbox/deposits/{deposit_complete_id}/complete", _empty),
    ),
    ("POST", "/api/v1/sandbox/deposits/{deposit_id}/fail"): (
        Case(NF, "/api/v1/sandbox/deposits/{deposit_fail_id}/fail", _empty),
    ),
    ("POST", "/api/v1/sandbox/withdrawals/{withdraw_id}/complete"): (
        Case(NF, "/api/v1/sandbox/withdrawals/{withdraw_complete_id}/complete", _empty),
    ),
    ("POST", "/api/v1/sandbox/withdrawals/{withdraw_id}/fail"): (
        Case(NF, "/api/v1/sandbox/withdrawals/{withdraw_fail_id}/fail", _empty),
    ),
    ("POST", "/api/v1/sandbox/transfers/{transfer_id}/complete"): (
        Case(NF, "/api/v1/sandbox/transfers/{transfer_complete_id}/complete", _empty),
    ),
    ("POST", "/api/v1/sandbox/transfers/{transfer_id}/fail"): (
        Case(NF, "/api/v1/sandbox/transfers/{transfer_fail_id}/fail", _empty),
    ),
    ("POST", "/api/v1/sandbox/virtual-accounts/{virtual_account_id}/incoming"): (
        Case(
            NF,
            "/api/v1/sandbox/virtual-accounts/{virtual_account_id}/incoming",
            lambda _: {"amount": 100},
        ),
    ),
    # Bank files: the operator's. A statement booking this company's withdrawal is refused to
    # every company's key; the operator's finds the withdrawal (never exported: left
    # unmatched, so nothing moves and the setup state holds).
    ("POST", "/api/v1/bank-statements"): (
        Case(Cross.OPERATOR, "/api/v1/bank-statements", _statement),
    ),
    OPENAPI: (Case(Cross.NO_KEY, "/api/v1/openapi.json"),),
}

TABLES = (
    handlers.ROUTES,
    treasury_handlers.ROUTES,
    payment_handlers.ROUTES,
    link_handlers.ROUTES,
    metadata_handlers.ROUTES,
    card_handlers.ROUTES,
    notification_handlers.ROUTES,
    endpoint_handlers.ROUTES,
    dispute_handlers.ROUTES,
    record_handlers.ROUTES,
    bank_handlers.ROUTES,
    sandbox_handlers.ROUTES,
    statement_handlers.ROUTES,
)


def served_routes(client: Client) -> dict[tuple[str, str], Route]:
    """The routes of the app under test that came from a route table (tagged by the app)."""
    served: dict[tuple[str, str], Route] = {}
    for resource_route in client.server.app.router.routes():
        route = getattr(resource_route.handler, "treasury_route", None)
        if isinstance(route, Route):
            served[(route.method, route.path)] = route
    return served


def untagged_routes(client: Client) -> set[tuple[str, str]]:
    """Routes the auth middleware knows nothing about (it lets them through without a key)."""
    found = set()
    for resource_route in client.server.app.router.routes():
        if resource_route.method == "HEAD":  # aiohttp adds HEAD beside every GET
            continue
        if not isinstance(getattr(resource_route.handler, "treasury_route", None), Route):
            info = resource_route.resource.get_info() if resource_route.resource else {}
            path = info.get("formatter") or info.get("path") or ""
            found.add((resource_route.method, path))
    return found


_PLACEHOLDERS = ("x_placeholder1", "1", "ba_placeholder1")


def placeholder_path(route: Route) -> str:
    """``route``'s path with a value in each parameter that the route matches."""

    def value(match: re.Match[str]) -> str:
        pattern = route.path_patterns.get(match.group(1))
        if pattern is None:
            return _PLACEHOLDERS[0]
        return next(c for c in _PLACEHOLDERS if re.fullmatch(pattern, c))

    return re.sub(r"\{([^}]+)\}", value, route.path)


async def call(
    client: Client,
    method: str,
    url: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, str]:
    kwargs: dict[str, Any] = {"headers": dict(headers or {})}
    if isinstance(body, str):  # a document (a bank statement), not JSON
        kwargs["data"] = body.encode()
        kwargs["headers"]["Content-Type"] = "application/xml"
    elif body is not None:
        kwargs["json"] = body
    response = await client.request(method, url, **kwargs)
    text = await response.text()
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    return response.status, payload, text


async def ok(client: Client, tenant: Tenant, method: str, url: str, body: Any = None) -> Any:
    status, payload, _ = await call(client, method, url, body, tenant.auth)
    assert status == 200, (method, url, payload)
    return payload


# ---------------------------------------------------------------------------------------------
# Resources
# ---------------------------------------------------------------------------------------------


async def _intent_paid(client: Client, tenant: Tenant, card: str | None, **fields: Any) -> Any:
    intent = await ok(
        client, tenant, "POST", "/api/v1/payments/intent", {**_intent(tenant_ids(tenant)), **fields}
    )
    if card is not None:
        status, paid, _ = await call(
            client,
            "POST",
            f"/pay/{intent['payment_intent_lookup_id']}",
            {**CARD, "card_number": card},
        )
        assert status == 200, paid
    return intent


def tenant_ids(tenant: Tenant) -> Ids:
    return {"account_id": tenant.account_id}


async def setup(client: Client, tenant: Tenant, treasury: Treasury) -> Ids:
    """One of every resource a route can name, all of ``tenant``'s, in a known state."""
    ids = tenant_ids(tenant)

    async def post(url: str, body: Any) -> Any:
        return await ok(client, tenant, "POST", url, body)

    async def wallet(currency: str) -> str:
        return str((await post("/api/v1/wallet", {"name": "W", "currency_id": currency}))["id"])

    # Refunds, chargebacks and payouts first: their clock advance must settle nothing else.
    # In EUR, where the company has no wallet: the payout fails, so no wallet balance moves.
    refunded = await _intent_paid(client, tenant, APPROVED, billing_currency="EUR")
    ids["refund_id"] = (
        await post(
            "/api/v1/payments/intent/refund", {"payment_intent_id": refunded["id"], "amount": 100}
        )
    )["id"]
    ids["records_intent_id"] = refunded["id"]
    await _intent_paid(client, tenant, CHARGEBACK_LOST, billing_currency="EUR")
    await post("/api/v1/sandbox/clock/advance", {"seconds": 4 * 86_400})
    [chargeback] = await ok(client, tenant, "GET", "/api/v1/payments/chargebacks")
    ids["chargeback_id"] = chargeback["id"]
    payouts = await ok(client, tenant, "GET", "/api/v1/payments/payouts")
    assert payouts, "setup made no payout"
    ids["payout_id"] = payouts[0]["id"]

    ids["wallet_id"] = await wallet("USD")
    ids["wallet2_id"] = await wallet("USD")
    jpy = await wallet("JPY")
    funding = await post(
        "/api/v1/deposit",
        {"wallet_id": ids["wallet_id"], "from_amount": 1_000_000, "from_currency_id": "USD"},
    )
    await post(f"/api/v1/sandbox/deposits/{funding['id']}/complete", {})
    for name in ("deposit_complete_id", "deposit_fail_id"):
        ids[name] = (await post("/api/v1/deposit", _deposit(ids)))["id"]
    ids["deposit_id"] = funding["id"]
    ids["bank_account_id"] = (await post("/api/v1/bank-account", USD_BANK))["id"]
    ids["spare_bank_account_id"] = (await post("/api/v1/bank-account", USD_BANK))["id"]
    for name in ("withdraw_complete_id", "withdraw_fail_id"):
        made = await post("/api/v1/withdraw", _withdraw("wallet_id", "bank_account_id")(ids))
        assert made["status"] == "pending", made
        ids[name] = made["id"]
    for name in ("transfer_complete_id", "transfer_fail_id"):
        body = {"from_wallet_id": ids["wallet_id"], "to_wallet_id": jpy, "from_amount": 1_000}
        made = await post("/api/v1/transfer", body)
        assert made["status"] == "pending", made  # cross-currency: settles later
        ids[name] = made["id"]
    ids["virtual_account_id"] = (
        await post(
            "/api/v1/virtual-account", {"wallet_id": ids["wallet_id"], "source_currency": "USD"}
        )
    )["id"]
    # What the metadata filters of the lists find (issue 24).
    for path in (
        "/api/v1/wallet/{wallet_id}",
        "/api/v1/withdraw/{withdraw_complete_id}",
        "/api/v1/transfer/{transfer_complete_id}",
        "/api/v1/virtual-account/{virtual_account_id}",
    ):
        await post(path.format(**ids) + "/metadata", {"metadata": {"tag": "m"}})

    ids["capture_intent_id"] = (
        await _intent_paid(client, tenant, APPROVED, capture_method="manual")
    )["id"]
    ids["cancel_intent_id"] = (
        await _intent_paid(client, tenant, APPROVED, capture_method="manual")
    )["id"]
    refund = await _intent_paid(client, tenant, APPROVED)
    ids["refund_intent_id"] = refund["id"]
    ids["refund_lookup_id"] = refund["payment_intent_lookup_id"]
    ids["pay_lookup_id"] = (await _intent_paid(client, tenant, None))["payment_intent_lookup_id"]
    ids["expire_intent_id"] = (
        await _intent_paid(client, tenant, None, metadata={"matrix": "yes"})
    )["id"]
    ids["challenge_lookup_id"] = (await _intent_paid(client, tenant, THREE_D_SECURE))[
        "payment_intent_lookup_id"
    ]

    ids["chargeback_id"] = await _chargeback(
        treasury, tenant, await _intent_paid(client, tenant, APPROVED)
    )

    pmti = await post("/api/v1/payment_method_token_intent", _pmti(ids))
    ids["pmti_id"] = pmti["id"]
    confirmed = await call(
        client, "POST", urlsplit(pmti["latest_version"]["confirm_endpoint_url"]).path, CARD
    )
    assert confirmed[0] == 200 and confirmed[1]["status"] == "succeeded", confirmed
    ids["token_id"] = confirmed[1]["payment_method_token"]
    spare = await post("/api/v1/payment_method_token_intent", _pmti(ids))
    saved = await call(
        client, "POST", urlsplit(spare["latest_version"]["confirm_endpoint_url"]).path, CARD
    )
    ids["spare_token_id"] = saved[1]["payment_method_token"]
    unconfirmed = await post("/api/v1/payment_method_token_intent", _pmti(ids))
    ids["confirm_path"] = urlsplit(unconfirmed["latest_version"]["confirm_endpoint_url"]).path

    await treasury.notifications.run_due()  # events are listed once dispatched
    events = await ok(client, tenant, "GET", "/api/v1/events")
    assert events, "setup made no events"
    ids["event_id"] = events[0]["id"]
    ids["event_type"] = events[0]["type"]
    # Updated and rotated by the controls, so not the one DELETE's control deletes (issue 24).
    ids["managed_endpoint_id"] = (
        await post("/api/v1/webhook-endpoints", {"url": "https://merchant.example/managed"})
    )["id"]
    ids["endpoint_id"] = (
        await post("/api/v1/webhook-endpoints", {"url": "https://merchant.example/hooks"})
    )["id"]
    return ids


async def _chargeback(treasury: Treasury, tenant: Tenant, paid: dict[str, Any]) -> str:
    """An open chargeback on the paid intent, opened as the sandbox's dispute job opens one
    (opening it by time would settle the pending movements the matrix needs pending)."""

    def open_one(uow: Any) -> str:
        intent = uow.intents.get(paid["id"], tenant.company_id, for_update=True)
        due = treasury.clock.now() + timedelta(days=1)
        _, made = open_chargeback(
            treasury.payments.steps, uow, intent, intent.amount_refundable, evidence_due_by=due
        )
        return str(made.id)

    return await treasury.storage.run(open_one)


async def setup_other(client: Client, other: Tenant, ids: Ids) -> None:
    """The other company's own funded wallet and bank account (for the mixed-ownership bodies)."""
    made = await ok(client, other, "POST", "/api/v1/wallet", {"name": "O", "currency_id": "USD"})
    ids["other_wallet_id"] = made["id"]
    deposit = await ok(
        client,
        other,
        "POST",
        "/api/v1/deposit",
        {"wallet_id": made["id"], "from_amount": 100_000, "from_currency_id": "USD"},
    )
    await ok(client, other, "POST", f"/api/v1/sandbox/deposits/{deposit['id']}/complete", {})
    ids["other_bank_account_id"] = (
        await ok(client, other, "POST", "/api/v1/bank-account", USD_BANK)
    )["id"]


def secret_values(ids: Ids) -> set[str]:
    """This company's ids that must never appear in an answer to another company."""
    return {str(v) for k, v in ids.items() if not k.startswith("other_") and len(str(v)) >= 6}


def assert_no_leak(ids: Ids, sent: str, text: str, where: str) -> None:
    # The id the caller named may be echoed in the error message; nothing else of ours may.
    leaked = {v for v in secret_values(ids) if v in text and v not in sent}
    assert not leaked, f"{where}: answer to another company holds {leaked}: {text[:500]}"


def assert_error(status: int, payload: Any, expected: int, kind: str, where: str) -> None:
    assert status == expected, f"{where}: expected {expected} {kind}, got {status}: {payload}"
    assert isinstance(payload, dict) and set(payload) == {"error"}, f"{where}: {payload}"
    assert payload["error"]["type"] == kind, f"{where}: {payload}"


async def assert_untouched(client: Client, tenant: Tenant, ids: Ids) -> None:
    """Nothing another key tried moved this company's resources out of their setup state."""
    for url, field, expected in (
        ("/api/v1/deposit/{deposit_complete_id}", "status", "pending"),
        ("/api/v1/deposit/{deposit_fail_id}", "status", "pending"),
        ("/api/v1/withdraw/{withdraw_complete_id}", "status", "pending"),
        ("/api/v1/withdraw/{withdraw_fail_id}", "status", "pending"),
        ("/api/v1/transfer/{transfer_complete_id}", "status", "pending"),
        ("/api/v1/transfer/{transfer_fail_id}", "status", "pending"),
        (
            "/api/v1/payments/intent?payment_intent_lookup_id={refund_lookup_id}",
            "status",
            "PROCESSED",
        ),
        (
            "/api/v1/payments/intent?payment_intent_lookup_id={refund_lookup_id}",
            "amount_refunded",
            0,
        ),
        # What another key tried to delete is still there.
        ("/api/v1/bank-account/{spare_bank_account_id}", "status", "active"),
        ("/api/v1/payment_method_tokens/{spare_token_id}", "customer_email", "ada@example.com"),
    ):
        got = await ok(client, tenant, "GET", url.format(**ids))
        assert got[field] == expected, (url, got)
    intents = {i["id"]: i for i in await ok(client, tenant, "GET", "/api/v1/payments/intents")}
    assert intents[ids["capture_intent_id"]]["status"] == "AUTHORIZED"
    assert intents[ids["cancel_intent_id"]]["status"] == "AUTHORIZED"
    chargeback = await ok(
        client, tenant, "GET", f"/api/v1/payments/chargeback/{ids['chargeback_id']}"
    )
    assert (chargeback["status"], chargeback["evidence"]) == ("open", None), chargeback
    endpoints = await ok(client, tenant, "GET", "/api/v1/webhook-endpoints")
    assert [e["id"] for e in endpoints] == [ids["endpoint_id"], ids["managed_endpoint_id"]]
    assert all(e["status"] == "enabled" for e in endpoints), endpoints
    assert all(e["previous_secret_expires_at"] is None for e in endpoints), endpoints
    balance = await ok(client, tenant, "GET", f"/api/v1/wallet/{ids['wallet_id']}/balance")
    # 1,000,000 in; two withdrawals of 1,000 + fee (25 + 1 %) and two transfers of 1,000 held.
    assert balance["balance"] == 1_000_000, balance
    assert balance["available_balance"] == 1_000_000 - 2 * 1_035 - 2 * 1_000, balance
    other_wallet = await ok(client, tenant, "GET", f"/api/v1/wallet/{ids['wallet2_id']}/balance")
    assert other_wallet["balance"] == 0, other_wallet


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


async def test_every_route_has_a_matrix_entry(client: Client, treasury: Treasury) -> None:
    served = served_routes(client)
    tables = {(r.method, r.path): r for table in TABLES for r in table}
    assert treasury.config.sandbox, "the matrix covers the sandbox routes too"
    # The app serves exactly the route tables (plus the OpenAPI document) ...
    assert set(served) == set(tables) | {OPENAPI}
    # ... and every one of them has an entry here, and no entry names a route that is gone.
    assert set(served) - set(MATRIX) == set(), "routes without an authorization matrix entry"
    assert set(MATRIX) - set(served) == set(), "matrix entries for routes the app does not serve"
    for key, route in served.items():
        no_key = all(case.cross is Cross.NO_KEY for case in MATRIX[key])
        assert no_key == (route.auth is Auth.NONE), (key, route.auth)
    # Routes outside the table get no auth check at all: only the hosted HTML pages may be so,
    # and the dashboard's, which check their session cookie themselves (test_dashboard_isolation).
    pages = set(hosted_pages.PAGES) | dashboard_ops.PAGES
    assert untagged_routes(client) <= pages, untagged_routes(client) - pages


async def test_missing_malformed_and_unknown_keys_are_401(client: Client, tenant: Tenant) -> None:
    headers: list[dict[str, str]] = [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer    "},
        {"Authorization": f"Basic {tenant.secret_key}"},
        {"Authorization": tenant.secret_key},
        {"Authorization": "Bearer not-a-key"},
        {"Authorization": "Bearer sk_short"},
        {"Authorization": "Bearer sk_" + "é" * 20},
        {"Authorization": f"Bearer sk_{secrets.token_urlsafe(24)}"},
        {"Authorization": f"Bearer pk_{secrets.token_urlsafe(24)}"},
        {"Authorization": f"Bearer {tenant.secret_key}x"},
        {"Authorization": f"Bearer {tenant.publishable_key[:-1]}"},
    ]
    checked = 0
    for (method, path), route in served_routes(client).items():
        if route.auth is Auth.NONE:
            continue
        for header in headers:
            status, payload, _ = await call(client, method, placeholder_path(route), {}, header)
            where = f"{method} {path} with {header!r}"
            assert_error(status, payload, 401, "authentication_error", where)
            if not header.get("Authorization", "").strip():
                assert payload["error"]["code"] == "api_key_missing", where
            checked += 1
    assert checked == len(headers) * sum(
        1 for r in served_routes(client).values() if r.auth is not Auth.NONE
    )


async def test_publishable_keys(
    client: Client, tenant: Tenant, other_tenant: Tenant, treasury: Treasury
) -> None:
    ids = await setup(client, tenant, treasury)
    for (method, path), route in served_routes(client).items():
        if route.auth is Auth.NONE:
            continue
        for case in MATRIX[(method, path)]:
            if case.mixed:
                continue
            url = case.url(ids)
            body = case.body(ids) if case.body else None
            where = f"{method} {url} with a publishable key"
            status, payload, text = await call(client, method, url, body, tenant.publishable_auth)
            if route.auth is not Auth.PUBLISHABLE:
                assert_error(status, payload, 403, "permission_error", where)
                continue
            # A publishable route: allowed with this company's own publishable key ...
            assert status == 200, f"{where}: {payload}"
            # ... and another company's publishable key finds none of this company's ids.
            status, payload, text = await call(
                client, method, url, body, other_tenant.publishable_auth
            )
            assert_error(status, payload, 404, "not_found", f"{where} of another company")
            assert_no_leak(ids, url + json.dumps(body), text, where)
    # The publishable rules of a payment intent: automatic capture only, and never a saved card
    # (its token and the publishable key are both in a browser's reach).
    body = {**_intent(ids), "capture_method": "manual"}
    status, payload, _ = await call(
        client, "POST", "/api/v1/payments/intent", body, tenant.publishable_auth
    )
    assert_error(status, payload, 403, "permission_error", "manual capture, publishable key")
    status, payload, _ = await call(
        client,
        "POST",
        "/api/v1/payments/intent",
        {**_intent(ids), "card_token": ids["token_id"]},
        tenant.publishable_auth,
    )
    assert_error(status, payload, 403, "permission_error", "saved card, publishable key")
    assert payload["error"]["param"] == "card_token", payload
    body["capture_method"] = "automatic"
    status, payload, _ = await call(
        client, "POST", "/api/v1/payments/intent", body, tenant.publishable_auth
    )
    assert status == 200 and payload["capture_method"] == "automatic", payload
    # None of the 403s changed anything.
    await assert_untouched(client, tenant, ids)


_ORDER = [
    Cross.EMPTY,
    Cross.ZERO,
    Cross.SAME,
    Cross.PER_COMPANY,
    Cross.NOT_FOUND,
    Cross.SANDBOX,
    Cross.OWN,
    Cross.OPERATOR,
]


async def test_another_company_sees_nothing(
    client: Client, tenant: Tenant, other_tenant: Tenant, treasury: Treasury
) -> None:
    ids = await setup(client, tenant, treasury)
    cases = [
        (method, case)
        for (method, _), route_cases in MATRIX.items()
        for case in route_cases
        if case.cross is not Cross.NO_KEY
    ]
    # Lists first, while the other company has nothing of its own; then what it creates.
    cases.sort(key=lambda c: (c[1].mixed, _ORDER.index(c[1].cross)))
    other_made: list[str] = []
    for method, case in cases:
        if case.mixed and "other_wallet_id" not in ids:
            await setup_other(client, other_tenant, ids)
        url = case.url(ids)
        body = case.body(ids) if case.body else None
        where = f"{method} {url} {json.dumps(body)} with another company's secret key"
        status, payload, text = await call(client, method, url, body, other_tenant.auth)
        assert_no_leak(ids, url + json.dumps(body), text, where)
        if case.cross is Cross.NOT_FOUND:
            assert_error(status, payload, 404, "not_found", where)
            continue
        if case.cross is Cross.OPERATOR:
            assert_error(status, payload, 403, "permission_error", where)
            continue
        assert status == 200, f"{where}: {status} {payload}"
        if case.cross is Cross.EMPTY:
            assert payload == [], f"{where}: {payload}"
        elif case.cross is Cross.ZERO:
            assert payload == {"count": 0}, f"{where}: {payload}"
        elif case.cross in (Cross.SAME, Cross.PER_COMPANY):
            mine = await ok(client, tenant, method, url, body)
            if case.cross is Cross.SAME:
                assert payload == mine, where
            else:
                assert payload != mine, where
        elif case.cross is Cross.OWN:
            other_made.append(str(payload["id"]))
            owner = str(payload.get("company_id", other_tenant.company_id))
            assert owner == str(other_tenant.company_id), f"{where}: {payload}"

    # Nothing the other company tried touched this company's resources ...
    await assert_untouched(client, tenant, ids)
    # ... and what it created is invisible to this company.
    for list_url in ("/api/v1/wallets", "/api/v1/webhook-endpoints"):
        seen = {str(item["id"]) for item in await ok(client, tenant, "GET", list_url)}
        assert not seen & set(other_made), (list_url, seen & set(other_made))
    if other_made:
        status, payload, _ = await call(
            client, "GET", f"/api/v1/wallet/{other_made[0]}", None, tenant.auth
        )
        assert_error(status, payload, 404, "not_found", "this company reading the other's wallet")

    # The controls: the same requests with this company's own key succeed (the operator's
    # routes: with the operator's key, after this company's own key was refused too).
    _, operator_key = await treasury.companies.create_operator_key("matrix")
    for method, case in cases:
        url = case.url(ids)
        body = case.body(ids) if case.body else None
        status, payload, _ = await call(client, method, url, body, tenant.auth)
        where = f"{method} {url} {json.dumps(body)} with this company's key"
        if case.cross is Cross.OPERATOR:
            assert_error(status, payload, 403, "permission_error", where)
            status, payload, _ = await call(
                client, method, url, body, {"Authorization": f"Bearer {operator_key}"}
            )
            assert status == 200, f"{method} {url} with the operator's key: {status} {payload}"
            continue
        if case.owner_status != 200:
            assert_error(status, payload, case.owner_status, "not_found", where)
            continue
        assert status == 200, f"{where}: {status} {payload}"
        if case.owner_sees is not None:
            wanted = ids[case.owner_sees]
            listed = {item.get("id") for item in payload} | {
                item.get("wallet_id") for item in payload
            }
            assert wanted in listed, f"{where}: {wanted} not in {payload}"
        elif case.cross is Cross.ZERO:
            assert payload["count"] > 0, f"{where}: {payload}"


async def test_an_operator_key_opens_only_the_operators_routes(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    ids = await setup(client, tenant, treasury)
    _, raw = await treasury.companies.create_operator_key("matrix")
    operator = {"Authorization": f"Bearer {raw}"}
    opened = 0
    for (method, path), route in served_routes(client).items():
        if route.auth is Auth.NONE:
            continue
        for case in MATRIX[(method, path)]:
            if case.mixed:  # needs the other company's resources; its plain case covers it
                continue
            url = case.url(ids)
            body = case.body(ids) if case.body else None
            status, payload, _ = await call(client, method, url, body, operator)
            where = f"{method} {url} with an operator key"
            if route.auth is Auth.OPERATOR:
                assert status == 200, f"{where}: {status} {payload}"
                opened += 1
                continue
            assert_error(status, payload, 401, "authentication_error", where)
            assert payload["error"]["message"] == "Invalid API key provided", where
    assert opened == sum(
        len(MATRIX[key]) for key, r in served_routes(client).items() if r.auth is Auth.OPERATOR
    )
    assert opened > 0
    # Refused everywhere else, and what it did do (an unmatched line) moved nothing.
    await assert_untouched(client, tenant, ids)


async def test_routes_without_auth_need_no_key(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    ids = await setup(client, tenant, treasury)
    ran = 0
    for (method, _), route_cases in MATRIX.items():
        for case in route_cases:
            if case.cross is not Cross.NO_KEY:
                continue
            url = case.url(ids)
            status, payload, _ = await call(
                client, method, url, case.body(ids) if case.body else None
            )
            assert status == 200, f"{method} {url} without a key: {status} {payload}"
            ran += 1
    assert ran == sum(1 for r in served_routes(client).values() if r.auth is Auth.NONE)
    # What they did: the intent was paid, the challenge passed, the card saved.
    paid = await ok(
        client,
        tenant,
        "GET",
        f"/api/v1/payments/intent?payment_intent_lookup_id={ids['pay_lookup_id']}",
    )
    assert paid["status"] == "PROCESSED", paid
    passed = await ok(
        client,
        tenant,
        "GET",
        f"/api/v1/payments/intent?payment_intent_lookup_id={ids['challenge_lookup_id']}",
    )
    assert passed["status"] == "PROCESSED", passed
