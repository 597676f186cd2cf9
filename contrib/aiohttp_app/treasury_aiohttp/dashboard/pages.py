"""The dashboard's money pages: home, payments (list, detail, capture/void/refund), wallets.

Every read and action goes through the services the API uses, with the signed-in company's id
(:class:`~treasury_aiohttp.dashboard.auth.Session`), so a page shows exactly what that company's
secret key would read from the API. Lists are the API's pages (``limit``/``starting_after``,
newest first) with the same filters, read through the same parsers, so a bad filter is refused
with the API's message.
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, date, datetime, timedelta
from functools import partial
from typing import Any

from aiohttp import web
from pydantic import TypeAdapter, ValidationError

from treasury_aiohttp.dashboard.auth import Session, posted, redirect, render
from treasury_aiohttp.dashboard.charts import bar_chart, line_chart
from treasury_aiohttp.dashboard.format import (
    counted,
    iso_amount,
    money,
    number,
    parse_amount,
    typed_amount,
)
from treasury_aiohttp.hosted.forms import FormData
from treasury_aiohttp.io import page_request, timestamp_query, treasury
from treasury_aiohttp.query import intent_status
from treasury_core.companies import KeyKind
from treasury_core.errors import InvalidRequestError, NotFound, ValidationFailed
from treasury_core.interface.idempotency import StoredResponse, fingerprint
from treasury_core.interface.records import DepositRecord, TransferRecord, WithdrawalRecord
from treasury_core.ledger.balance import BalanceRecord
from treasury_core.listing import RecordFilter
from treasury_core.movements.records import Deposit, Transfer, Withdrawal
from treasury_core.pagination import Page, PageRequest
from treasury_core.payments import IntentStatus, PaymentIntent
from treasury_core.payments.intents import IntentFilter
from treasury_core.payments.records import Chargeback, Payout, Transaction
from treasury_core.payments.requests import Reference
from treasury_core.payments.states import check_refundable
from treasury_core.services.idempotency import Replay
from treasury_core.validation import Email, whole_number

#: Query parameters each list takes; anything else is refused, as the API refuses it.
PAYMENT_FILTERS = (
    "status", "created_gte", "created_lt", "merchant_reference", "customer_email",
    "starting_after", "limit",
)  # fmt: skip
_MAX_ID = 2**63 - 1
#: How many of the last day's intents the home page sums into the volume chart.
VOLUME_SCAN_LIMIT = 2000


def only(request: web.Request, names: tuple[str, ...]) -> None:
    """Refuse a query parameter the page does not take, or one given twice."""
    seen: set[str] = set()
    for name, _ in request.query.items():
        if name not in names:
            raise ValidationFailed(f"Received unknown parameter: {name}", param=None)
        if name in seen:
            raise ValidationFailed(f"Received duplicate parameter: {name}", param=name)
        seen.add(name)


_REFERENCE: TypeAdapter[str] = TypeAdapter(Reference)
_EMAIL: TypeAdapter[str] = TypeAdapter(Email)


def checked_text(raw: object, param: str, adapter: TypeAdapter[str] = _REFERENCE) -> str | None:
    """Optional text (blank is ``None``) as the API's type for it reads it: a NUL or other
    control character never reaches the database (PostgreSQL refuses NUL with an error, so it
    would be a 500), it is a 400 naming the field, with the API's message."""
    if not isinstance(raw, str) or not raw.strip():
        return None
    try:
        return adapter.validate_python(raw.strip())
    except ValidationError as error:
        problem = error.errors(include_url=False)[0]["msg"]
        raise ValidationFailed(f"Invalid {param}: {problem}", param=param) from None


def _intent_id(raw: str) -> int:
    value = whole_number(raw) if raw.isascii() and raw.isdigit() else None
    if value is None or not 1 <= value <= _MAX_ID:
        raise NotFound("No such payment intent", param="payment_intent_id")
    return value


# --- home ----------------------------------------------------------------------------------------


async def home(request: web.Request, session: Session) -> web.StreamResponse:
    """Balances per wallet, the last 24 hours of payments (count and volume per hour), and the
    webhook endpoints whose deliveries are failing."""
    only(request, ())
    t = treasury(request)
    company = session.company_id
    first_wallets = PageRequest(limit=100)
    balances = await t.wallets.balances(company, first_wallets)
    now = t.clock.now()
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=23)
    hours = [start + timedelta(hours=h) for h in range(24)]
    counts = [
        await t.payments.count(
            company, IntentFilter(created_gte=hour, created_lt=hour + timedelta(hours=1))
        )
        for hour in hours
    ]
    volume, currency, scanned_all = await _volume(request, session, hours)
    failing = [f for f in (await t.notifications.status()).failing if f.company_id == company]
    labels = [f"{h:%H}:00 UTC" for h in hours]
    count = partial(counted, request)
    # The time axis: every sixth hour and the last, as "13:00".
    marks = {i: f"{h:%H}:00" for i, h in enumerate(hours) if i % 6 == 0 or i == 23}
    count_chart = bar_chart(
        counts,
        [
            f"{lab}: {count(n, 'payment', 'payments')}"
            for lab, n in zip(labels, counts, strict=True)
        ],
        partial(number, request),
        marks,
    )
    volume_chart = None
    if currency:
        amount = partial(money, request, currency=currency)
        volume_chart = bar_chart(
            volume,
            [f"{lab}: {amount(v)}" for lab, v in zip(labels, volume, strict=True)],
            amount,
            marks,
        )
    return render(
        request, "home.html", session.prefix, session=session, title="Home",
        balances=balances.items,
        names=await wallet_names(request, company, balances, first_wallets),
        more_wallets=balances.has_more, money=money, req=request, count=count,
        count_chart=count_chart, volume_chart=volume_chart,
        hours=list(zip(labels, counts, volume, strict=True)), currency=currency,
        scanned_all=scanned_all, total=sum(counts), failing=failing,
    )  # fmt: skip


async def wallet_names(
    request: web.Request, company_id: int, balances: Page[BalanceRecord], paging: PageRequest
) -> dict[str, str]:
    """The name of each wallet of ``balances`` (the page of balance records ``paging`` read),
    by id: the same page of wallets in one query (both are paged by wallet id, newest first);
    one it missed (made in between) is read by itself."""
    service = treasury(request).wallets
    if not balances.items:
        return {}
    names = {w.id: w.name for w in (await service.list(company_id, paging)).items}
    for balance in balances.items:
        if balance.wallet_id not in names:
            names[balance.wallet_id] = (await service.get(company_id, balance.wallet_id)).name
    return names


async def _volume(
    request: web.Request, session: Session, hours: list[Any]
) -> tuple[list[int], str | None, bool]:
    """Captured or authorized amounts per hour, in the currency most of them are in."""
    t = treasury(request)
    start, end = hours[0], hours[-1] + timedelta(hours=1)
    filters = IntentFilter(created_gte=start, created_lt=end)
    per_currency: dict[str, list[int]] = {}
    after, seen, more = None, 0, True
    while more and seen < VOLUME_SCAN_LIMIT:
        page = await t.payments.list(session.company_id, filters, limit=100, starting_after=after)
        for intent in page.items:
            if intent.status in (IntentStatus.PROCESSED, IntentStatus.AUTHORIZED):
                slot = int((intent.created_at - start).total_seconds() // 3600)
                row = per_currency.setdefault(intent.billing_currency, [0] * 24)
                row[min(max(slot, 0), 23)] += intent.billing_amount
        seen += len(page.items)
        more = page.has_more
        after = page.items[-1].id if page.items else None
    if not per_currency:
        return [0] * 24, None, not more
    currency = max(per_currency, key=lambda c: sum(1 for v in per_currency[c] if v))
    return per_currency[currency], currency, not more


# --- payments ------------------------------------------------------------------------------------


def _intent_filter(request: web.Request) -> IntentFilter:
    # The filter form sends an empty status for "any".
    return IntentFilter(
        status=intent_status(request.query.get("status") or None),
        created_gte=_day_or_time(request, "created_gte"),
        created_lt=_day_or_time(request, "created_lt"),
        merchant_reference=checked_text(
            request.query.get("merchant_reference"), "merchant_reference"
        ),
        customer_email=checked_text(request.query.get("customer_email"), "customer_email", _EMAIL),
    )


def _day_or_time(request: web.Request, name: str) -> Any:
    """A date from the filter form (``2026-01-31``: midnight UTC) or an ISO 8601 timestamp."""
    raw = request.query.get(name)
    if not raw:
        return None
    if len(raw) == 10:
        try:
            day = date.fromisoformat(raw)
        except ValueError:
            raise ValidationFailed(f"{name} must be a date (YYYY-MM-DD)", param=name) from None
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    return timestamp_query(request, name)


async def payments(request: web.Request, session: Session) -> web.StreamResponse:
    """The payments list, filtered and paged as ``GET /api/v1/payments/intents`` is."""
    only(request, PAYMENT_FILTERS)
    filters = _intent_filter(request)
    paging = page_request(request)
    after = paging.starting_after
    starting_after = None
    if after:
        # A cursor that no intent id could be ("0", twenty digits) is a bad query (400), not
        # a missing payment (404).
        number = whole_number(after) if after.isascii() and after.isdigit() else None
        if number is None or not 1 <= number <= _MAX_ID:
            raise ValidationFailed(
                "starting_after must be a payment intent id", param="starting_after"
            )
        starting_after = number
    page = await treasury(request).payments.list(
        session.company_id, filters, limit=paging.limit, starting_after=starting_after
    )
    kept = {k: v for k, v in request.query.items() if k not in ("starting_after",) and v}
    next_query = None
    if page.has_more and page.items:
        next_query = {**kept, "starting_after": str(page.items[-1].id)}
    return render(
        request, "payments.html", session.prefix, session=session, title="Payments",
        intents=page.items, money=money, req=request, query=kept, next_query=next_query,
        statuses=[s.value for s in IntentStatus], paged=bool(after),
    )  # fmt: skip


async def payment(request: web.Request, session: Session) -> web.StreamResponse:
    """One intent: its figures, timeline (refunds, chargebacks) and the actions it allows."""
    only(request, ())
    t = treasury(request)
    intent = await t.payments.get(session.company_id, _intent_id(request.match_info["intent_id"]))
    return await _payment_page(request, session, intent)


async def _payment_page(
    request: web.Request,
    session: Session,
    intent: PaymentIntent,
    *,
    refused: ValidationFailed | None = None,
    form: FormData | None = None,
) -> web.Response:
    """The payment's page; with ``refused``, the refund form again (400), saying what was wrong
    with what ``form`` held, its fields as typed."""
    t = treasury(request)
    refunds = await t.payments.refunds(session.company_id, intent.id)
    chargebacks = await t.records.list(
        Chargeback, session.company_id, RecordFilter(payment_intent_id=intent.id),
        PageRequest(limit=100),
    )  # fmt: skip
    payouts = await t.records.list(
        Payout, session.company_id, RecordFilter(payment_intent_id=intent.id),
        PageRequest(limit=100),
    )  # fmt: skip
    refundable = intent.amount_refundable
    timeline: list[tuple[Any, str]] = [(intent.created_at, "Created")]
    if intent.latest_transaction_id is not None:
        txn = await t.records.get(Transaction, session.company_id, intent.latest_transaction_id)
        card = f"{(txn.card_brand or 'card').title()} •••• {txn.card_last4 or '????'}"
        failure = f": {txn.failure_message or txn.failure_reason}" if txn.failure_reason else ""
        timeline.append((txn.created_at, f"Latest attempt ({card}): {txn.status.value}{failure}"))
    for payout in payouts.items:
        amount = money(request, payout.amount, payout.currency)
        timeline.append(
            (payout.created_at, f"Payout {payout.id}: {amount} ({payout.status.value})")
        )
    if intent.authorized_at:
        timeline.append((intent.authorized_at, "Authorized"))
    if intent.captured_at:
        timeline.append((intent.captured_at, "Captured"))
    for refund in refunds:
        what = f"Refund {refund.id}: {money(request, refund.amount, refund.currency)}"
        timeline.append((refund.created_at, f"{what} ({refund.status.value})"))
    for chargeback in chargebacks.items:
        what = (
            f"Chargeback {chargeback.id}: {money(request, chargeback.amount, chargeback.currency)}"
        )
        timeline.append((chargeback.created_at, f"{what} ({chargeback.status.value})"))
    if intent.status is IntentStatus.CANCELLED:
        reason = intent.cancellation_reason.value if intent.cancellation_reason else "cancelled"
        timeline.append(
            (intent.authorization_expires_at or intent.created_at, f"Cancelled ({reason})")
        )
    timeline.sort(key=lambda item: item[0])
    typed = {
        k: v for k, v in (form or {}).items() if k in ("amount", "reason") and isinstance(v, str)
    }
    return render(
        request, "payment.html", session.prefix, session=session,
        status=400 if refused else 200,
        title=f"Payment {intent.id}", intent=intent, money=money, req=request,
        timeline=timeline, refundable=refundable,
        can_capture=intent.status is IntentStatus.AUTHORIZED,
        can_refund=intent.status is IntentStatus.PROCESSED and refundable > 0,
        amount_hint=typed_amount(request, refundable, intent.billing_currency),
        refused=refused, typed=typed,
    )  # fmt: skip


#: The confirmed post's fields: what the merchant was shown, checked again before acting.
CONFIRM_AMOUNT = "confirm_amount"
CONFIRM_CURRENCY = "confirm_currency"
CONFIRM_REFUNDED = "confirm_refunded"
CONFIRM_TOKEN = "confirmation"


async def payment_action(request: web.Request, session: Session) -> web.StreamResponse:
    """``POST …/payments/{id}/capture|void|refund``: first the confirmation page, showing the
    exact amount and currency the action moves; its confirmed post (which repeats them) makes
    the API's call, and goes back to the payment."""
    t = treasury(request)
    intent = await t.payments.get(session.company_id, _intent_id(request.match_info["intent_id"]))
    action = request.match_info["action"]
    form = posted(request)
    if CONFIRM_AMOUNT not in form:
        return await _review(request, session, intent, action, form)
    amount = _confirmed(request, intent, action, form)
    reason = checked_text(form.get("reason"), "reason") if action == "refund" else None
    # The confirmation's own key, claimed as an API call's Idempotency-Key is: two posts of one
    # confirmation at the same moment both pass the check above, and only the claim, taken in
    # the service's own transaction, lets one of them act (the other is told it is under way,
    # and once it is done is sent to the payment, as a replay).
    outcome = await t.idempotency.claim(
        session.company_id,
        CONFIRMATION_KEY_PREFIX + _confirmation_token(form),
        fingerprint("POST", request.path, f"{amount} {intent.billing_currency} {reason}".encode()),
        kind=KeyKind.SECRET,
    )
    done = redirect(f"{session.prefix}/dashboard/payments/{intent.id}")
    if isinstance(outcome, Replay):
        return done
    try:
        if action == "capture":
            await t.payments.capture(
                session.company_id, intent.id, idempotency=outcome.ticket(_acted)
            )
        elif action == "void":
            await t.payments.cancel(
                session.company_id, intent.id, idempotency=outcome.ticket(_acted)
            )
        else:
            await t.payments.refund(
                session.company_id,
                intent.id,
                amount=amount,
                reason=reason,
                idempotency=outcome.ticket(_acted),
            )
    except BaseException:
        # A refusal moved nothing (a refund the provider lost stays bound to its record, and
        # the key with it): the same confirmation may be posted again.
        await t.idempotency.release(outcome)
        raise
    return done


#: Where a confirmation's key lives among the company's idempotency keys; the rest is the
#: random token the confirmation page carries, so no API caller's key can take its place.
CONFIRMATION_KEY_PREFIX = "dashboard-confirmation:"
_TOKEN = re.compile(r"[A-Za-z0-9_-]{32}")


def _confirmation_token(form: FormData) -> str:
    token = form.get(CONFIRM_TOKEN)
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        raise ValidationFailed("The confirmation is not one this page made", param=None)
    return token


def _acted(_result: object) -> StoredResponse:
    # What a replay of a confirmation answers is the payment's page, not this body.
    return StoredResponse(303, b"{}")


_QUESTIONS: dict[str, tuple[str, str]] = {
    # action: (the question, the confirming button), each with the amount in the page's locale
    "capture": ("Capture {amount}?", "Capture {amount}"),
    "void": ("Void the hold of {amount}?", "Void: release {amount}"),
    "refund": ("Refund {amount}?", "Refund {amount}"),
}


async def _review(
    request: web.Request, session: Session, intent: PaymentIntent, action: str, form: FormData
) -> web.Response:
    """The confirmation page of ``action``; a refund amount the page cannot read exactly, or
    that the payment cannot take, is the payment's page again saying why (nothing done)."""
    currency = intent.billing_currency
    amount = intent.billing_amount
    reason = None
    if action == "refund":
        try:
            raw = form.get("amount")
            typed = (
                parse_amount(request, raw, currency, "amount")
                if isinstance(raw, str) and raw.strip()
                else None
            )
            reason = checked_text(form.get("reason"), "reason")
            amount = _refundable(request, intent, typed)
        except ValidationFailed as refused:
            return await _payment_page(request, session, intent, refused=refused, form=form)
    shown = money(request, amount, currency)
    question, button = (text.format(amount=shown) for text in _QUESTIONS[action])
    return render(
        request, "confirm.html", session.prefix, session=session, title=question,
        intent=intent, action=action, button=button, reason=reason,
        exact=iso_amount(request, amount, currency), minor=amount, shown=shown,
        fields={CONFIRM_AMOUNT: str(amount), CONFIRM_CURRENCY: currency,
                CONFIRM_REFUNDED: str(intent.amount_refunded), "reason": reason or "",
                CONFIRM_TOKEN: secrets.token_urlsafe(24)},
        money=money, req=request,
    )  # fmt: skip


def _refundable(request: web.Request, intent: PaymentIntent, amount: int | None) -> int:
    """What a refund of ``amount`` (``None``: all that remains) moves, or why it cannot."""
    try:
        return check_refundable(intent, amount)
    except ValidationFailed as refused:
        if refused.code != "amount_too_large":
            raise
        remaining = money(request, intent.amount_refundable, intent.billing_currency)
        raise ValidationFailed(
            f"amount is more than the {remaining} that remains refundable",
            code=refused.code,
            param="amount",
        ) from None


_CHANGED = "The payment changed after this was shown: look at it again before you confirm."


def _confirmed(request: web.Request, intent: PaymentIntent, action: str, form: FormData) -> int:
    """The amount the merchant confirmed, if the payment is still as the confirmation showed
    it; a changed payment (another refund since, say: a second post of the same confirmation)
    is refused, so one confirmation never acts twice."""
    raw, currency = form.get(CONFIRM_AMOUNT), form.get(CONFIRM_CURRENCY)
    amount = whole_number(raw) if isinstance(raw, str) and raw.isascii() else None
    if amount is None or amount <= 0 or currency != intent.billing_currency:
        raise ValidationFailed("The confirmation is not one this page made", param=None)
    if action == "refund":
        refunded = form.get(CONFIRM_REFUNDED)
        if refunded != str(intent.amount_refunded):
            raise InvalidRequestError(_CHANGED, code="payment_changed")
        return amount
    if amount != intent.billing_amount:
        raise InvalidRequestError(_CHANGED, code="payment_changed")
    return amount


# --- wallets -------------------------------------------------------------------------------------


async def wallets(request: web.Request, session: Session) -> web.StreamResponse:
    """Each wallet's balance record, paged (newest wallet first)."""
    only(request, ("starting_after", "limit"))
    paging = page_request(request)
    page = await treasury(request).wallets.balances(session.company_id, paging)
    next_query = None
    if page.has_more and page.items:
        next_query = {"starting_after": page.items[-1].wallet_id}
    return render(
        request, "wallets.html", session.prefix, session=session, title="Wallets",
        balances=page.items, names=await wallet_names(request, session.company_id, page, paging),
        money=money, req=request, next_query=next_query,
    )  # fmt: skip


async def wallet(request: web.Request, session: Session) -> web.StreamResponse:
    """A wallet: its balance record, statement (newest first, paged), balance-over-time chart,
    and its deposits, withdrawals and transfers with their states."""
    only(request, ("starting_after", "limit"))
    t = treasury(request)
    company, wallet_id = session.company_id, request.match_info["wallet_id"]
    balance = await t.wallets.balance(company, wallet_id)
    named = await t.wallets.get(company, wallet_id)
    statement = await t.statements.transactions(company, wallet_id, page_request(request))
    first = PageRequest(limit=10)
    deposits = await t.records.list(Deposit, company, RecordFilter(wallet_id=wallet_id), first)
    withdrawals = await t.records.list(
        Withdrawal, company, RecordFilter(wallet_id=wallet_id), first
    )
    transfers = await t.records.list(Transfer, company, RecordFilter(wallet_id=wallet_id), first)
    # Oldest first for the line; the balance before the oldest shown is where the line starts.
    history = list(reversed(statement.items))
    points = []
    if history:
        moved = history[0].amount if history[0].counter.value == "balance" else 0
        points = [history[0].balance_after - moved, *(row.balance_after for row in history)]
    next_query = None
    if statement.has_more and statement.items:
        next_query = {"starting_after": statement.items[-1].id}
    amount = partial(money, request, currency=balance.currency_code)
    chart = None
    if len(points) > 1:
        # The line's ends: the oldest transaction shown and the newest.
        oldest, newest = (f"{r.created_at:%Y-%m-%d %H:%M}" for r in (history[0], history[-1]))
        chart = line_chart(points, amount, oldest, newest)
    return render(
        request, "wallet.html", session.prefix, session=session, title=f"Wallet {named.name}",
        wallet=named, balance=balance, transactions=statement.items, money=money, req=request,
        chart=chart,
        first_point=points[0] if points else None, last_point=points[-1] if points else None,
        deposits=[DepositRecord.of(d) for d in deposits.items],
        withdrawals=[WithdrawalRecord.of(w) for w in withdrawals.items],
        transfers=[TransferRecord.of(tr) for tr in transfers.items], next_query=next_query,
    )  # fmt: skip


# ``money`` is the operator's pages' formatter too (dashboard_bank).
__all__ = ["home", "money", "payment", "payment_action", "payments", "wallet", "wallets"]
