"""The storage contract's dashboard-session tests: add, find by digest, touch, end once, end
every session of a key, and roll back with the transaction."""

from __future__ import annotations

from datetime import timedelta

import pytest

from treasury_core.dashboard_sessions import DashboardSession
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.testing.contracts.fixtures import NOW, Boom, setup_company


def dashboard_session(
    n: int, key_id: str, company_id: int | None, *, minutes: int = 0
) -> DashboardSession:
    """A live session numbered ``n`` (its digest is ``n`` in hex), started ``minutes`` after
    :data:`NOW`."""
    at = NOW + timedelta(minutes=minutes)
    return DashboardSession(
        id=f"dss_{n}",
        token_hash=f"{n:064x}",
        company_id=company_id,
        key_id=key_id,
        created_at=at,
        last_seen_at=at,
    )


def _find(storage: Storage, n: int) -> DashboardSession | None:
    return storage.run_sync(lambda uow: uow.dashboard_sessions.by_hash(f"{n:064x}"), write=False)


class DashboardSessionContract:
    """The dashboard-session part of
    :class:`~treasury_core.testing.contracts.storage.StorageContract`.

    Mixed into the contract; each test takes the suite's ``storage`` fixture.
    """

    def test_dashboard_sessions_round_trip_and_end_once(self, storage: Storage) -> None:
        """A company's and the operator's session come back by digest as stored; touching
        moves ``last_seen_at``; ending works once, and an ended session is never touched."""
        company_id = setup_company(storage)
        ours = dashboard_session(1, "key_1", company_id)
        operator = dashboard_session(2, "opk_1", None)

        def add(uow: UnitOfWork) -> None:
            uow.dashboard_sessions.add(ours)
            uow.dashboard_sessions.add(operator)

        storage.run_sync(add)
        assert _find(storage, 1) == ours
        assert _find(storage, 2) == operator
        assert _find(storage, 3) is None
        later = NOW + timedelta(minutes=5)
        storage.run_sync(lambda uow: uow.dashboard_sessions.touch("dss_1", later))
        assert _find(storage, 1) == ours.model_copy(update={"last_seen_at": later})
        assert storage.run_sync(lambda uow: uow.dashboard_sessions.end("dss_1", later))
        assert not storage.run_sync(lambda uow: uow.dashboard_sessions.end("dss_1", later))
        assert not storage.run_sync(lambda uow: uow.dashboard_sessions.end("dss_nope", later))
        storage.run_sync(
            lambda uow: uow.dashboard_sessions.touch("dss_1", later + timedelta(minutes=1))
        )
        ended = _find(storage, 1)
        assert ended is not None
        assert (ended.ended_at, ended.last_seen_at) == (later, later)
        assert _find(storage, 2) == operator

    def test_ending_a_keys_sessions_leaves_the_others(self, storage: Storage) -> None:
        """``end_for_key`` ends the key's live sessions only and says how many."""
        company_id = setup_company(storage)
        sessions = [
            dashboard_session(1, "key_1", company_id),
            dashboard_session(2, "key_1", company_id, minutes=1),
            dashboard_session(3, "key_2", company_id),
            dashboard_session(4, "key_1", company_id, minutes=2),
        ]

        def add(uow: UnitOfWork) -> None:
            for session in sessions:
                uow.dashboard_sessions.add(session)

        storage.run_sync(add)
        early = NOW + timedelta(minutes=3)
        assert storage.run_sync(lambda uow: uow.dashboard_sessions.end("dss_4", early))
        later = NOW + timedelta(minutes=10)
        assert storage.run_sync(lambda uow: uow.dashboard_sessions.end_for_key("key_1", later)) == 2
        assert storage.run_sync(lambda uow: uow.dashboard_sessions.end_for_key("key_1", later)) == 0
        ends = [getattr(_find(storage, n), "ended_at", "missing") for n in (1, 2, 3, 4)]
        assert ends == [later, later, None, early]

    def test_dashboard_session_writes_roll_back_with_their_transaction(
        self, storage: Storage
    ) -> None:
        """A session added, touched or ended in a function that raises is not kept."""
        company_id = setup_company(storage)
        first = dashboard_session(1, "key_1", company_id)
        storage.run_sync(lambda uow: uow.dashboard_sessions.add(first))
        later = NOW + timedelta(minutes=5)

        def fail(uow: UnitOfWork) -> None:
            uow.dashboard_sessions.add(dashboard_session(2, "key_1", company_id))
            uow.dashboard_sessions.touch("dss_1", later)
            uow.dashboard_sessions.end_for_key("key_1", later)
            raise Boom()

        with pytest.raises(Boom):
            storage.run_sync(fail)
        assert _find(storage, 1) == first
        assert _find(storage, 2) is None
