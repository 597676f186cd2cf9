"""The Alembic migrations build exactly the schema the code declares, on both databases."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from treasury_sqlalchemy.migrate import current_revision, head_revision, upgrade
from treasury_sqlalchemy.schema import metadata
from treasury_sqlalchemy.storage import SqlStorage, normalize_url


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    return str(
        request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "postgres_url")
    )


def test_migrated_schema_matches_the_metadata(database_url: str) -> None:
    engine = create_engine(normalize_url(database_url))
    upgrade(engine)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    engine.dispose()
    assert diff == []


def test_upgrade_is_repeatable_and_reaches_head(database_url: str) -> None:
    storage = SqlStorage(database_url)
    storage.migrate()
    storage.migrate()
    assert current_revision(storage.engine) == head_revision() == "0005"
    tables = set(inspect(storage.engine).get_table_names())
    assert {"wallets", "ledger_accounts", "ledger_postings", "events", "idempotency_keys"} <= tables
    storage.close()


def test_sqlite_runs_in_wal_with_full_sync(sqlite_url: str) -> None:
    storage = SqlStorage(sqlite_url)
    storage.migrate()
    with storage.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
    storage.close()


def test_sqlite_needs_a_file() -> None:
    with pytest.raises(ValueError, match="file"):
        SqlStorage("sqlite://")
    with pytest.raises(ValueError, match="unsupported"):
        SqlStorage("mysql://x/y")


def test_events_written_before_deliveries_existed_are_not_sent_again(database_url: str) -> None:
    from datetime import UTC, datetime

    from sqlalchemy import text

    engine = create_engine(normalize_url(database_url))
    upgrade(engine, "0004")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO events (id, company_id, type, created_at, payload) "
                "VALUES ('evt_old', 1, 'treasury.deposit.completed', :at, '{}')"
            ),
            {"at": datetime(2026, 1, 1, tzinfo=UTC)},
        )
    upgrade(engine)
    engine.dispose()
    storage = SqlStorage(database_url)
    try:
        assert storage.run_sync(lambda uow: uow.outbox.undispatched(10)) == []
    finally:
        storage.close()
