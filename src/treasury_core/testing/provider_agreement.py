"""The test bed's invariant: the card provider's charges, captures and refunds equal ours.

After any mix of faults on the way to the provider (answers lost, connections dropped, calls
refused or duplicated), once the client has retried as the interface asks and the resolution
jobs have run, every charge the provider holds for one of our intents must be the one the
intent records, with the amounts we record, and nothing of ours may wait without a reason.
:func:`provider_disagreements` says where that does not hold, for any provider whose
``lookups_supported()`` is true: the sandbox's stand-ins, Stripe behind the fault proxy, or
your own adapter.

It only reads: the provider through :meth:`~treasury_core.ports.card_provider.
CardProviderLookups.recent_charges`, our records through the storage port.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from treasury_core.pagination import MAX_LIMIT
from treasury_core.payments.intents import IntentFilter, IntentStatus, PaymentIntent
from treasury_core.payments.records import Refund, RefundStatus
from treasury_core.ports import CardProvider, Storage, UnitOfWork
from treasury_core.ports.card_provider import (
    CardProviderStatus,
    ProviderCharge,
    answers_lookups,
)
from treasury_core.services.payments.vocabulary import owner_tag


def _intents(storage: Storage, companies: Iterable[int]) -> dict[int, PaymentIntent]:
    def read(uow: UnitOfWork) -> dict[int, PaymentIntent]:
        found: dict[int, PaymentIntent] = {}
        for company in companies:
            after: int | None = None
            while True:
                page = uow.intents.list(company, IntentFilter(), MAX_LIMIT, after)
                found.update((intent.id, intent) for intent in page)
                if len(page) < MAX_LIMIT:
                    break
                after = page[-1].id
        return found

    return storage.run_sync(read, write=False)


def _refunds(storage: Storage, intent: PaymentIntent) -> list[Refund]:
    def read(uow: UnitOfWork) -> list[Refund]:
        found = (uow.records.get(Refund, r, intent.company_id) for r in intent.refund_ids)
        return [refund for refund in found if refund is not None]

    return storage.run_sync(read, write=False)


def _charge_disagreements(
    charge: ProviderCharge, intent: PaymentIntent, refunds: list[Refund]
) -> list[str]:
    where = f"intent {intent.id}, provider charge {charge.reference} ({charge.status.value})"
    if charge.status is CardProviderStatus.AUTHORIZED:
        if (intent.status, intent.provider_reference) != (
            IntentStatus.AUTHORIZED,
            charge.reference,
        ):
            return [f"{where}: a hold the intent ({intent.status.value}) does not record"]
        if charge.amount != intent.billing_amount:
            return [f"{where}: holds {charge.amount}, the intent {intent.billing_amount}"]
        return []
    if charge.status is not CardProviderStatus.CAPTURED:
        return []  # voided, or waiting for 3-D Secure: nothing held
    if (intent.status, intent.provider_reference) != (IntentStatus.PROCESSED, charge.reference):
        return [f"{where}: a capture the intent ({intent.status.value}) does not record"]
    problems: list[str] = []
    if charge.amount_captured != intent.billing_amount:
        problems.append(f"{where}: captured {charge.amount_captured}, ours {intent.billing_amount}")
    refunded = sum(r.amount for r in refunds if r.status is RefundStatus.SUCCEEDED)
    if charge.amount_refunded != refunded:
        problems.append(f"{where}: refunded {charge.amount_refunded}, ours {refunded}")
    return problems


async def provider_disagreements(
    storage: Storage, provider: CardProvider, companies: Iterable[int], since: datetime
) -> list[str]:
    """Every way the provider's charges since ``since`` and the ``companies``' intents differ;
    empty when they agree.

    Checked: each charge naming one of our intents (by an owner whose tag is the intent's)
    holds money only if it is the intent's recorded charge, for its amount, captured and
    refunded as we record; each intent we record as authorized or captured is among the
    provider's charges; no refund of ours is pending without the provider's reference of it
    (an outcome nobody is waiting on). Raises ``TypeError`` for a provider without lookups.
    """
    if not answers_lookups(provider):
        raise TypeError("provider_disagreements needs a provider whose lookups_supported() is on")
    intents = _intents(storage, companies)
    charges = await provider.recent_charges(since)
    problems: list[str] = []
    seen: set[str] = set()
    for charge in charges:
        seen.add(charge.reference)
        owner = charge.owner
        intent = None if owner is None else intents.get(owner.payment_intent_id)
        if owner is None or intent is None or intent.company_id != owner.company_id:
            continue
        if owner.tag != owner_tag(intent):
            continue  # another treasury's, under the same ids
        problems.extend(_charge_disagreements(charge, intent, _refunds(storage, intent)))
    for intent in intents.values():
        if intent.created_at < since:
            continue
        held = intent.status in (IntentStatus.AUTHORIZED, IntentStatus.PROCESSED)
        if held and intent.provider_reference not in seen:
            problems.append(
                f"intent {intent.id} is {intent.status.value} with charge "
                f"{intent.provider_reference}, which the provider does not list"
            )
        for refund in _refunds(storage, intent):
            if refund.status is RefundStatus.PENDING and refund.provider_reference is None:
                problems.append(f"intent {intent.id}: refund {refund.id} pending, nobody asked")
    return problems
