"""HotQuery and HotInsert give the rows and values SQLAlchemy would, on SQLite and PostgreSQL;
intents read through them are parsed once per stored text and never answered stale."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, TypeVar

import pytest
from sqlalchemy import Connection, Table, bindparam, create_engine, insert, select, text
from sqlalchemy.exc import OperationalError

from tests.conftest import make_storage
from treasury_core.ports import UnitOfWork
from treasury_core.testing.contracts.storage import add_intents, make_intent, setup_company
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.hot import HotInsert, HotQuery
from treasury_sqlalchemy.storage import SqlStorage, normalize_url

T = TypeVar("T")

#: Not UTC on purpose: what is read back must be the same instant, in UTC.
PLUS_TWO = timezone(timedelta(hours=2))
FIRST = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=PLUS_TWO)
SECOND = datetime(2026, 3, 4, 9, 0, 0, 1, tzinfo=UTC)
THIRD = datetime(2026, 3, 5, 0, 0, 0, tzinfo=UTC)

WALLETS = (
    {"id": "wal_a", "name": "A", "description": None, "currency": "USD", "created_at": FIRST},
    {"id": "wal_b", "name": "B", "description": "bee", "currency": "EUR", "created_at": SECOND},
    {"id": "wal_c", "name": "C", "description": "", "currency": "GBP", "created_at": THIRD},
)

BY_ID = select(t.wallets).where(
    t.wallets.c.id == bindparam("wallet_id"), t.wallets.c.company_id == bindparam("company_id")
)
OF_COMPANY = select(t.wallets).where(t.wallets.c.company_id == bindparam("company_id"))


@pytest.fixture(params=["sqlite", "postgres"])
def storage(request: pytest.FixtureRequest) -> Iterator[SqlStorage]:
    backend = make_storage(request.param, request)
    assert isinstance(backend, SqlStorage)
    try:
        yield backend
    finally:
        backend.close()


def _in_transaction(storage: SqlStorage, fn: Callable[[Connection], T]) -> T:
    return storage.run_sync(lambda uow: fn(uow.connection))  # type: ignore[attr-defined]


def _seed(storage: SqlStorage) -> int:
    """A company with the three WALLETS; its id."""

    def seed(conn: Connection) -> int:
        company = conn.execute(
            insert(t.companies).returning(t.companies.c.id), {"name": "Hot", "created_at": THIRD}
        ).scalar_one()
        conn.execute(
            insert(t.wallets), [{**w, "company_id": company, "status": "active"} for w in WALLETS]
        )
        return int(company)

    return _in_transaction(storage, seed)


@pytest.fixture
def company_id(storage: SqlStorage) -> int:
    return _seed(storage)


def _both(
    storage: SqlStorage, query: Any, params: dict[str, Any]
) -> tuple[list[Sequence[Any]], list[tuple[Any, ...]]]:
    """(HotQuery's rows, SQLAlchemy's rows) for ``query`` in one transaction."""
    hot = HotQuery(query)

    def read(conn: Connection) -> tuple[list[Sequence[Any]], list[tuple[Any, ...]]]:
        return hot.rows(conn, params), [tuple(r) for r in conn.execute(query, params).all()]

    return _in_transaction(storage, read)


def test_a_primary_key_lookup_gives_what_sqlalchemy_gives(
    storage: SqlStorage, company_id: int
) -> None:
    for wallet in WALLETS:
        ours, theirs = _both(storage, BY_ID, {"wallet_id": wallet["id"], "company_id": company_id})
        assert [tuple(r) for r in ours] == theirs
        assert len(ours) == 1


def test_timestamps_come_back_aware_and_equal_to_what_was_stored(
    storage: SqlStorage, company_id: int
) -> None:
    column = list(t.wallets.c.keys()).index("created_at")
    ours, theirs = _both(storage, OF_COMPANY.order_by(t.wallets.c.id), {"company_id": company_id})
    stored = [row[column] for row in ours]
    assert stored == [w["created_at"] for w in WALLETS]  # the same instants
    assert all(isinstance(s, datetime) and s.utcoffset() == timedelta(0) for s in stored)
    assert stored == [row[column] for row in theirs]
    assert [type(v) for r in ours for v in r] == [type(v) for r in theirs for v in r]


def test_a_bound_datetime_is_converted_like_sqlalchemy_converts_it(
    storage: SqlStorage, company_id: int
) -> None:
    # 04:00 UTC written as 06:00+02:00: between FIRST (03:06 UTC) and SECOND (09:00 UTC).
    since = datetime(2026, 3, 4, 6, 0, tzinfo=PLUS_TWO)
    query = OF_COMPANY.where(t.wallets.c.created_at >= bindparam("since")).order_by(t.wallets.c.id)
    ours, theirs = _both(storage, query, {"company_id": company_id, "since": since})
    assert [tuple(r) for r in ours] == theirs
    assert [r[0] for r in ours] == ["wal_b", "wal_c"]


def test_a_limit_is_compiled_as_a_bound_default(storage: SqlStorage, company_id: int) -> None:
    query = OF_COMPANY.order_by(t.wallets.c.id.desc()).limit(2)
    ours, theirs = _both(storage, query, {"company_id": company_id})
    assert [tuple(r) for r in ours] == theirs
    assert [r[0] for r in ours] == ["wal_c", "wal_b"]
    # The same compiled statement serves the next call, limit included.
    again, _ = _both(storage, query, {"company_id": company_id})
    assert [r[0] for r in again] == ["wal_c", "wal_b"]


def test_a_selection_of_columns_and_nulls(storage: SqlStorage, company_id: int) -> None:
    query = (
        select(t.wallets.c.description, t.wallets.c.created_at, t.wallets.c.id)
        .where(t.wallets.c.company_id == bindparam("company_id"))
        .order_by(t.wallets.c.id)
    )
    ours, theirs = _both(storage, query, {"company_id": company_id})
    assert [tuple(r) for r in ours] == theirs
    assert [r[0] for r in ours] == [None, "bee", ""]


def test_no_row_is_an_empty_list_and_first_is_none(storage: SqlStorage, company_id: int) -> None:
    hot = HotQuery(BY_ID)

    def read(conn: Connection) -> tuple[Any, ...]:
        return (
            hot.rows(conn, {"wallet_id": "wal_missing", "company_id": company_id}),
            hot.first(conn, {"wallet_id": "wal_missing", "company_id": company_id}),
            # Another company's wallet is not found either.
            hot.first(conn, {"wallet_id": "wal_a", "company_id": company_id + 1}),
            hot.first(conn, {"wallet_id": "wal_a", "company_id": company_id}),
            conn.execute(BY_ID, {"wallet_id": "wal_a", "company_id": company_id}).first(),
        )

    rows, missing, foreign, found, expected = _in_transaction(storage, read)
    assert rows == []
    assert missing is None
    assert foreign is None
    assert found is not None and tuple(found) == tuple(expected)


def test_for_update_gives_the_same_rows(storage: SqlStorage, company_id: int) -> None:
    query = BY_ID.with_for_update()
    ours, theirs = _both(storage, query, {"wallet_id": "wal_b", "company_id": company_id})
    assert [tuple(r) for r in ours] == theirs
    assert len(ours) == 1


def test_for_update_locks_the_row_on_postgres(postgres_url: str) -> None:
    storage = SqlStorage(postgres_url, pool_size=2)
    storage.migrate()
    company_id = _seed(storage)
    other = create_engine(normalize_url(postgres_url))
    probe = text("SELECT id FROM wallets WHERE id = 'wal_b' FOR UPDATE NOWAIT")
    hot = HotQuery(BY_ID.with_for_update())

    def locked_elsewhere() -> bool:
        with other.connect() as conn:
            try:
                conn.execute(probe).all()
            except OperationalError:
                return True
            return False

    def read(conn: Connection) -> tuple[Sequence[Any] | None, bool]:
        row = hot.first(conn, {"wallet_id": "wal_b", "company_id": company_id})
        return row, locked_elsewhere()

    try:
        row, locked = _in_transaction(storage, read)
        assert row is not None and row[0] == "wal_b"
        assert locked
        assert not locked_elsewhere()  # released with the transaction
    finally:
        other.dispose()
        storage.close()


def test_one_query_serves_sqlite_and_postgres_in_turn(sqlite_url: str, postgres_url: str) -> None:
    # A HotQuery remembers the last dialect it compiled for: a query shared by two storages
    # (the module-level queries are) must give each one its own dialect's statement.
    storages = [SqlStorage(url, pool_size=2) for url in (sqlite_url, postgres_url)]
    hot = HotQuery(OF_COMPANY.order_by(t.wallets.c.id))
    try:
        companies = []
        for storage in storages:
            storage.migrate()
            companies.append(_seed(storage))
        for _ in range(2):
            for storage, company in zip(storages, companies, strict=True):
                ours = _in_transaction(
                    storage, lambda c, co=company: hot.rows(c, {"company_id": co})
                )
                theirs = _in_transaction(
                    storage,
                    lambda c, co=company: [
                        tuple(r)
                        for r in c.execute(OF_COMPANY.order_by(t.wallets.c.id), {"company_id": co})
                    ],
                )
                assert [tuple(r) for r in ours] == theirs
                assert [r[0] for r in ours] == ["wal_a", "wal_b", "wal_c"]
    finally:
        for storage in storages:
            storage.close()


def test_an_expanding_in_is_refused(storage: SqlStorage, company_id: int) -> None:
    hot = HotQuery(select(t.wallets).where(t.wallets.c.id.in_(bindparam("ids", expanding=True))))

    def read(conn: Connection) -> None:
        hot.rows(conn, {"ids": ["wal_a", "wal_b"]})

    with pytest.raises(ValueError, match="expanding IN"):
        _in_transaction(storage, read)


def _records(ids: tuple[str, str], *, lookup_key: str | None) -> list[dict[str, Any]]:
    return [
        {
            "id": record_id,
            "kind": "tr",
            "company_id": 7,
            "status": "completed",
            "lookup_key": lookup_key,
            "created_at": FIRST,
            "body": '{"x": "é ✓"}',
        }
        for record_id in ids
    ]


@pytest.mark.parametrize("lookup_key", [None, "key-1"])
def test_a_record_inserted_hot_reads_back_as_one_inserted_by_sqlalchemy(
    storage: SqlStorage, lookup_key: str | None
) -> None:
    hot, plain = _records(("tr_hot", "tr_plain"), lookup_key=lookup_key)
    _compare_inserts(storage, t.treasury_records, hot, plain)


def test_a_job_inserted_hot_reads_back_as_one_inserted_by_sqlalchemy(storage: SqlStorage) -> None:
    base = {
        "kind": "transfer.settle",
        "resource_id": "tr_1",
        "company_id": 3,
        "due_at": SECOND + timedelta(seconds=60),
        "status": "pending",
    }
    _compare_inserts(storage, t.jobs, {**base, "id": "job_hot"}, {**base, "id": "job_plain"})


def _compare_inserts(
    storage: SqlStorage, table: Table, hot: dict[str, Any], plain: dict[str, Any]
) -> None:
    statement = HotInsert(table)

    def write(conn: Connection) -> None:
        statement.execute(conn, hot)
        conn.execute(insert(table), [plain])

    _in_transaction(storage, write)

    def read(conn: Connection) -> dict[str, dict[str, Any]]:
        rows = conn.execute(select(table).order_by(table.c.id)).mappings().all()
        return {row["id"]: dict(row) for row in rows}

    rows = _in_transaction(storage, read)
    assert set(rows) == {hot["id"], plain["id"]}
    written = rows.pop(hot["id"])
    assert written == {**rows[plain["id"]], "id": hot["id"]}
    assert written == hot  # every value as given; timestamps the same instant


@pytest.mark.parametrize("count", [0, 1, 3])
def test_rows_inserted_in_one_statement_read_back_as_inserted_by_sqlalchemy(
    storage: SqlStorage, count: int
) -> None:
    hot = [{**_records(("x", "y"), lookup_key=None)[0], "id": f"tr_hot_{n}"} for n in range(count)]
    plain = [{**row, "id": row["id"].replace("hot", "plain")} for row in hot]
    statement = HotInsert(t.treasury_records)

    def write(conn: Connection) -> None:
        statement.execute_rows(conn, hot)
        if plain:
            conn.execute(insert(t.treasury_records), plain)

    _in_transaction(storage, write)

    def read(conn: Connection) -> dict[str, dict[str, Any]]:
        rows = conn.execute(select(t.treasury_records)).mappings().all()
        return {row["id"]: dict(row) for row in rows}

    rows = _in_transaction(storage, read)
    assert len(rows) == 2 * count
    for row in hot:
        written = rows[row["id"]]
        assert written == {**rows[row["id"].replace("hot", "plain")], "id": row["id"]} == row


def test_a_hot_insert_refuses_a_naive_datetime(storage: SqlStorage) -> None:
    statement = HotInsert(t.jobs)
    job = {
        "id": "job_naive",
        "kind": "transfer.settle",
        "resource_id": "tr_1",
        "company_id": 3,
        "due_at": datetime(2026, 1, 1),  # naive on purpose
        "status": "pending",
    }
    with pytest.raises(ValueError, match="naive"):
        _in_transaction(storage, lambda conn: statement.execute(conn, job))
    jobs = _in_transaction(storage, lambda conn: conn.execute(select(t.jobs.c.id)).all())
    assert jobs == []


def test_a_stored_rate_keeps_every_digit(storage: SqlStorage) -> None:
    # The interface renders rates as JSON numbers; the stored body must not (a float would
    # round a rate an FX adapter quoted with more digits, and settlement converts with it).
    from decimal import Decimal

    from treasury_core.movements.records import MovementStatus, Transfer

    rate = Decimal("0.92345678901234567891")
    transfer = Transfer(
        id="tr_01hotrate",
        company_id=1,
        from_wallet_id="wal_a",
        to_wallet_id="wal_b",
        from_amount=100,
        from_currency_id="USD",
        to_amount=92,
        to_currency_id="EUR",
        exchange_rate_from_to=rate,
        reference=None,
        description=None,
        status=MovementStatus.PENDING,
        error=None,
        created_at=THIRD,
    )
    storage.run_sync(lambda uow: uow.records.add(transfer))
    stored = storage.run_sync(lambda uow: uow.records.get(Transfer, transfer.id, 1), write=False)
    assert stored is not None
    assert stored.exchange_rate_from_to == rate
    assert stored == transfer


# Intents read by lookup id (a hot statement) are parsed once per distinct stored text, and a
# change is never answered stale.


def test_reads_of_an_unchanged_intent_share_one_parsed_intent(storage: SqlStorage) -> None:
    company = setup_company(storage)
    [stored] = add_intents(storage, make_intent(company, "pil_cached_one", merchant_reference="a"))

    def read(uow: UnitOfWork) -> object:
        return uow.intents.by_lookup_id("pil_cached_one", company)

    first, second = storage.run_sync(read, write=False), storage.run_sync(read, write=False)
    assert first == stored
    assert second is first  # parsed once: the stored text is the same


def test_a_changed_intent_is_read_as_changed(storage: SqlStorage) -> None:
    company = setup_company(storage)
    [stored] = add_intents(storage, make_intent(company, "pil_cached_two"))

    def read(uow: UnitOfWork) -> object:
        return uow.intents.by_lookup_id("pil_cached_two", company)

    assert storage.run_sync(read, write=False) == stored  # now cached
    changed = stored.model_copy(update={"merchant_reference": "changed"})
    storage.run_sync(lambda uow: uow.intents.update(changed))
    again = storage.run_sync(read, write=False)
    assert again == changed and again != stored
    # And back: a body seen before may be answered from the cache, and is still right.
    storage.run_sync(lambda uow: uow.intents.update(stored))
    assert storage.run_sync(read, write=False) == stored
