"""The storage contract's metadata tests: lists filtered on ``metadata[key]=value``
and wallets' metadata changes. :class:`~treasury_core.testing.contracts.storage.StorageContract`
inherits
them, so every storage runs them."""

from __future__ import annotations

from datetime import UTC, datetime

from treasury_core.payments.intents import IntentFilter, PaymentIntent
from treasury_core.payments.records import Transaction, TransactionStatus, TransactionType
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.testing.contracts.fixtures import (
    add_intents,
    make_intent,
    make_wallet,
    setup_company,
)

#: Keys and values a careless adapter would quote wrongly in SQL or a JSON path.
_AWKWARD = {
    'quote"d': "it's",
    "dot.ted": "100%",
    "back\\slash": "_x_",
    "$.path": "ünïcode ✓",
    "sp ace": "",  # never stored: an empty value means no such key
}


def _kept(metadata: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in metadata.items() if v}


class MetadataContract:
    """Storage tests of metadata filters; mixed into ``StorageContract``."""

    def test_intent_lists_and_counts_filter_on_metadata(self, storage: Storage) -> None:
        """Every pair must match exactly, whatever characters the keys and values hold."""
        company = setup_company(storage)
        other = setup_company(storage)
        awkward = _kept(_AWKWARD)
        intents = add_intents(
            storage,
            make_intent(company, "pi_a", metadata={"order": "A", **awkward}),
            make_intent(company, "pi_b", metadata={"order": "B", "channel": "web"}),
            make_intent(company, "pi_c", metadata={"order": "A", "channel": "web"}),
            make_intent(company, "pi_d"),
            make_intent(other, "pi_e", metadata={"order": "A"}),
        )
        a, b, c, _, _ = intents
        cases: list[tuple[dict[str, str], list[PaymentIntent]]] = [
            ({"order": "A"}, [c, a]),
            ({"order": "A", "channel": "web"}, [c]),
            ({"channel": "web"}, [c, b]),
            ({"order": "a"}, []),
            ({"order": "A", "missing": "x"}, []),
            ({"order": ""}, []),
            (awkward, [a]),
            *(({k: v}, [a]) for k, v in awkward.items()),
        ]
        for wanted, expected in cases:
            f = IntentFilter(metadata=wanted)
            assert [i for i in (a, b, c) if f.matches(i)] == sorted(expected, key=lambda i: i.id), (
                wanted
            )

            def read(uow: UnitOfWork, f: IntentFilter = f) -> tuple[list[int], int]:
                listed = uow.intents.list(company, f, 10, None)
                return [i.id for i in listed], uow.intents.count(company, f)

            ids, count = storage.run_sync(read, write=False)
            assert ids == [i.id for i in expected], wanted
            assert count == len(expected), wanted
        got = storage.run_sync(lambda uow: uow.intents.get(a.id, company), write=False)
        assert got is not None
        assert got.metadata == {"order": "A", **awkward}

    def test_record_lists_filter_on_metadata(self, storage: Storage) -> None:
        """Records of one kind, of one company, holding every pair; updates are seen."""
        company = setup_company(storage)
        other = setup_company(storage)
        now = datetime(2026, 1, 1, tzinfo=UTC)

        def attempt(n: int, company_id: int, metadata: dict[str, str]) -> Transaction:
            return Transaction(
                id=f"txn_{n}",
                company_id=company_id,
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
                metadata=metadata,
            )

        records = [
            attempt(1, company, {"order": "A", **_kept(_AWKWARD)}),
            attempt(2, company, {"order": "B"}),
            attempt(3, company, {}),
            attempt(4, other, {"order": "A"}),
        ]

        def add(uow: UnitOfWork) -> None:
            for record in records:
                uow.records.add(record)

        storage.run_sync(add)

        def ids(wanted: dict[str, str] | None) -> list[str]:
            found = storage.run_sync(
                lambda uow: uow.records.list(Transaction, company, 10, None, metadata=wanted),
                write=False,
            )
            return [r.id for r in found]

        assert ids(None) == ["txn_3", "txn_2", "txn_1"]
        assert ids({"order": "A"}) == ["txn_1"]
        assert ids(_kept(_AWKWARD)) == ["txn_1"]
        assert ids({"order": "C"}) == []
        changed = records[1].model_copy(update={"metadata": {"order": "A"}})
        storage.run_sync(lambda uow: uow.records.update(changed))
        assert ids({"order": "A"}) == ["txn_2", "txn_1"]

    def test_wallet_metadata_is_set_under_a_lock_and_filters_the_list(
        self, storage: Storage
    ) -> None:
        """``lock`` reads like ``get``; ``set_metadata`` replaces; the list filters on it (the
        list's company scope is the wallet lists' own test)."""
        company = setup_company(storage)
        other = setup_company(storage)

        def add(uow: UnitOfWork) -> None:
            uow.wallets.add(
                make_wallet("wal_1", company).model_copy(update={"metadata": {"a": "1"}})
            )
            uow.wallets.add(make_wallet("wal_2", company))
            uow.wallets.add(make_wallet("wal_3", other).model_copy(update={"metadata": {"z": "9"}}))

        storage.run_sync(add)
        locked = storage.run_sync(lambda uow: uow.wallets.lock(company, "wal_1"))
        assert locked is not None
        assert locked.metadata == {"a": "1"}
        assert storage.run_sync(lambda uow: uow.wallets.lock(other, "wal_1")) is None

        def ids(wanted: dict[str, str] | None) -> list[str]:
            found = storage.run_sync(
                lambda uow: uow.wallets.list(company, 10, None, metadata=wanted), write=False
            )
            return [w.id for w in found]

        assert ids({"a": "1"}) == ["wal_1"]
        storage.run_sync(
            lambda uow: uow.wallets.set_metadata(company, "wal_2", {"a": "1", "b": "2"})
        )
        storage.run_sync(lambda uow: uow.wallets.set_metadata(company, "wal_1", {}))
        assert ids({"a": "1"}) == ["wal_2"]
        assert ids({"a": "1", "b": "2"}) == ["wal_2"]
        got = storage.run_sync(lambda uow: uow.wallets.get(company, "wal_2"), write=False)
        assert got is not None
        assert got.metadata == {"a": "1", "b": "2"}
        emptied = storage.run_sync(lambda uow: uow.wallets.get(company, "wal_1"), write=False)
        assert emptied is not None
        assert emptied.metadata == {}
