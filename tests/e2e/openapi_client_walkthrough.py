"""The README's walk-through, through a client generated from the OpenAPI document.

Run by ``test_openapi_client.py`` with the interpreter of openapi-python-client's own venv
(which has the generated code's httpx, attrs and python-dateutil) and the generated package
``treasury_core_client`` on ``PYTHONPATH``::

    python openapi_client_walkthrough.py BASE_URL SECRET_KEY ACCOUNT_ID

Each step checks its answer and the script exits non-zero at the first surprise; at the end it
prints the figures the test compares, as one JSON line. Only the generated client talks to
the server: no hand-written request, so a field the document gets wrong fails here.
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any, TypeVar

from treasury_core_client import AuthenticatedClient, Client
from treasury_core_client.api.bank_files import import_statement
from treasury_core_client.api.currencies import list_currencies
from treasury_core_client.api.deposits import create_deposit
from treasury_core_client.api.payments import (
    capture_intent,
    count_intents,
    create_intent,
    get_intent,
    get_intent_by_id,
    list_refunds,
    pay,
    refund_intent,
)
from treasury_core_client.api.sandbox import advance_clock, complete_deposit
from treasury_core_client.api.transfers import create_transfer
from treasury_core_client.api.wallets import (
    create_wallet,
    get_wallet,
    get_wallet_balance,
    list_wallet_balances,
    list_wallets,
)
from treasury_core_client.models import (
    BalanceRecord,
    CaptureMethod,
    CardSubmission,
    ClockAdvanceRequest,
    ClockRecord,
    CountRecord,
    CreateDepositRequest,
    CreateIntentRequest,
    CreateTransferRequest,
    CreateWalletRequest,
    Currency,
    CurrencyRecord,
    DepositRecord,
    Error,
    IntentActionRequest,
    IntentStatus,
    MovementStatus,
    PaymentAttemptRecord,
    PaymentIntentRecord,
    PaymentType,
    RefundRecord,
    RefundRequest,
    TransferRecord,
    WalletRecord,
)
from treasury_core_client.types import File, Response

T = TypeVar("T")


def ok(response: Response[Any], kind: type[T]) -> T:
    """The parsed 200 answer, which must be a ``kind``."""
    if response.status_code != 200 or not isinstance(response.parsed, kind):
        raise SystemExit(
            f"expected a {kind.__name__}, got {response.status_code}: {response.content!r}"
        )
    return response.parsed


def ok_list(response: Response[Any], kind: type[T]) -> list[T]:
    """The parsed 200 answer, a list of ``kind``."""
    parsed = response.parsed
    if response.status_code != 200 or not isinstance(parsed, list):
        raise SystemExit(f"expected a list, got {response.status_code}: {response.content!r}")
    if not all(isinstance(item, kind) for item in parsed):
        raise SystemExit(f"expected a list of {kind.__name__}: {response.content!r}")
    return parsed


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"walk-through: {what}")


def main(base_url: str, key: str, account_id: int) -> None:
    api = AuthenticatedClient(base_url=base_url, token=key)
    customer = Client(base_url=base_url)

    # Wallets: the enabled currencies, a EUR wallet (with an Idempotency-Key), its balance.
    codes = {c.code for c in ok_list(list_currencies.sync_detailed(client=api), CurrencyRecord)}
    check("EUR" in codes and "USD" in codes, f"EUR and USD are enabled: {codes}")
    request = CreateWalletRequest(
        name="Operating", currency_id=Currency.EUR, description="Main EUR wallet"
    )
    wallet = ok(
        create_wallet.sync_detailed(client=api, body=request, idempotency_key="first-wallet"),
        WalletRecord,
    )
    again = create_wallet.sync_detailed(client=api, body=request, idempotency_key="first-wallet")
    check(ok(again, WalletRecord).id == wallet.id, "the same Idempotency-Key, the same wallet")
    check(again.headers.get("Idempotent-Replayed") == "true", "the replay says so")
    check(wallet.currency.code == "EUR", f"a EUR wallet: {wallet.currency}")
    check(ok(get_wallet.sync_detailed(wallet.id, client=api), WalletRecord).id == wallet.id, "read")
    balance = ok(get_wallet_balance.sync_detailed(wallet.id, client=api), BalanceRecord)
    check((balance.balance, balance.currency_code) == (0, "EUR"), f"a new wallet: {balance}")
    listed = ok_list(list_wallets.sync_detailed(client=api, limit=10), WalletRecord)
    check([w.id for w in listed] == [wallet.id], f"one wallet listed: {listed}")

    # A deposit, completed by the sandbox without a body.
    deposit = ok(
        create_deposit.sync_detailed(
            client=api,
            body=CreateDepositRequest(
                wallet_id=wallet.id, from_amount=100000, from_currency_id=Currency.EUR
            ),
        ),
        DepositRecord,
    )
    check(deposit.status is MovementStatus.PENDING, f"an announced deposit: {deposit.status}")
    completed = ok(complete_deposit.sync_detailed(deposit.id, client=api), DepositRecord)
    check(completed.status is MovementStatus.COMPLETED, f"completed: {completed.status}")

    # 100.00 EUR into a new USD wallet, settled once the sandbox clock passes 60 s.
    usd = ok(
        create_wallet.sync_detailed(
            client=api, body=CreateWalletRequest(name="USD ops", currency_id=Currency.USD)
        ),
        WalletRecord,
    )
    transfer = ok(
        create_transfer.sync_detailed(
            client=api,
            body=CreateTransferRequest(
                from_wallet_id=wallet.id, to_wallet_id=usd.id, from_amount=10000
            ),
        ),
        TransferRecord,
    )
    check(transfer.status is MovementStatus.PENDING, f"an FX transfer waits: {transfer.status}")
    ok(advance_clock.sync_detailed(client=api, body=ClockAdvanceRequest(seconds=60)), ClockRecord)
    balances = {
        b.currency_code: b.available_balance
        for b in ok_list(list_wallet_balances.sync_detailed(client=api), BalanceRecord)
    }

    # A card payment with manual capture: paid on the customer's side (no key), captured,
    # part refunded, looked up three ways.
    intent = ok(
        create_intent.sync_detailed(
            client=api,
            body=CreateIntentRequest(
                account_id=account_id,
                billing_amount=2500,
                billing_currency=Currency.EUR,
                payment_type=PaymentType.CARD_PAYMENT,
                merchant_reference="order-1",
                capture_method=CaptureMethod.MANUAL,
            ),
        ),
        PaymentIntentRecord,
    )
    check(intent.status is IntentStatus.INITIALIZED, f"a new intent: {intent.status}")
    card = CardSubmission(
        card_number="4242424242424242", expiry_month=12, expiry_year=2034, cvc="123"
    )
    attempt = ok(
        pay.sync_detailed(intent.payment_intent_lookup_id, client=customer, body=card),
        PaymentAttemptRecord,
    )
    check(attempt.status is IntentStatus.AUTHORIZED, f"authorized: {attempt.status}")
    captured = ok(
        capture_intent.sync_detailed(
            client=api, body=IntentActionRequest(payment_intent_id=intent.id)
        ),
        PaymentIntentRecord,
    )
    check(captured.status is IntentStatus.PROCESSED, f"captured: {captured.status}")
    refund = ok(
        refund_intent.sync_detailed(
            client=api, body=RefundRequest(payment_intent_id=intent.id, amount=500)
        ),
        RefundRecord,
    )
    looked_up = ok(
        get_intent.sync_detailed(
            client=api, payment_intent_lookup_id=intent.payment_intent_lookup_id
        ),
        PaymentIntentRecord,
    )
    processed = ok(
        count_intents.sync_detailed(client=api, status=IntentStatus.PROCESSED), CountRecord
    )
    by_id = ok(get_intent_by_id.sync_detailed(str(intent.id), client=api), PaymentIntentRecord)
    refunds = ok_list(
        list_refunds.sync_detailed(client=api, payment_intent_id=intent.id), RefundRecord
    )
    check([r.id for r in refunds] == [refund.id], f"the refund is listed: {refunds}")

    # A bank statement is the operator's to import: sent with the company's key, the generated
    # call posts the XML and reads the documented refusal.
    statement = import_statement.sync_detailed(
        client=api, body=File(payload=io.BytesIO(b"<Document/>"), mime_type="application/xml")
    )
    refused = statement.parsed
    check(isinstance(refused, Error), f"a company's key may not import: {statement.content!r}")
    refusal = [statement.status_code, refused.error.code if isinstance(refused, Error) else None]

    # Two days later the captured money is paid out into the EUR wallet.
    ok(
        advance_clock.sync_detailed(client=api, body=ClockAdvanceRequest(seconds=180000)),
        ClockRecord,
    )
    after = ok(get_wallet_balance.sync_detailed(wallet.id, client=api), BalanceRecord)
    print(
        json.dumps(
            {
                "available_after_transfer": balances,
                "intent_status": by_id.status.value,
                "amount_refunded": looked_up.amount_refunded,
                "processed": processed.count,
                "statement_with_a_company_key": refusal,
                "eur_balance_after_payout": after.balance,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
