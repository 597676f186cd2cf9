"""Records and helpers the storage contract's tests build on (exported by
:mod:`treasury_core.testing.contracts.storage`, for an adapter's own tests too)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from treasury_core.ledger import (
    Account,
    AccountKind,
    Journal,
)
from treasury_core.notifications.deliveries import (
    Delivery,
    DeliveryKind,
)
from treasury_core.notifications.events import Event, EventType
from treasury_core.payments.intents import (
    PaymentIntent,
)
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.wallets import Wallet, WalletStatus

#: The business time the contract's records are stamped with.
NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Boom(Exception):
    """Raised by a test's function to make its transaction roll back."""


def world(currency: str = "USD") -> Account:
    """The world account of ``currency``: where deposits come from, unguarded."""
    return Account(f"world:{currency}", currency, AccountKind.WORLD)


def wallet_account(wallet_id: str, currency: str = "USD", company_id: int = 1) -> Account:
    """A guarded wallet account: its available balance never goes below zero."""
    return Account(wallet_id, currency, AccountKind.WALLET, company_id=company_id, guarded=True)


def setup_company(storage: Storage) -> int:
    """Add a company named Acme; its id."""
    return storage.run_sync(lambda uow: uow.companies.add_company("Acme", NOW).id)


def open_accounts(storage: Storage, *accounts: Account) -> None:
    """Open ``accounts`` in one transaction."""

    def run(uow: UnitOfWork) -> None:
        for account in accounts:
            uow.ledger.open_account(account)

    storage.run_sync(run)


def apply(storage: Storage, journal: Journal, now: datetime = NOW) -> None:
    """Apply ``journal`` in a transaction of its own."""
    storage.run_sync(lambda uow: uow.ledger.apply(journal, now))


def account(storage: Storage, account_id: str) -> Account:
    """The account ``account_id`` as stored now; it must exist."""
    found = storage.run_sync(lambda uow: uow.ledger.get_account(account_id), write=False)
    assert found is not None
    return found


def snapshot(storage: Storage) -> tuple[object, ...]:
    """Accounts, postings, pendings and events: equal snapshots mean nothing was written."""

    def read(uow: UnitOfWork) -> tuple[object, ...]:
        return (
            sorted(uow.ledger.all_accounts(), key=lambda a: a.id),
            sorted(uow.ledger.postings(), key=lambda p: p.id),
            sorted(uow.ledger.pendings(), key=lambda p: p.id),
            uow.outbox.list(),
        )

    return storage.run_sync(read, write=False)


def make_wallet(wallet_id: str, company_id: int, created: datetime = NOW) -> Wallet:
    """An active USD wallet (the record, not its ledger account)."""
    return Wallet(
        id=wallet_id,
        company_id=company_id,
        name="Main",
        description=None,
        currency="USD",
        status=WalletStatus.ACTIVE,
        created_at=created,
    )


def make_intent(
    company_id: int,
    lookup_id: str,
    *,
    account_id: int = 1,
    created: datetime = NOW,
    **fields: Any,
) -> PaymentIntent:
    """An unsaved intent of 12.50 USD (id 0: storage assigns it); ``fields`` override the rest."""
    return PaymentIntent(
        id=0,
        company_id=company_id,
        account_id=account_id,
        billing_amount=1250,
        billing_currency="USD",
        payment_intent_lookup_id=lookup_id,
        created_at=created,
        **fields,
    )


def add_intents(storage: Storage, *intents: PaymentIntent) -> list[PaymentIntent]:
    """Add ``intents`` in one transaction; the stored intents, with their ids."""
    return storage.run_sync(lambda uow: [uow.intents.add(i) for i in intents])


def make_event(
    n: int, company_id: int = 1, type_: EventType = EventType.DEPOSIT_COMPLETED
) -> Event:
    """Event number ``n``, created ``n`` minutes after :data:`NOW`."""
    return Event(
        id=f"evt_{n:04d}",
        type=type_,
        company_id=company_id,
        created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=n),
        data={"object": {"id": f"dep_{n}"}},
    )


def make_delivery(
    n: int,
    *,
    event_id: str = "evt_0001",
    due: datetime = NOW,
    company_id: int = 1,
    url: str = "https://example.com/hook",
) -> Delivery:
    """Webhook delivery number ``n`` of ``event_id``, made at :data:`NOW` and due at ``due``."""
    return Delivery(
        id=f"dlv_{n:04d}",
        company_id=company_id,
        event_id=event_id,
        event_type="treasury.deposit.completed",
        kind=DeliveryKind.WEBHOOK,
        endpoint_id="we_1",
        url=url,
        payload=f'{{"id":"{event_id}"}}',
        next_attempt_at=due,
        created_at=NOW,
    )
