"""The storage contract: the tests every :class:`~treasury_core.ports.Storage` adapter passes.

treasury-core's own backends (:class:`~treasury_core.testing.MemoryStorage`, SQLite and
PostgreSQL through ``treasury_sqlalchemy``) all run exactly these tests. A third-party storage
adapter runs them too by subclassing :class:`StorageContract` in its test suite and providing a
``storage`` fixture: a fresh, migrated, empty storage, closed afterwards::

    import pytest
    from treasury_core.testing.contract import StorageContract

    class TestMyStorage(StorageContract):
        @pytest.fixture
        def storage(self):
            s = MyStorage(...)
            yield s
            s.close()

The fixture may equally live in a ``conftest.py``, and may be parametrized to run the contract
on several backends or configurations (treasury-core's own suite does that).

What the contract covers, through the unit of work's repositories:

- transactions: a function that raises writes nothing; ``run`` (async) and ``run_sync`` both
  commit; concurrent transfers between the same wallets neither deadlock nor lose an update;
- wallets, companies, merchant accounts and API keys: round trips, scoping to the company,
  newest-first lists with an id cursor;
- the ledger: running counters, refused journals changing nothing, two-phase movements
  (reserve, post, void, expire, due pendings), idempotent ``ensure_account``, a journal id
  applied once, postings in id order;
- the outbox and deliveries: events committing with the change, dispatching once, paging,
  purging only finished old events, delivery claims under a lease;
- idempotency records: insert once, replace by token, purge; keys kept exactly (control
  characters included);
- payment intents: increasing ids, company scoping, every field round-tripping, lists and counts
  agreeing with the filter, rollbacks, unique lookup ids;
- the sandbox clock's offset: zero at first, advanced to the microsecond and rolled back with
  its transaction, never by a negative amount, concurrent advances adding up.

Not covered, because it depends on the backend: snapshot isolation of
``transaction(snapshot=True)`` against concurrent writers, and recovery from the backend's own
failures (locks, lost connections). Test those in the adapter's own suite; the helpers here
(``world``, ``wallet_account``, ``setup_company``, ``open_accounts``, ``apply``, ``account``,
``snapshot``, ``make_wallet``, ``make_intent``, ``add_intents``) help write them.

This module imports pytest, so it is for test suites only (the ``dev`` extra, or any project
running pytest); ``import treasury_core.testing`` does not import it until
``treasury_core.testing.StorageContract`` is asked for.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from treasury_core.companies import ApiKey, KeyKind
from treasury_core.errors import InsufficientFunds, LedgerRejected
from treasury_core.events import Event, EventHead, EventType
from treasury_core.idempotency import (
    MAX_KEY_LENGTH,
    IdempotencyRecord,
    IdempotencyState,
    StoredResponse,
    scoped_key,
)
from treasury_core.ledger import (
    Account,
    AccountKind,
    ExpirePending,
    Journal,
    Move,
    PendingCategory,
    PendingStatus,
    PostPending,
    Reserve,
    VoidPending,
)
from treasury_core.notifications.deliveries import (
    Delivery,
    DeliveryAttempt,
    DeliveryKind,
    DeliveryStatus,
)
from treasury_core.notifications.status import (
    DeliveryBacklog,
    FailingDestination,
    OutboxBacklog,
)
from treasury_core.payments.intents import (
    AUTHORIZATION_HOLD,
    CancellationReason,
    CaptureMethod,
    IntentFilter,
    IntentStatus,
    PaymentIntent,
    PaymentType,
)
from treasury_core.payments.records import (
    Refund,
    Transaction,
    TransactionStatus,
    TransactionType,
)
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.testing.contract_history import WalletHistoryContract
from treasury_core.testing.hot_accounts_contract import HotAccountContract
from treasury_core.testing.metadata_contract import MetadataContract
from treasury_core.wallets import Wallet, WalletStatus

__all__ = [
    "NOW",
    "Boom",
    "StorageContract",
    "account",
    "add_intents",
    "apply",
    "make_intent",
    "make_wallet",
    "open_accounts",
    "setup_company",
    "snapshot",
    "wallet_account",
    "world",
]

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


def _event(n: int, company_id: int = 1, type_: EventType = EventType.DEPOSIT_COMPLETED) -> Event:
    """Event number ``n``, created ``n`` minutes after :data:`NOW`."""
    return Event(
        id=f"evt_{n:04d}",
        type=type_,
        company_id=company_id,
        created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=n),
        data={"object": {"id": f"dep_{n}"}},
    )


def _delivery(
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


class StorageContract(WalletHistoryContract, MetadataContract, HotAccountContract):
    """The storage contract as pytest tests; subclass it to run them on your storage.

    Each ``test_*`` method takes a ``storage`` fixture that the test suite provides: a fresh,
    migrated, empty :class:`~treasury_core.ports.Storage` per test, closed afterwards. Define it
    in the subclass or in a ``conftest.py``; it may be parametrized.

    The class name deliberately does not start with ``Test``: pytest collects only ``Test*``
    classes, so importing this class into a test module does not run the contract a second
    time, without a storage. Name your subclass ``Test...``. For the same reason this class
    defines no ``storage`` fixture of its own: one here would shadow a ``storage`` fixture
    defined in a ``conftest.py``. Without any, pytest reports ``fixture 'storage' not found``.

    Some tests use threads and ``asyncio.run``; none needs an async test plugin.
    """

    def test_wallets_round_trip_and_are_scoped_to_their_company(self, storage: Storage) -> None:
        """A wallet reads back equal, with an aware time, and only for its own company."""
        company = setup_company(storage)
        other = setup_company(storage)
        assert other > company
        storage.run_sync(lambda uow: uow.wallets.add(make_wallet("wal_1", company)))
        got = storage.run_sync(lambda uow: uow.wallets.get(company, "wal_1"), write=False)
        assert got == make_wallet("wal_1", company)
        assert got is not None
        assert got.created_at.tzinfo is not None
        assert storage.run_sync(lambda uow: uow.wallets.get(other, "wal_1"), write=False) is None

    def test_lists_are_newest_first_with_a_cursor(self, storage: Storage) -> None:
        """A company's wallets and wallet accounts list by id, highest first, after a cursor."""
        company = setup_company(storage)

        def add(uow: UnitOfWork) -> None:
            for i in range(5):
                uow.wallets.add(make_wallet(f"wal_{i}", company))
                uow.ledger.open_account(wallet_account(f"wal_{i}", company_id=company))

        storage.run_sync(add)
        first = storage.run_sync(lambda uow: uow.wallets.list(company, 2, None), write=False)
        assert [w.id for w in first] == ["wal_4", "wal_3"]
        rest = storage.run_sync(lambda uow: uow.wallets.list(company, 10, "wal_3"), write=False)
        assert [w.id for w in rest] == ["wal_2", "wal_1", "wal_0"]
        balances = storage.run_sync(
            lambda uow: uow.ledger.wallet_accounts(company, 3, "wal_4"), write=False
        )
        assert [a.id for a in balances] == ["wal_3", "wal_2", "wal_1"]
        assert (
            storage.run_sync(lambda uow: uow.wallets.list(company + 99, 10, None), write=False)
            == []
        )

    def test_a_failed_function_writes_nothing(self, storage: Storage) -> None:
        """A function that raises rolls back every write of its transaction."""
        company = setup_company(storage)
        before = snapshot(storage)

        def fail(uow: UnitOfWork) -> None:
            uow.wallets.add(make_wallet("wal_x", company))
            uow.ledger.open_account(wallet_account("wal_x", company_id=company))
            uow.outbox.add(
                Event(
                    id="evt_1",
                    type=EventType.DEPOSIT_COMPLETED,
                    company_id=company,
                    created_at=NOW,
                    data={"object": {}},
                )
            )
            raise Boom

        with pytest.raises(Boom):
            storage.run_sync(fail)
        assert snapshot(storage) == before
        assert storage.run_sync(lambda uow: uow.wallets.get(company, "wal_x"), write=False) is None

    def test_movements_update_running_counters(self, storage: Storage) -> None:
        """Moves update balances and the posted debit and credit counters."""
        open_accounts(storage, world(), wallet_account("wal_a"), wallet_account("wal_b"))
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 1000),)))
        apply(storage, Journal("j2", (Move("wal_a", "wal_b", "USD", 300),)))
        a, b, w = (
            account(storage, "wal_a"),
            account(storage, "wal_b"),
            account(storage, "world:USD"),
        )
        assert (a.balance, b.balance, w.balance) == (700, 300, -1000)
        assert a.debits_posted == 300
        assert a.credits_posted == 1000

    def test_a_refused_journal_changes_nothing(self, storage: Storage) -> None:
        """A journal refused part-way (insufficient funds) leaves no trace."""
        open_accounts(storage, world(), wallet_account("wal_a"), wallet_account("wal_b"))
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 100),)))
        before = snapshot(storage)
        with pytest.raises(InsufficientFunds):
            apply(
                storage,
                Journal(
                    "j2", (Move("wal_a", "wal_b", "USD", 60), Move("wal_a", "wal_b", "USD", 41))
                ),
            )
        assert snapshot(storage) == before

    def test_two_phase_movements(self, storage: Storage) -> None:
        """Reserve, post (partially), expire and void pendings; the counters follow."""
        open_accounts(storage, world(), wallet_account("wal_a"), wallet_account("wal_b"))
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 1000),)))
        deadline = NOW + timedelta(days=7)
        apply(
            storage,
            Journal(
                "j2",
                (
                    Reserve("wal_a", "wal_b", "USD", 400, PendingCategory.OUT),
                    Reserve("wal_a", "world:USD", "USD", 100, PendingCategory.HOLD, deadline),
                ),
            ),
        )
        a = account(storage, "wal_a")
        assert (a.balance, a.pending_out, a.pending_holds, a.available_balance) == (
            1000,
            400,
            100,
            500,
        )
        assert account(storage, "wal_b").pending_in == 400
        with pytest.raises(InsufficientFunds):
            apply(storage, Journal("j3", (Move("wal_a", "wal_b", "USD", 501),)))

        apply(storage, Journal("j3", (PostPending("j2.0", 250),)))
        a, b = account(storage, "wal_a"), account(storage, "wal_b")
        assert (a.balance, a.pending_out, b.balance, b.pending_in) == (750, 0, 250, 0)

        due = storage.run_sync(lambda uow: uow.ledger.due_pendings(deadline, 10), write=False)
        assert [p.id for p in due] == ["j2.1"]
        assert storage.run_sync(lambda uow: uow.ledger.due_pendings(NOW, 10), write=False) == []
        with pytest.raises(LedgerRejected):
            apply(storage, Journal("j4", (PostPending("j2.1"),)), deadline)
        apply(storage, Journal("j4", (ExpirePending("j2.1"),)), deadline)
        assert account(storage, "wal_a").available_balance == 750
        pending = storage.run_sync(lambda uow: uow.ledger.get_pending("j2.1"), write=False)
        assert pending is not None
        assert pending.status is PendingStatus.EXPIRED
        assert pending.resolved_by == "j4.0"
        # Expiring twice is refused and changes nothing.
        before = snapshot(storage)
        with pytest.raises(LedgerRejected):
            apply(storage, Journal("j5", (ExpirePending("j2.1"),)), deadline)
        with pytest.raises(LedgerRejected):
            apply(storage, Journal("j5", (VoidPending("j2.0"),)), deadline)
        assert snapshot(storage) == before

    def test_ensure_account_is_idempotent(self, storage: Storage) -> None:
        """``ensure_account`` of an existing account keeps its balance."""
        open_accounts(storage, wallet_account("wal_a"))
        storage.run_sync(lambda uow: uow.ledger.ensure_account(world()))
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 5),)))
        storage.run_sync(lambda uow: uow.ledger.ensure_account(world()))
        assert account(storage, "world:USD").balance == -5

    def test_companies_and_keys(self, storage: Storage) -> None:
        """Companies, merchant accounts and API keys: add, find by hash, revoke once."""
        company = setup_company(storage)
        merchant = storage.run_sync(
            lambda uow: uow.companies.add_merchant_account(company, "Shop", NOW)
        )
        assert storage.run_sync(
            lambda uow: uow.companies.merchant_accounts(company), write=False
        ) == [merchant]
        key = ApiKey(
            id="key_1",
            company_id=company,
            kind=KeyKind.SECRET,
            key_hash="ab" * 32,
            prefix="sk_abcd",
            created_at=NOW,
        )
        storage.run_sync(lambda uow: uow.companies.add_api_key(key))
        assert (
            storage.run_sync(lambda uow: uow.companies.api_key_by_hash("ab" * 32), write=False)
            == key
        )
        assert (
            storage.run_sync(lambda uow: uow.companies.api_key_by_hash("cd" * 32), write=False)
            is None
        )
        assert storage.run_sync(lambda uow: uow.companies.revoke_api_key("key_1", NOW))
        assert not storage.run_sync(lambda uow: uow.companies.revoke_api_key("key_1", NOW))
        revoked = storage.run_sync(
            lambda uow: uow.companies.api_key_by_hash("ab" * 32), write=False
        )
        assert revoked is not None
        assert revoked.revoked_at == NOW
        company_row = storage.run_sync(lambda uow: uow.companies.get_company(company), write=False)
        assert company_row is not None
        assert company_row.name == "Acme"

    def test_companies_and_their_keys_are_listed(self, storage: Storage) -> None:
        """Every company, oldest first; a company's keys, revoked ones too, oldest first."""
        first = setup_company(storage)
        second = storage.run_sync(lambda uow: uow.companies.add_company("Beta", NOW)).id
        listed = storage.run_sync(lambda uow: uow.companies.list_companies(), write=False)
        assert [(c.id, c.name) for c in listed] == [(first, "Acme"), (second, "Beta")]
        keys = [
            ApiKey(
                id=f"key_{n}",
                company_id=first,
                kind=kind,
                key_hash=f"{n:064x}",
                prefix=kind.prefix + "abcd",
                created_at=NOW,
            )
            for n, kind in enumerate([KeyKind.SECRET, KeyKind.PUBLISHABLE, KeyKind.SECRET])
        ]
        for key in keys:

            def add(uow: UnitOfWork, key: ApiKey = key) -> None:
                uow.companies.add_api_key(key)

            storage.run_sync(add)
        assert storage.run_sync(lambda uow: uow.companies.revoke_api_key("key_0", NOW))
        found = storage.run_sync(lambda uow: uow.companies.api_keys(first), write=False)
        assert [k.id for k in found] == ["key_0", "key_1", "key_2"]
        assert found[0].revoked_at == NOW
        assert [k.kind for k in found] == [KeyKind.SECRET, KeyKind.PUBLISHABLE, KeyKind.SECRET]
        assert storage.run_sync(lambda uow: uow.companies.api_keys(second), write=False) == []

    def test_outbox_events_commit_with_the_change(self, storage: Storage) -> None:
        """Events added in a transaction are stored, listed by company."""
        company = setup_company(storage)
        event = Event(
            id="evt_1",
            type=EventType.TRANSFER_COMPLETED,
            company_id=company,
            created_at=NOW,
            data={"object": {"id": "trf_1", "from_amount": 5}},
        )
        storage.run_sync(lambda uow: uow.outbox.add(event))
        assert storage.run_sync(lambda uow: uow.outbox.list(company), write=False) == [event]
        assert storage.run_sync(lambda uow: uow.outbox.list(company + 1), write=False) == []

    def test_idempotency_records(self, storage: Storage) -> None:
        """Idempotency records insert once, replace only with their token, purge."""
        record = IdempotencyRecord(
            company_id=1,
            key="k1",
            fingerprint="f" * 64,
            state=IdempotencyState.IN_FLIGHT,
            token="t1",  # noqa: S106 - an idempotency lease token, not a secret
            created_at=NOW,
            lease_until=NOW + timedelta(seconds=60),
        )
        assert storage.run_sync(lambda uow: uow.idempotency.insert(record))
        assert not storage.run_sync(lambda uow: uow.idempotency.insert(record))
        done = replace(
            record,
            state=IdempotencyState.COMPLETED,
            lease_until=NOW,
            response=StoredResponse(200, b'{"ok":true}'),
        )
        assert not storage.run_sync(lambda uow: uow.idempotency.replace(done, "wrong-token"))
        assert storage.run_sync(lambda uow: uow.idempotency.replace(done, "t1"))
        assert storage.run_sync(lambda uow: uow.idempotency.get(1, "k1"), write=False) == done
        assert storage.run_sync(lambda uow: uow.idempotency.get(2, "k1"), write=False) is None
        assert not storage.run_sync(lambda uow: uow.idempotency.delete(1, "k1", "nope"))
        assert storage.run_sync(lambda uow: uow.idempotency.purge(NOW + timedelta(seconds=1))) == 1
        assert storage.run_sync(lambda uow: uow.idempotency.get(1, "k1"), write=False) is None

    def test_idempotency_keys_are_kept_exactly(self, storage: Storage) -> None:
        """A key is stored and found as given, control characters included: a publishable key's
        records live under a name that starts with one (:func:`scoped_key`), apart from the
        printable names a secret key's records have."""
        names = ["k1", scoped_key("k1", KeyKind.PUBLISHABLE), "x" * MAX_KEY_LENGTH]

        def insert_all(uow: UnitOfWork) -> list[bool]:
            return [
                uow.idempotency.insert(
                    IdempotencyRecord(
                        company_id=1,
                        key=name,
                        fingerprint="f" * 64,
                        state=IdempotencyState.IN_FLIGHT,
                        token=f"t-{len(name)}",
                        created_at=NOW,
                        lease_until=NOW + timedelta(seconds=60),
                    )
                )
                for name in names
            ]

        def read_all(uow: UnitOfWork) -> list[IdempotencyRecord | None]:
            return [uow.idempotency.get(1, name) for name in names]

        assert storage.run_sync(insert_all) == [True, True, True]
        found = storage.run_sync(read_all, write=False)
        assert [(r.key, r.token) if r else None for r in found] == [
            (name, f"t-{len(name)}") for name in names
        ]

    def test_async_run_does_not_block_and_commits(self, storage: Storage) -> None:
        """Concurrent ``run`` calls from one event loop all commit."""
        company = setup_company(storage)

        async def main() -> list[int]:
            async def one(i: int) -> int:
                def add(uow: UnitOfWork) -> int:
                    uow.wallets.add(make_wallet(f"wal_{i:03d}", company))
                    return i

                return await storage.run(add)

            return await asyncio.gather(*(one(i) for i in range(20)))

        assert sorted(asyncio.run(main())) == list(range(20))
        assert (
            len(storage.run_sync(lambda uow: uow.wallets.list(company, 100, None), write=False))
            == 20
        )

    def test_concurrent_opposite_transfers_keep_the_total(self, storage: Storage) -> None:
        """Threads move money both ways between the same wallets: no deadlock, no lost update."""
        ids = [f"wal_{i}" for i in range(4)]
        open_accounts(storage, world(), *(wallet_account(i) for i in ids))
        for n, wallet_id in enumerate(ids):
            apply(storage, Journal(f"fund{n}", (Move("world:USD", wallet_id, "USD", 1000),)))
        errors: list[BaseException] = []
        refused = [0]

        def worker(seed: int) -> None:
            for step in range(40):
                source, target = ids[(seed + step) % 4], ids[(seed + step * 3 + 1) % 4]
                if source == target:
                    continue
                try:
                    apply(storage, Journal(f"t{seed}-{step}", (Move(source, target, "USD", 70),)))
                except InsufficientFunds:
                    refused[0] += 1
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

        threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        balances = [account(storage, i) for i in ids]
        assert sum(a.balance for a in balances) == 4000
        assert all(a.available_balance >= 0 for a in balances)

    def test_postings_come_back_in_id_order(self, storage: Storage) -> None:
        """Postings list in id order, whatever the order of writing."""
        open_accounts(storage, world(), wallet_account("wal_a"))
        for journal_id in ("b", "a", "c"):
            apply(storage, Journal(journal_id, (Move("world:USD", "wal_a", "USD", 1),)))
        ids = storage.run_sync(lambda uow: [p.id for p in uow.ledger.postings()], write=False)
        assert ids == ["a.0", "b.0", "c.0"]

    def test_a_journal_id_applies_once(self, storage: Storage) -> None:
        """Applying a journal id again is refused and changes nothing."""
        open_accounts(storage, world(), wallet_account("wal_a"))
        journal = Journal("j1", (Move("world:USD", "wal_a", "USD", 100),))
        apply(storage, journal)
        before = snapshot(storage)
        with pytest.raises(LedgerRejected) as caught:
            apply(storage, journal)
        assert caught.value.code == "journal_duplicate"
        assert snapshot(storage) == before

    def test_intent_ids_increase_and_reads_are_scoped_to_the_company(
        self, storage: Storage
    ) -> None:
        """Intent ids increase; reads by id or lookup id honour the company scope."""
        company = setup_company(storage)
        other = setup_company(storage)
        first, second = add_intents(
            storage, make_intent(company, "pi_a"), make_intent(other, "pi_b")
        )
        (third,) = add_intents(storage, make_intent(company, "pi_c"))
        assert 0 < first.id < second.id < third.id
        assert first == make_intent(company, "pi_a").model_copy(update={"id": first.id})

        def read(uow: UnitOfWork) -> tuple[object, ...]:
            return (
                uow.intents.get(first.id, company),
                uow.intents.get(first.id, None),
                uow.intents.get(first.id, other),
                uow.intents.get(third.id + 100, None),
                uow.intents.by_lookup_id("pi_a", company),
                uow.intents.by_lookup_id("pi_a", None),
                uow.intents.by_lookup_id("pi_a", other),
                uow.intents.by_lookup_id("pi_missing", None),
                uow.intents.get(second.id, other, for_update=True),
                uow.intents.by_lookup_id("pi_b", other, for_update=True),
            )

        assert storage.run_sync(read, write=False) == (
            first,
            first,
            None,
            None,
            first,
            first,
            None,
            None,
            second,
            second,
        )
        got = storage.run_sync(lambda uow: uow.intents.get(first.id, company), write=False)
        assert got is not None
        assert got.created_at.tzinfo is not None

    def test_an_intent_update_round_trips_every_field(self, storage: Storage) -> None:
        """Every field of an updated intent reads back equal and of its type."""
        company = setup_company(storage)
        (stored,) = add_intents(
            storage,
            make_intent(company, "pi_m", capture_method=CaptureMethod.MANUAL, account_id=7),
        )
        authorized = NOW + timedelta(minutes=1, microseconds=123456)
        changed = stored.model_copy(
            update={
                "status": IntentStatus.CANCELLED,
                "account_id": 8,
                "processing_amount": 1100,
                "processing_currency": "EUR",
                "payment_type": PaymentType.MOTO,
                "merchant_reference": "order-42",
                "checkin_date": date(2026, 3, 4),
                "card_token": "tok_1",
                "callback_url": "https://example.test/cb",
                "customer": "cus_1",
                "customer_email": "a@example.test",
                "authorized_at": authorized,
                "authorization_expires_at": authorized + AUTHORIZATION_HOLD,
                "cancellation_reason": CancellationReason.VOIDED,
                "provider_reference": "prov_1",
                "hold_pending_ids": ("pnd_1", "pnd_2"),
                "latest_transaction_id": "txn_9",
                "captured_at": None,
            }
        )
        changed = PaymentIntent.model_validate(changed.model_dump())  # the rules still hold
        storage.run_sync(lambda uow: uow.intents.update(changed))
        got = storage.run_sync(lambda uow: uow.intents.get(stored.id, company), write=False)
        assert got == changed
        assert got is not None
        assert isinstance(got.hold_pending_ids, tuple)
        assert isinstance(got.status, IntentStatus)
        assert isinstance(got.checkin_date, date)

        processed = make_intent(
            company,
            "pi_p",
            status=IntentStatus.PROCESSED,
            amount_refunded=250,
            processing_refunded=250,
            captured_at=NOW + timedelta(seconds=5),
        )
        (stored_p,) = add_intents(storage, processed)
        assert storage.run_sync(lambda uow: uow.intents.get(stored_p.id, None)) == stored_p
        assert stored_p.model_copy(update={"id": 0}) == processed

        missing = changed.model_copy(
            update={"id": stored_p.id + 100, "payment_intent_lookup_id": "x"}
        )
        with pytest.raises(LookupError):
            storage.run_sync(lambda uow: uow.intents.update(missing))

    def test_intent_lists_and_counts_agree_with_the_filter(self, storage: Storage) -> None:
        """Intent pages, lists and counts agree with each filter, newest first."""
        company = setup_company(storage)
        other = setup_company(storage)
        statuses = [IntentStatus.INITIALIZED, IntentStatus.PROCESSED]
        intents = add_intents(
            storage,
            *(
                make_intent(
                    company,
                    f"pi_{i}",
                    account_id=1 + i % 3,
                    created=NOW + timedelta(hours=i // 2),
                    status=statuses[i % 2],
                )
                for i in range(10)
            ),
            make_intent(other, "pi_other"),
        )
        mine = [i for i in intents if i.company_id == company]
        filters = [
            IntentFilter(),
            IntentFilter(status=IntentStatus.PROCESSED),
            IntentFilter(status=IntentStatus.CANCELLED),
            IntentFilter(account_id=2),
            IntentFilter(created_gte=NOW + timedelta(hours=1)),  # inclusive: i = 2, 3 match
            IntentFilter(created_lt=NOW + timedelta(hours=1)),  # exclusive: i = 2, 3 do not
            IntentFilter(created_gte=NOW + timedelta(hours=1), created_lt=NOW + timedelta(hours=3)),
            IntentFilter(
                status=IntentStatus.INITIALIZED, account_id=1, created_lt=NOW + timedelta(hours=4)
            ),
        ]
        for f in filters:
            expected = sorted((i for i in mine if f.matches(i)), key=lambda i: i.id, reverse=True)

            def read(
                uow: UnitOfWork, f: IntentFilter = f
            ) -> tuple[list[list[PaymentIntent]], list[PaymentIntent], int]:
                pages = [uow.intents.list(company, f, 3, None)]
                while len(pages[-1]) == 3:
                    pages.append(uow.intents.list(company, f, 3, pages[-1][-1].id))
                return pages, uow.intents.list(company, f, 100, None), uow.intents.count(company, f)

            pages, everything, count = storage.run_sync(read, write=False)
            assert [i for page in pages for i in page] == expected == everything, f
            assert count == len(expected), f

        assert len([i for i in mine if filters[4].matches(i)]) == 8
        assert len([i for i in mine if filters[5].matches(i)]) == 2
        assert storage.run_sync(lambda uow: uow.intents.count(other + 1, IntentFilter())) == 0
        cut = storage.run_sync(lambda uow: uow.intents.list(company, IntentFilter(), 2, mine[5].id))
        assert cut == [mine[4], mine[3]]

    def test_a_rolled_back_intent_leaves_nothing_and_ids_keep_increasing(
        self, storage: Storage
    ) -> None:
        """A rolled-back intent leaves nothing; later ids are still higher."""
        company = setup_company(storage)
        (before,) = add_intents(storage, make_intent(company, "pi_1"))
        taken: list[PaymentIntent] = []

        def fail(uow: UnitOfWork) -> None:
            taken.append(uow.intents.add(make_intent(company, "pi_2")))
            uow.intents.update(before.model_copy(update={"status": IntentStatus.PROCESSED}))
            raise Boom

        with pytest.raises(Boom):
            storage.run_sync(fail)

        def read(uow: UnitOfWork) -> tuple[object, ...]:
            return (
                uow.intents.get(taken[0].id, None),
                uow.intents.by_lookup_id("pi_2", None),
                uow.intents.get(before.id, None),
                uow.intents.count(company, IntentFilter()),
            )

        assert storage.run_sync(read, write=False) == (None, None, before, 1)
        (after,) = add_intents(storage, make_intent(company, "pi_2"))
        assert after.id > before.id

    def test_a_duplicate_lookup_id_is_refused(self, storage: Storage) -> None:
        """A lookup id is unique across companies, on add and on update."""
        company = setup_company(storage)
        (first,) = add_intents(storage, make_intent(company, "pi_dup"))
        with pytest.raises(ValueError, match="pi_dup"):
            add_intents(storage, make_intent(company, "pi_other"), make_intent(company, "pi_dup"))
        with pytest.raises(ValueError, match="pi_dup"):
            add_intents(storage, make_intent(company + 1, "pi_dup"))
        (second,) = add_intents(storage, make_intent(company, "pi_two"))
        with pytest.raises(ValueError, match="pi_dup"):
            storage.run_sync(
                lambda uow: uow.intents.update(
                    second.model_copy(update={"payment_intent_lookup_id": "pi_dup"})
                )
            )

        def read(uow: UnitOfWork) -> tuple[object, ...]:
            return (
                uow.intents.list(company, IntentFilter(), 10, None),
                uow.intents.by_lookup_id("pi_other", None),
            )

        assert storage.run_sync(read, write=False) == ([second, first], None)

    def test_records_are_found_by_their_lookup_key(self, storage: Storage) -> None:
        """A payment attempt is found by its provider reference (what a provider's event
        names), across companies, while it keeps one; a reference too long to index is not."""
        company = setup_company(storage)
        now = datetime(2026, 1, 1, tzinfo=UTC)
        attempt = Transaction(
            id="txn_contract",
            company_id=company,
            payment_intent_id=1,
            type=TransactionType.SALE,
            status=TransactionStatus.COMPLETED,
            amount=100,
            currency="USD",
            card_brand=None,
            card_last4=None,
            failure_reason=None,
            failure_message=None,
            created_at=now,
            provider_reference="pi_contract",
        )
        long_ref = attempt.model_copy(
            update={"id": "txn_long", "provider_reference": "pi_" + "x" * 100}
        )

        def add(uow: UnitOfWork) -> None:
            uow.records.add(attempt)
            uow.records.add(long_ref)

        storage.run_sync(add)

        def find(reference: str) -> Transaction | None:
            return storage.run_sync(
                lambda uow: uow.records.find(Transaction, reference), write=False
            )

        assert find("pi_contract") == attempt
        assert find("pi_" + "x" * 100) is None
        assert find("pi_" + "x" * 61) is None
        # Another kind with the same key is not confused with it.
        assert (
            storage.run_sync(lambda uow: uow.records.find(Refund, "pi_contract"), write=False)
            is None
        )
        storage.run_sync(lambda uow: uow.records.update(attempt.failed("declined", "No")))
        assert find("pi_contract") is None

    def test_events_are_dispatched_once_and_paged_newest_first(self, storage: Storage) -> None:
        """Undispatched events (and their heads) come oldest first; whole events come by id;
        pages filter and come newest first."""
        at = datetime(2026, 1, 2, tzinfo=UTC)

        def write(uow: UnitOfWork) -> None:
            for n in range(5):
                uow.outbox.add(_event(n, company_id=1 if n < 4 else 2))
            uow.outbox.add(_event(9, type_=EventType.WITHDRAWAL_FAILED))

        storage.run_sync(write)
        first = storage.run_sync(lambda uow: uow.outbox.undispatched(3))
        assert [e.id for e in first] == ["evt_0000", "evt_0001", "evt_0002"]
        storage.run_sync(lambda uow: uow.outbox.mark_dispatched([e.id for e in first], at))
        rest = storage.run_sync(lambda uow: uow.outbox.undispatched(10))
        assert [e.id for e in rest] == ["evt_0003", "evt_0004", "evt_0009"]

        heads = storage.run_sync(lambda uow: uow.outbox.undispatched_heads(10))
        assert heads == [EventHead(e.id, e.company_id, e.type) for e in rest]
        assert storage.run_sync(lambda uow: uow.outbox.undispatched_heads(1)) == heads[:1]
        # Whole events by id, oldest first whatever the order asked; unknown ids left out.
        wanted = ["evt_0009", "evt_nope", "evt_0001"]
        whole = storage.run_sync(lambda uow: uow.outbox.get_many(wanted), write=False)
        assert whole == [_event(1), _event(9, type_=EventType.WITHDRAWAL_FAILED)]
        assert storage.run_sync(lambda uow: uow.outbox.get_many([]), write=False) == []

        page = storage.run_sync(
            lambda uow: uow.outbox.page(
                1, type_=None, created_gte=None, limit=2, starting_after=None
            ),
            write=False,
        )
        assert [e.id for e in page] == ["evt_0009", "evt_0003"]
        page = storage.run_sync(
            lambda uow: uow.outbox.page(
                1, type_=None, created_gte=None, limit=10, starting_after="evt_0003"
            ),
            write=False,
        )
        assert [e.id for e in page] == ["evt_0002", "evt_0001", "evt_0000"]
        typed = storage.run_sync(
            lambda uow: uow.outbox.page(
                1,
                type_="treasury.withdrawal.failed",
                created_gte=None,
                limit=10,
                starting_after=None,
            ),
            write=False,
        )
        assert [e.id for e in typed] == ["evt_0009"]
        recent = storage.run_sync(
            lambda uow: uow.outbox.page(
                1,
                type_=None,
                created_gte=datetime(2026, 1, 1, 0, 2, tzinfo=UTC),
                limit=10,
                starting_after=None,
            ),
            write=False,
        )
        assert [e.id for e in recent] == ["evt_0009", "evt_0003", "evt_0002"]
        assert storage.run_sync(lambda uow: uow.outbox.get("evt_0004", 1), write=False) is None
        found = storage.run_sync(lambda uow: uow.outbox.get("evt_0004", 2), write=False)
        assert found is not None
        assert found.data == {"object": {"id": "dep_4"}}

    def test_deliveries_are_claimed_under_a_lease(self, storage: Storage) -> None:
        """Due deliveries are claimed under a lease; held ones are not claimed until it ends."""
        t0 = NOW

        def write(uow: UnitOfWork) -> None:
            uow.deliveries.add(_delivery(1, due=t0))
            uow.deliveries.add(_delivery(2, due=t0 + timedelta(seconds=1)))
            uow.deliveries.add(_delivery(3, due=t0 + timedelta(hours=1)))

        storage.run_sync(write)
        wall = datetime(2026, 6, 1, tzinfo=UTC)
        lease = wall + timedelta(minutes=1)
        claimed = storage.run_sync(
            lambda uow: uow.deliveries.claim_due(t0 + timedelta(seconds=1), wall, lease, 10)
        )
        assert [d.id for d in claimed] == ["dlv_0001", "dlv_0002"]
        assert all(d.lease_until == lease for d in claimed)
        # Held: nobody else gets them until the lease runs out (wall time).
        again = storage.run_sync(
            lambda uow: uow.deliveries.claim_due(t0 + timedelta(seconds=1), wall, lease, 10)
        )
        assert again == []
        expired = storage.run_sync(
            lambda uow: uow.deliveries.claim_due(
                t0 + timedelta(seconds=1), lease, lease + timedelta(minutes=1), 1
            )
        )
        assert [d.id for d in expired] == ["dlv_0001"]

        attempt = DeliveryAttempt(attempted_at=wall, status_code=200, duration_ms=12, error=None)
        done = expired[0].attempted(attempt, succeeded=True, next_at=None)
        storage.run_sync(lambda uow: uow.deliveries.update(done))
        stored = storage.run_sync(lambda uow: uow.deliveries.get("dlv_0001"), write=False)
        assert stored is not None
        assert stored.status is DeliveryStatus.SUCCEEDED
        assert stored.attempts == (attempt,)
        assert stored.lease_until is None
        later = storage.run_sync(
            lambda uow: uow.deliveries.claim_due(
                t0 + timedelta(days=1), wall + timedelta(days=1), wall + timedelta(days=2), 10
            )
        )
        assert [d.id for d in later] == ["dlv_0002", "dlv_0003"]
        listed = storage.run_sync(lambda uow: uow.deliveries.for_event("evt_0001"), write=False)
        assert [d.id for d in listed] == ["dlv_0001", "dlv_0002", "dlv_0003"]

    def test_a_batch_is_claimed_round_robin_within_the_room_left(self, storage: Storage) -> None:
        """claim_batch: a flooding company or destination does not fill the batch, a
        destination without room is left out, and the rest is as claim_due (due, unleased)."""
        t0 = NOW
        flood, quiet, dead = "https://a.example/h", "https://b.example/h", "http://c.example:8080/h"

        def write(uow: UnitOfWork) -> None:
            for n in range(1, 41):  # company 1 floods, oldest first
                uow.deliveries.add(_delivery(n, due=t0 + timedelta(milliseconds=n), url=flood))
            for n in range(41, 51):  # a dead receiver of company 1, as old
                uow.deliveries.add(_delivery(n, due=t0, url=dead))
            uow.deliveries.add(
                _delivery(51, due=t0 + timedelta(seconds=1), company_id=2, url=quiet)
            )
            uow.deliveries.add(_delivery(52, due=t0 + timedelta(hours=1), company_id=2, url=quiet))

        storage.run_sync(write)
        wall = datetime(2026, 6, 1, tzinfo=UTC)
        lease = wall + timedelta(minutes=1)
        now = t0 + timedelta(seconds=1)

        def claim(limit: int, room: dict[str, int]) -> list[Delivery]:
            return storage.run_sync(
                lambda uow: uow.deliveries.claim_batch(
                    now, wall, lease, limit, per_destination=5, room=room
                )
            )

        # The dead receiver has no room: none of its rows, though they are the oldest.
        first = claim(4, {"http://c.example:8080": 0, "https://a.example:443": 2})
        # Round robin: company 2's only due delivery is in the first batch of four, beside
        # the flood's oldest; the flood gets no more than its room.
        assert sorted(d.id for d in first) == ["dlv_0001", "dlv_0002", "dlv_0051"]
        assert all(d.lease_until == lease for d in first)
        held = storage.run_sync(lambda uow: uow.deliveries.for_event("evt_0001"), write=False)
        assert {d.id for d in held if d.lease_until == lease} == {d.id for d in first}
        second = claim(20, {})
        # At most per_destination (5) of one destination, held ones (leased) left out.
        by_url = Counter(d.url for d in second)
        assert by_url == {flood: 5, dead: 5}
        assert not {d.id for d in first} & {d.id for d in second}
        assert [d.id for d in second if d.url == flood] == [f"dlv_{n:04d}" for n in range(3, 8)]

    def test_a_batch_is_recorded_only_where_its_claim_still_holds(self, storage: Storage) -> None:
        """record_attempts writes the deliveries still as their claim left them, and hands
        back, unwritten, those taken over since (another lease), noted since (one more
        attempt) or finished since; one no longer stored is skipped."""
        t0 = NOW

        def write(uow: UnitOfWork) -> None:
            for n in (1, 2, 3, 4):
                uow.deliveries.add(_delivery(n, due=t0))

        storage.run_sync(write)
        wall = datetime(2026, 6, 1, tzinfo=UTC)
        lease = wall + timedelta(minutes=1)
        claimed = storage.run_sync(lambda uow: uow.deliveries.claim_due(t0, wall, lease, 10))
        assert [d.id for d in claimed] == ["dlv_0001", "dlv_0002", "dlv_0003", "dlv_0004"]
        ok = DeliveryAttempt(attempted_at=wall, status_code=200, duration_ms=3, error=None)
        late = DeliveryAttempt(attempted_at=wall, status_code=None, duration_ms=9, error="late")
        # dlv_0002: our lease ran out and another worker claimed it; dlv_0003: a late attempt
        # noted under our lease; dlv_0004: finished by someone else.
        later = lease + timedelta(minutes=1)
        storage.run_sync(
            lambda uow: uow.deliveries.update(claimed[1].model_copy(update={"lease_until": later}))
        )
        storage.run_sync(lambda uow: uow.deliveries.update(claimed[2].noted(late)))
        storage.run_sync(
            lambda uow: uow.deliveries.update(
                claimed[3].attempted(ok, succeeded=True, next_at=None)
            )
        )
        pairs = [(d, d.attempted(ok, succeeded=True, next_at=None)) for d in claimed]
        pairs.append((_delivery(9, due=t0), _delivery(9, due=t0)))  # never stored
        changed = storage.run_sync(lambda uow: uow.deliveries.record_attempts(pairs))

        assert [d.id for d in changed] == ["dlv_0002", "dlv_0003", "dlv_0004"]
        assert changed == claimed[1:]

        def read(delivery_id: str) -> Delivery:
            found = storage.run_sync(lambda uow: uow.deliveries.get(delivery_id), write=False)
            assert found is not None
            return found

        assert read("dlv_0001") == pairs[0][1]
        assert read("dlv_0001").status is DeliveryStatus.SUCCEEDED
        assert read("dlv_0002").lease_until == later
        assert read("dlv_0002").status is DeliveryStatus.PENDING
        assert read("dlv_0003").attempts == (late,)
        assert read("dlv_0004").attempts == (ok,)
        assert storage.run_sync(lambda uow: uow.deliveries.get("dlv_0009"), write=False) is None
        assert storage.run_sync(lambda uow: uow.deliveries.record_attempts([])) == []

    def test_purge_forgets_only_finished_old_events(self, storage: Storage) -> None:
        """Purging forgets only old dispatched events with no delivery left to make."""
        t0 = NOW

        done = DeliveryAttempt(attempted_at=t0, status_code=200, duration_ms=1, error=None)

        def write(uow: UnitOfWork) -> None:
            for n in range(4):
                uow.outbox.add(_event(n))  # created t0 + n minutes
            uow.outbox.add(_event(50))  # recent
            uow.outbox.mark_dispatched(["evt_0000", "evt_0001", "evt_0002", "evt_0050"], t0)
            # evt_0000: delivered; evt_0001: still pending; evt_0002: nothing to deliver;
            # evt_0003: never dispatched.
            uow.deliveries.add(
                _delivery(1, event_id="evt_0000").attempted(done, succeeded=True, next_at=None)
            )
            uow.deliveries.add(_delivery(2, event_id="evt_0001"))

        storage.run_sync(write)
        cutoff = t0 + timedelta(minutes=10)
        assert storage.run_sync(lambda uow: uow.outbox.purge(cutoff)) == 2
        left = storage.run_sync(lambda uow: uow.outbox.list(), write=False)
        assert [e.id for e in left] == ["evt_0001", "evt_0003", "evt_0050"]
        assert storage.run_sync(lambda uow: uow.deliveries.get("dlv_0001"), write=False) is None
        assert storage.run_sync(lambda uow: uow.deliveries.get("dlv_0002"), write=False) is not None
        assert storage.run_sync(lambda uow: uow.outbox.purge(cutoff)) == 0

    def test_the_backlog_counts_only_unfinished_work(self, storage: Storage) -> None:
        """The pipeline's backlog: undispatched events, pending and due deliveries, the oldest
        waiting event, recent attempts and the failing destinations, grouped."""
        wall = datetime(2026, 6, 1, 12, tzinfo=UTC)

        def empty(uow: UnitOfWork) -> tuple[OutboxBacklog, DeliveryBacklog]:
            return uow.outbox.backlog(), uow.deliveries.backlog(NOW, wall)

        events, deliveries = storage.run_sync(empty, write=False)
        assert events == OutboxBacklog(0, None)
        assert deliveries == DeliveryBacklog(0, 0, None, 0, ())

        def failed(at: datetime) -> DeliveryAttempt:
            return DeliveryAttempt(
                attempted_at=at, status_code=500, duration_ms=1, error="HTTP 500"
            )

        ok = DeliveryAttempt(
            attempted_at=wall - timedelta(seconds=10), status_code=200, duration_ms=1, error=None
        )
        later = NOW + timedelta(hours=1)

        def write(uow: UnitOfWork) -> None:
            for n in range(5):
                uow.outbox.add(_event(n))  # created NOW + n minutes
            uow.outbox.mark_dispatched(["evt_0000", "evt_0001", "evt_0002"], NOW)
            uow.deliveries.add(  # finished: in the rate only
                _delivery(1, event_id="evt_0000").attempted(ok, succeeded=True, next_at=None)
            )
            uow.deliveries.add(_delivery(2, event_id="evt_0001"))  # due, never tried
            uow.deliveries.add(
                _delivery(3, event_id="evt_0002").attempted(
                    failed(wall - timedelta(seconds=30)), succeeded=False, next_at=later
                )
            )
            twice = (
                _delivery(4, event_id="evt_0002")
                .attempted(failed(wall - timedelta(seconds=200)), succeeded=False, next_at=NOW)
                .attempted(
                    failed(wall - timedelta(seconds=90)),
                    succeeded=False,
                    next_at=NOW + timedelta(minutes=30),
                )
            )
            uow.deliveries.add(twice)
            callback = _delivery(5, event_id="evt_0002").model_copy(
                update={
                    "company_id": 2,
                    "kind": DeliveryKind.LEGACY_CALLBACK,
                    "endpoint_id": None,
                    "url": "https://cb.example:8443/notify?token=t",
                }
            )
            uow.deliveries.add(
                callback.attempted(
                    failed(wall - timedelta(seconds=300)),
                    succeeded=False,
                    next_at=NOW + timedelta(minutes=5),
                )
            )

        storage.run_sync(write)

        def read(uow: UnitOfWork) -> tuple[OutboxBacklog, DeliveryBacklog]:
            since = wall - timedelta(seconds=60)
            return uow.outbox.backlog(), uow.deliveries.backlog(NOW, since)

        events, deliveries = storage.run_sync(read, write=False)
        assert events == OutboxBacklog(2, NOW + timedelta(minutes=3))
        assert (deliveries.pending, deliveries.due) == (4, 1)
        assert deliveries.oldest_event_created_at == NOW + timedelta(minutes=1)
        assert deliveries.attempted_recently == 2  # dlv_0001 and dlv_0003
        assert deliveries.failing == (
            FailingDestination(
                company_id=2,
                endpoint_id=None,
                kind=DeliveryKind.LEGACY_CALLBACK,
                url="https://cb.example:8443/notify?token=t",
                failing_deliveries=1,
                consecutive_failures=1,
                next_attempt_at=NOW + timedelta(minutes=5),
                last_attempt_at=wall - timedelta(seconds=300),
            ),
            FailingDestination(
                company_id=1,
                endpoint_id="we_1",
                kind=DeliveryKind.WEBHOOK,
                url="https://example.com/hook",
                failing_deliveries=2,
                consecutive_failures=2,
                next_attempt_at=NOW + timedelta(minutes=30),
                last_attempt_at=wall - timedelta(seconds=30),
            ),
        )

    def test_the_clock_offset_only_grows_and_commits_with_its_transaction(
        self, storage: Storage
    ) -> None:
        """The sandbox clock's stored offset: zero at first, advanced to the microsecond in a
        transaction (rolled back with it), never by a negative amount, read in any later one."""
        assert storage.run_sync(lambda uow: uow.clock_offset.get(), write=False) == timedelta(0)
        step = timedelta(days=3, microseconds=7)
        assert storage.run_sync(lambda uow: uow.clock_offset.advance(step)) == step
        assert storage.run_sync(lambda uow: uow.clock_offset.advance(step)) == 2 * step
        assert storage.run_sync(lambda uow: uow.clock_offset.advance(timedelta(0))) == 2 * step

        def advance_then_fail(uow: UnitOfWork) -> None:
            assert uow.clock_offset.advance(timedelta(hours=1)) == 2 * step + timedelta(hours=1)
            raise Boom

        with pytest.raises(Boom):
            storage.run_sync(advance_then_fail)
        with pytest.raises(ValueError):  # noqa: PT011 - the port fixes the type, not the words
            storage.run_sync(lambda uow: uow.clock_offset.advance(timedelta(seconds=-1)))
        assert storage.run_sync(lambda uow: uow.clock_offset.get(), write=False) == 2 * step

    def test_concurrent_clock_advances_add_up(self, storage: Storage) -> None:
        """Advances from several threads (as from several processes) lose none of each other."""
        errors: list[BaseException] = []

        def worker() -> None:
            try:
                for _ in range(10):
                    storage.run_sync(lambda uow: uow.clock_offset.advance(timedelta(seconds=1)))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert storage.run_sync(lambda uow: uow.clock_offset.get(), write=False) == timedelta(
            seconds=40
        )
