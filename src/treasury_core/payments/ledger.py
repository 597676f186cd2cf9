"""How card money is written to the ledger. Pure: builds legs, moves nothing.

Rules:
- Card money arrives from the card network, ``world:{CUR}``, into the company's settlement
  balance ``settlement:{company}:{CUR}`` of the intent's processing currency. When the billing
  currency differs, the legs go through the platform's FX liquidity accounts, as transfers do,
  so each leg stays in one currency and every journal balances per currency.
- An authorization is a hold: reservations with the hold's deadline (7 days). Capture posts
  them, a void releases them, expiry expires them; the settlement balance shows the held money
  as ``pending_in`` until then. An automatic-capture payment moves the money at once.
- A refund reserves its amount out of settlement towards the card network and posts it once the
  provider refunded (voids it if the provider refused). A chargeback holds its amount out of
  settlement while open: posted when lost, released when won. A payout reserves settled funds
  towards the company's wallet and posts them when applied.
- Settlement balances are unguarded: a refund or a lost chargeback after the money was paid out
  takes the balance below zero, which is what the company then owes.
"""

from __future__ import annotations

from datetime import datetime

from treasury_core.ledger import Account, AccountKind, Leg, Move, PendingCategory, Reserve
from treasury_core.movements.ledger import fx_account, world_account


def settlement_account(company_id: int, currency: str) -> Account:
    """The company's balance of captured card payments in ``currency``."""
    return Account(
        f"settlement:{company_id}:{currency}", currency, AccountKind.SETTLEMENT, company_id
    )


def _legs(
    source: str,
    source_currency: str,
    source_amount: int,
    target: str,
    target_currency: str,
    target_amount: int,
    *,
    pending: bool,
    category: PendingCategory = PendingCategory.HOLD,
    deadline: datetime | None = None,
) -> tuple[Leg, ...]:
    """``source`` pays ``target``, through FX liquidity when the currencies differ.

    A zero-amount side (possible for a tiny cross-currency refund share) is left out.
    """
    if source_currency == target_currency:
        pairs = [(source, target, source_currency, source_amount)]
    else:
        pairs = [
            (source, fx_account(source_currency).id, source_currency, source_amount),
            (fx_account(target_currency).id, target, target_currency, target_amount),
        ]
    legs: list[Leg] = []
    for debit, credit, currency, amount in pairs:
        if amount <= 0:
            continue
        if pending:
            legs.append(Reserve(debit, credit, currency, amount, category, deadline))
        else:
            legs.append(Move(debit, credit, currency, amount))
    return tuple(legs)


def card_payment_legs(
    company_id: int,
    billing_currency: str,
    billing_amount: int,
    processing_currency: str,
    processing_amount: int,
    *,
    hold_until: datetime | None,
) -> tuple[Leg, ...]:
    """A card payment: a hold until ``hold_until``, or (``None``) money moved at once."""
    return _legs(
        world_account(billing_currency).id,
        billing_currency,
        billing_amount,
        settlement_account(company_id, processing_currency).id,
        processing_currency,
        processing_amount,
        pending=hold_until is not None,
        deadline=hold_until,
    )


def _out_of_settlement(
    company_id: int,
    processing_currency: str,
    processing_amount: int,
    billing_currency: str,
    billing_amount: int,
    category: PendingCategory,
) -> tuple[Leg, ...]:
    return _legs(
        settlement_account(company_id, processing_currency).id,
        processing_currency,
        processing_amount,
        world_account(billing_currency).id,
        billing_currency,
        billing_amount,
        pending=True,
        category=category,
    )


def refund_legs(
    company_id: int,
    processing_currency: str,
    processing_amount: int,
    billing_currency: str,
    billing_amount: int,
) -> tuple[Leg, ...]:
    """Reserve a refund out of settlement towards the card network (posted once refunded)."""
    return _out_of_settlement(
        company_id,
        processing_currency,
        processing_amount,
        billing_currency,
        billing_amount,
        PendingCategory.OUT,
    )


def chargeback_legs(
    company_id: int,
    processing_currency: str,
    processing_amount: int,
    billing_currency: str,
    billing_amount: int,
) -> tuple[Leg, ...]:
    """Hold a disputed amount out of settlement (posted if lost, released if won)."""
    return _out_of_settlement(
        company_id,
        processing_currency,
        processing_amount,
        billing_currency,
        billing_amount,
        PendingCategory.HOLD,
    )


def payout_legs(company_id: int, currency: str, amount: int, wallet_id: str) -> tuple[Leg, ...]:
    """Reserve settled funds towards the company's wallet (posted when applied)."""
    return (
        Reserve(
            settlement_account(company_id, currency).id,
            wallet_id,
            currency,
            amount,
            PendingCategory.OUT,
        ),
    )
