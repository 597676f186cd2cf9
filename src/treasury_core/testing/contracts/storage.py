"""The storage contract: the tests every :class:`~treasury_core.ports.Storage` adapter passes.

treasury-core's own backends (:class:`~treasury_core.testing.MemoryStorage`, SQLite and
PostgreSQL through ``treasury_sqlalchemy``) all run exactly these tests. A third-party storage
adapter runs them too by subclassing :class:`StorageContract` in its test suite and providing a
``storage`` fixture: a fresh, migrated, empty storage, closed afterwards::

    import pytest
    from treasury_core.testing.contracts.storage import StorageContract

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
- operator keys: found by digest, listed oldest first, revoked once, a name unique among live
  keys (a refused add leaves the transaction usable), rolled back with their transaction;
- the ledger: running counters, refused journals changing nothing, two-phase movements
  (reserve, post, void, expire, due pendings), idempotent ``ensure_account``, a journal id
  applied once, postings in id order;
- the outbox and deliveries: events committing with the change, dispatching once, paging,
  purging only finished old events, delivery claims under a lease;
- idempotency records: insert once, replace by token, purge, the bound resource kept; keys kept
  exactly (control characters included);
- payment intents: increasing ids, company scoping, every field round-tripping, lists and counts
  agreeing with the filter, rollbacks, unique lookup ids;
- the sandbox clock's offset (``Storage.clock_offsets()``): zero at first, advanced to the
  microsecond, not kept when refused, never by a negative amount, concurrent advances adding up;
- the ledger's primitive steps (:class:`~treasury_core.ledger.LedgerSteps`) that the core's
  ``apply_journal`` runs.

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
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from treasury_core.companies import ApiKey, KeyKind
from treasury_core.errors import InsufficientFunds
from treasury_core.idempotency import (
    MAX_KEY_LENGTH,
    IdempotencyRecord,
    IdempotencyState,
    StoredResult,
    scoped_key,
)
from treasury_core.ledger import (
    Journal,
    Move,
)
from treasury_core.notifications.events import Event, EventType
from treasury_core.payments.records import (
    Refund,
    Transaction,
    TransactionStatus,
    TransactionType,
)
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.testing.contracts.clock_offsets import ClockOffsetsContract
from treasury_core.testing.contracts.dashboard_sessions import DashboardSessionContract
from treasury_core.testing.contracts.fixtures import (
    NOW,
    Boom,
    account,
    add_intents,
    apply,
    make_intent,
    make_wallet,
    open_accounts,
    setup_company,
    snapshot,
    wallet_account,
    world,
)
from treasury_core.testing.contracts.history import WalletHistoryContract
from treasury_core.testing.contracts.hot_accounts import HotAccountContract
from treasury_core.testing.contracts.intents import PaymentIntentContract
from treasury_core.testing.contracts.ledger import LedgerContract
from treasury_core.testing.contracts.ledger_steps import LedgerStepsContract
from treasury_core.testing.contracts.metadata import MetadataContract
from treasury_core.testing.contracts.operator_keys import OperatorKeyContract
from treasury_core.testing.contracts.outbox import OutboxContract

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


class StorageContract(
    ClockOffsetsContract,
    WalletHistoryContract,
    MetadataContract,
    LedgerContract,
    LedgerStepsContract,
    PaymentIntentContract,
    OutboxContract,
    HotAccountContract,
    OperatorKeyContract,
    DashboardSessionContract,
):
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
            result=StoredResult(200, b'{"ok":true}'),
        )
        assert not storage.run_sync(lambda uow: uow.idempotency.replace(done, "wrong-token"))
        assert storage.run_sync(lambda uow: uow.idempotency.replace(done, "t1"))
        assert storage.run_sync(lambda uow: uow.idempotency.get(1, "k1"), write=False) == done
        assert storage.run_sync(lambda uow: uow.idempotency.get(2, "k1"), write=False) is None
        assert not storage.run_sync(lambda uow: uow.idempotency.delete(1, "k1", "nope"))
        assert storage.run_sync(lambda uow: uow.idempotency.purge(NOW + timedelta(seconds=1))) == 1
        assert storage.run_sync(lambda uow: uow.idempotency.get(1, "k1"), write=False) is None

    def test_idempotency_records_keep_their_resource(self, storage: Storage) -> None:
        """The record a key is bound to is stored, replaced and read back as given; a key bound
        to nothing reads ``None``."""
        record = IdempotencyRecord(
            company_id=1,
            key="bound",
            fingerprint="f" * 64,
            state=IdempotencyState.IN_FLIGHT,
            token="t1",  # noqa: S106 - an idempotency lease token, not a secret
            created_at=NOW,
            lease_until=NOW + timedelta(seconds=60),
        )
        assert storage.run_sync(lambda uow: uow.idempotency.insert(record))
        read = storage.run_sync(lambda uow: uow.idempotency.get(1, "bound"), write=False)
        assert read is not None
        assert read.resource is None
        bound = replace(record, resource="re_" + "x" * 61)
        assert storage.run_sync(lambda uow: uow.idempotency.replace(bound, "t1"))
        assert storage.run_sync(lambda uow: uow.idempotency.get(1, "bound"), write=False) == bound
        freed = replace(bound, lease_until=NOW)
        assert storage.run_sync(lambda uow: uow.idempotency.replace(freed, "t1"))
        assert storage.run_sync(lambda uow: uow.idempotency.get(1, "bound"), write=False) == freed

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
