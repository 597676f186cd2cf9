"""The storage contract's operator-key tests: add, look up by digest, list, revoke once, and
names unique among live keys."""

from __future__ import annotations

from datetime import timedelta

import pytest

from treasury_core.operators import OperatorKey
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.testing.contracts.fixtures import NOW, Boom


def operator_key(n: int, name: str, *, minutes: int = 0) -> OperatorKey:
    """A stored operator key numbered ``n`` (its digest is ``n`` in hex), created ``minutes``
    after :data:`NOW`."""
    return OperatorKey(
        id=f"opk_{n}",
        name=name,
        key_hash=f"{n:064x}",
        prefix="ok_abcd",
        created_at=NOW + timedelta(minutes=minutes),
    )


def _add(storage: Storage, key: OperatorKey) -> bool:
    return storage.run_sync(lambda uow: uow.operator_keys.add(key))


class OperatorKeyContract:
    """The operator-key part of :class:`~treasury_core.testing.contracts.storage.StorageContract`.

    Mixed into the contract; each test takes the suite's ``storage`` fixture.
    """

    def test_operator_keys_are_found_by_digest_and_revoked_once(self, storage: Storage) -> None:
        """A key round-trips by its digest; revoking it works once and keeps the row."""
        key = operator_key(1, "ops")
        assert _add(storage, key)
        found = storage.run_sync(lambda uow: uow.operator_keys.by_hash(f"{1:064x}"), write=False)
        assert found == key
        missing = storage.run_sync(lambda uow: uow.operator_keys.by_hash("ef" * 32), write=False)
        assert missing is None
        assert storage.run_sync(lambda uow: uow.operator_keys.revoke("opk_1", NOW))
        assert not storage.run_sync(lambda uow: uow.operator_keys.revoke("opk_1", NOW))
        assert not storage.run_sync(lambda uow: uow.operator_keys.revoke("opk_nope", NOW))
        revoked = storage.run_sync(lambda uow: uow.operator_keys.by_hash(f"{1:064x}"), write=False)
        assert revoked is not None
        assert revoked.revoked_at == NOW

    def test_operator_keys_are_listed_oldest_first_revoked_ones_too(self, storage: Storage) -> None:
        """The list holds every key, oldest first, with its revocation time."""
        assert storage.run_sync(lambda uow: uow.operator_keys.list(), write=False) == []
        for n, name in enumerate(["ops", "backup", "cron"]):
            assert _add(storage, operator_key(n, name, minutes=n))
        assert storage.run_sync(lambda uow: uow.operator_keys.revoke("opk_1", NOW))
        listed = storage.run_sync(lambda uow: uow.operator_keys.list(), write=False)
        assert [(k.id, k.name) for k in listed] == [
            ("opk_0", "ops"),
            ("opk_1", "backup"),
            ("opk_2", "cron"),
        ]
        assert [k.revoked_at for k in listed] == [None, NOW, None]
        # Companies and their keys are a separate matter: none of these is a company's.
        assert storage.run_sync(lambda uow: uow.companies.list_companies(), write=False) == []

    def test_an_operator_key_name_is_unique_among_live_keys(self, storage: Storage) -> None:
        """A second live key of a name is refused and stores nothing; once the first is
        revoked, the name may be used again."""
        assert _add(storage, operator_key(1, "ops"))

        def add_twice(uow: UnitOfWork) -> tuple[bool, bool]:
            # The refusal leaves the transaction usable: the next add in it commits.
            return uow.operator_keys.add(operator_key(2, "ops")), uow.operator_keys.add(
                operator_key(3, "other")
            )

        assert storage.run_sync(add_twice) == (False, True)
        listed = storage.run_sync(lambda uow: uow.operator_keys.list(), write=False)
        assert [k.id for k in listed] == ["opk_1", "opk_3"]
        assert storage.run_sync(lambda uow: uow.operator_keys.revoke("opk_1", NOW))
        assert _add(storage, operator_key(4, "ops", minutes=1))
        live = [
            k.id
            for k in storage.run_sync(lambda uow: uow.operator_keys.list(), write=False)
            if k.revoked_at is None
        ]
        assert live == ["opk_3", "opk_4"]

    def test_operator_key_writes_roll_back_with_their_transaction(self, storage: Storage) -> None:
        """A key added, or a revocation, in a function that raises is not kept."""
        assert _add(storage, operator_key(1, "ops"))

        def fail(uow: UnitOfWork) -> None:
            uow.operator_keys.add(operator_key(2, "backup"))
            uow.operator_keys.revoke("opk_1", NOW)
            raise Boom()

        with pytest.raises(Boom):
            storage.run_sync(fail)
        listed = storage.run_sync(lambda uow: uow.operator_keys.list(), write=False)
        assert [(k.id, k.revoked_at) for k in listed] == [("opk_1", None)]
