"""The Alembic migrations build exactly the schema the code declares, on both databases."""

from __future__ import annotations

from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, create_engine, inspect, text

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
    # 0012 was written beside 0013 and re-chained after it at the merge; 0014 (striped counters)
    # follows 0012, 0015 (the delivery claim's index) 0014, 0016 (the intent filters'
    # indexes) 0015, 0017 (the operator's keys) 0016, and 0018 (statement lines keyed by
    # account and identity) 0017.
    assert current_revision(storage.engine) == head_revision() == "0020"
    tables = set(inspect(storage.engine).get_table_names())
    assert {"wallets", "ledger_accounts", "ledger_postings", "events", "idempotency_keys"} <= tables
    storage.close()


def test_0014_downgrade_folds_the_stripes_into_the_accounts(database_url: str) -> None:
    """Going back before the stripes table loses no movement: its sums join the account rows."""
    from alembic import command

    from treasury_core.ledger import Journal, Move
    from treasury_core.testing.contracts.storage import (
        account,
        apply,
        open_accounts,
        wallet_account,
    )
    from treasury_core.testing.contracts.storage import world as world_account
    from treasury_sqlalchemy.migrate import alembic_config

    storage = SqlStorage(database_url, pool_size=2, hot_stripes=2)
    storage.migrate()
    open_accounts(storage, world_account(), wallet_account("wal_a"))
    for n in range(4):
        apply(storage, Journal(f"j{n}", (Move("world:USD", "wal_a", "USD", 10),)))
    with storage.engine.connect() as conn:
        striped = conn.execute(text("SELECT SUM(debits_posted) FROM ledger_account_stripes"))
        assert striped.scalar_one() == 30  # the first movement went through the account row
    config = alembic_config()
    with storage.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0012")
    with storage.engine.connect() as conn:
        row = conn.execute(text("SELECT debits_posted FROM ledger_accounts WHERE id = 'world:USD'"))
        assert row.scalar_one() == 40
        assert "ledger_account_stripes" not in inspect(conn).get_table_names()
    storage.migrate()
    assert account(storage, "world:USD").debits_posted == 40
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


def _index_names(engine: Engine, table: str) -> set[str]:
    return {str(ix["name"]) for ix in inspect(engine).get_indexes(table)}


def test_0006_adds_the_events_created_at_index(database_url: str) -> None:
    engine = create_engine(normalize_url(database_url))
    try:
        upgrade(engine, "0005")
        assert "ix_events_created_at" not in _index_names(engine, "events")
        upgrade(engine)
        assert "ix_events_created_at" in _index_names(engine, "events")
    finally:
        engine.dispose()


def test_0006_keeps_an_index_built_beforehand(database_url: str) -> None:
    # What an operator does on a large PostgreSQL events table: build the index without
    # blocking writes (CONCURRENTLY), then upgrade; the migration must not fail on it.
    engine = create_engine(normalize_url(database_url))
    try:
        upgrade(engine, "0005")
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE INDEX ix_events_created_at ON events (created_at)")
        upgrade(engine, "0006")
        assert current_revision(engine) == "0006"
        assert "ix_events_created_at" in _index_names(engine, "events")
    finally:
        engine.dispose()


def test_the_event_purge_searches_by_created_at_on_sqlite(sqlite_url: str) -> None:
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import event, insert

    from treasury_sqlalchemy import schema as t

    storage = SqlStorage(sqlite_url)
    storage.migrate()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [
        {
            "id": f"evt_{i:04d}",
            "company_id": 1 + i % 3,
            "type": "treasury.transfer.completed",
            "created_at": start + timedelta(minutes=i),
            "payload": "{}",
            "dispatched_at": start + timedelta(minutes=i, seconds=1),
        }
        for i in range(200)
    ]
    storage.run_sync(lambda uow: uow.connection.execute(insert(t.events), rows))  # type: ignore[attr-defined]

    # The SELECT the purge really runs, as the driver receives it.
    selects: list[tuple[str, Any]] = []

    def seen(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "events" in statement:
            selects.append((statement, parameters))

    event.listen(storage.engine, "before_cursor_execute", seen)
    try:
        purged = storage.run_sync(lambda uow: uow.outbox.purge(start + timedelta(minutes=50)))
    finally:
        event.remove(storage.engine, "before_cursor_execute", seen)
    try:
        assert purged == 50
        [(statement, parameters)] = selects
        with storage.engine.connect() as conn:
            dbapi = conn.connection.dbapi_connection
            assert dbapi is not None
            plan = [
                str(row[3]) for row in dbapi.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)
            ]
    finally:
        storage.close()
    events_steps = [step for step in plan if " events" in f" {step}"]
    assert any("ix_events_created_at" in step for step in events_steps), plan
    assert not any(step.startswith("SCAN events") for step in plan), plan


def test_0007_keeps_the_sandbox_clock_offset_from_zero_on(database_url: str) -> None:
    # A database of the previous revision, in use: after the upgrade the offset is zero (what
    # every start assumed before) and advances are kept.
    import asyncio
    from datetime import timedelta

    from treasury_core.testing.contracts.storage import setup_company

    engine = create_engine(normalize_url(database_url))
    try:
        upgrade(engine, "0006")
        assert "clock_offsets" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
    storage = SqlStorage(database_url)
    try:
        with pytest.raises(Exception, match="clock_offsets"):
            storage.clock_offsets().load()
        setup_company(storage)
        storage.migrate()
        assert current_revision(storage.engine) == head_revision()
        assert storage.clock_offsets().load() == timedelta(0)
        day = timedelta(days=1)
        assert asyncio.run(storage.clock_offsets().advance(day)) == day
    finally:
        storage.close()


def test_0008_gives_pending_deliveries_their_destination(database_url: str) -> None:
    # A delivery written before the column existed: the fair claim must still group it (and
    # leave it out while its destination has no room).
    from datetime import UTC, datetime

    from sqlalchemy import text

    from treasury_core.notifications.deliveries import Delivery, DeliveryKind

    now = datetime(2026, 1, 1, tzinfo=UTC)
    old = Delivery(
        id="dlv_old",
        company_id=1,
        event_id="evt_old",
        event_type="treasury.deposit.completed",
        kind=DeliveryKind.WEBHOOK,
        endpoint_id="we_1",
        url="https://Merchant.example/hooks?token=x",
        payload="{}",
        next_attempt_at=now,
        created_at=now,
    )
    engine = create_engine(normalize_url(database_url))
    try:
        upgrade(engine, "0007")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO deliveries (id, company_id, event_id, status, next_attempt_at,"
                    " body) VALUES (:id, 1, :event, 'pending', :due, :body)"
                ),
                {"id": old.id, "event": old.event_id, "due": now, "body": old.model_dump_json()},
            )
    finally:
        engine.dispose()
    storage = SqlStorage(database_url)
    try:
        storage.migrate()

        def claim(room: dict[str, int]) -> list[Delivery]:
            return storage.run_sync(
                lambda uow: uow.deliveries.claim_batch(
                    now, now, now, 10, per_destination=5, room=room
                )
            )

        with storage.engine.connect() as conn:
            filled = conn.execute(text("SELECT destination FROM deliveries")).scalar_one()
        assert filled == "https://merchant.example:443"
        assert claim({"https://merchant.example:443": 0}) == []
        assert [d.id for d in claim({})] == ["dlv_old"]
    finally:
        storage.close()


def test_0009_fills_in_the_pending_deliveries_attempts(database_url: str) -> None:
    # A database in use before 0009: its pending deliveries' attempts were in their bodies
    # only; after the upgrade `treasury events status` sees the failing one.
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import column, insert, table

    from treasury_core.notifications.deliveries import Delivery, DeliveryAttempt, DeliveryKind

    start = datetime(2026, 1, 1, tzinfo=UTC)
    refused = DeliveryAttempt(attempted_at=start, status_code=500, duration_ms=3, error="HTTP 500")
    made = Delivery(
        id="dlv_1",
        company_id=1,
        event_id="evt_1",
        event_type="treasury.deposit.completed",
        kind=DeliveryKind.WEBHOOK,
        endpoint_id="we_1",
        url="https://merchant.example/hooks",
        payload="{}",
        next_attempt_at=start,
        created_at=start,
    )
    failing = made.attempted(refused, succeeded=False, next_at=start + timedelta(minutes=5))
    done = made.model_copy(update={"id": "dlv_2"}).attempted(
        refused.model_copy(update={"status_code": 200, "error": None}), succeeded=True, next_at=None
    )
    old_deliveries = table(
        "deliveries",
        *(column(c) for c in ("id", "company_id", "event_id", "status", "next_attempt_at")),
        column("body"),
    )
    engine = create_engine(normalize_url(database_url))
    try:
        upgrade(engine, "0007")
        with engine.begin() as conn:
            conn.execute(
                insert(old_deliveries),
                [
                    {
                        "id": d.id,
                        "company_id": 1,
                        "event_id": "evt_1",
                        "status": d.status.value,
                        "next_attempt_at": d.next_attempt_at,
                        "body": d.model_dump_json(),
                    }
                    for d in (failing, done)
                ],
            )
    finally:
        engine.dispose()
    storage = SqlStorage(database_url)
    try:
        storage.migrate()
        backlog = storage.run_sync(
            lambda uow: uow.deliveries.backlog(start, start - timedelta(minutes=1)), write=False
        )
        assert backlog.pending == 1
        [destination] = backlog.failing
        assert (destination.endpoint_id, destination.consecutive_failures) == ("we_1", 1)
        assert destination.next_attempt_at == start + timedelta(minutes=5)
    finally:
        storage.close()


def test_0009_keeps_columns_and_indexes_made_beforehand(postgres_url: str) -> None:
    # The non-blocking way its docstring gives for a large PostgreSQL deliveries table.
    engine = create_engine(normalize_url(postgres_url))
    try:
        upgrade(engine, "0007")
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "ALTER TABLE deliveries ADD COLUMN endpoint_id VARCHAR(64),"
                " ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0,"
                " ADD COLUMN last_attempt_at TIMESTAMP WITH TIME ZONE"
            )
        with engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            conn.exec_driver_sql(
                "CREATE INDEX CONCURRENTLY ix_deliveries_last_attempt_at"
                " ON deliveries (last_attempt_at)"
            )
            conn.exec_driver_sql(
                "CREATE INDEX CONCURRENTLY ix_deliveries_failing"
                " ON deliveries (company_id, endpoint_id)"
                " WHERE status = 'pending' AND attempts > 0"
            )
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
        assert diff == []
    finally:
        engine.dispose()


def test_0013_indexes_the_metadata_filter_on_postgresql(postgres_url: str) -> None:
    # The indexes must be spelled as the list filter spells its expression, or PostgreSQL would
    # never use it: the filter's own condition, with sequential scans off, plans through it.
    from sqlalchemy import select

    from treasury_sqlalchemy.metadata_filter import metadata_where
    from treasury_sqlalchemy.schema import payment_intents

    engine = create_engine(normalize_url(postgres_url))
    try:
        upgrade(engine)
        assert "ix_payment_intents_metadata" in _index_names(engine, "payment_intents")
        assert "ix_treasury_records_metadata" in _index_names(engine, "treasury_records")
        query = select(payment_intents.c.id).where(
            *metadata_where(payment_intents.c.body, {"order_id": "A-1"})
        )
        with engine.connect() as conn:
            conn.exec_driver_sql("SET enable_seqscan = off")
            sql = query.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True})
            plan = conn.exec_driver_sql(f"EXPLAIN {sql}").all()
        assert "ix_payment_intents_metadata" in " ".join(str(row[0]) for row in plan)
    finally:
        engine.dispose()


@pytest.mark.parametrize("member", ["merchant_reference", "customer_email"])
def test_0016_indexes_the_intent_field_filters(database_url: str, member: str) -> None:
    # As for 0013: the index only helps if the list filter's expression is the index's, so the
    # filter's own query, as the storage writes it, must plan through it on both databases.
    from sqlalchemy import select

    from treasury_core.payments.intents import IntentFilter
    from treasury_sqlalchemy.record_lists import intent_field_where
    from treasury_sqlalchemy.schema import payment_intents

    index = f"ix_payment_intents_company_id_{member}"
    engine = create_engine(normalize_url(database_url))
    try:
        upgrade(engine)
        # The condition alone: on an empty table PostgreSQL would rather walk the id index
        # backwards for a LIMIT, which says nothing about this index.
        query = select(payment_intents.c.id).where(
            payment_intents.c.company_id == 7,
            *intent_field_where(IntentFilter(**{member: "order-7@example.com"})),
        )
        sql = str(query.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
        with engine.connect() as conn:
            if engine.dialect.name == "postgresql":
                conn.exec_driver_sql("SET enable_seqscan = off")
                plan = conn.exec_driver_sql(f"EXPLAIN {sql}").all()
            else:
                plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}").all()
        assert index in " ".join(str(cell) for row in plan for cell in row), plan
    finally:
        engine.dispose()


def test_0018_keys_statement_lines_by_account_and_identity(database_url: str) -> None:
    """Lines stored per company become one booking per account and reference: the oldest
    keeps the key, so the booking is found (and not applied again) whoever imports it."""
    import json
    from datetime import UTC, datetime

    from treasury_core.movements.bank_files import BankStatementLine, line_key

    def body(line_id: str, company: int, reference: str) -> str:
        return json.dumps(
            {
                "id": line_id,
                "company_id": company,
                "statement_id": "S1",
                "account": "NL91ABNA0417164300",
                "entry_reference": reference,
                "direction": "credit",
                "amount": 100,
                "currency": "EUR",
                "booking_date": "2026-01-01",
                "reference": None,
                "outcome": "unmatched",
                "matched_id": None,
                "reason": "no match",
                "created_at": "2026-01-01T00:00:00Z",
            }
        )

    engine = create_engine(normalize_url(database_url))
    try:
        upgrade(engine, "0017")
        with engine.begin() as conn:
            for line_id, company, reference in (
                ("bsl_1", 0, "B 1"),
                ("bsl_2", 7, "b1"),
                ("bsl_3", 0, "B2"),
            ):
                conn.execute(
                    text(
                        "INSERT INTO treasury_records (id, kind, company_id, status, lookup_key,"
                        " created_at, body) VALUES (:id, 'bsl', :company, 'unmatched', :key,"
                        " :at, :body)"
                    ),
                    {
                        "id": line_id,
                        "company": company,
                        "key": f"old-{line_id}",
                        "at": datetime(2026, 1, 1, tzinfo=UTC),
                        "body": body(line_id, company, reference),
                    },
                )
    finally:
        engine.dispose()
    storage = SqlStorage(database_url)
    try:
        storage.migrate()
        account = "NL91ABNA0417164300"

        def find(identity: str) -> BankStatementLine | None:
            key = line_key(account, identity)
            return storage.run_sync(lambda uow: uow.records.find(BankStatementLine, key))

        first, second = find("ref:B1"), find("ref:B2")
        assert first is not None and first.id == "bsl_1" and first.identity == "ref:B1"
        assert second is not None and second.id == "bsl_3"
        with storage.engine.connect() as conn:
            cleared = conn.execute(
                text("SELECT lookup_key FROM treasury_records WHERE id = 'bsl_2'")
            ).scalar_one()
        assert cleared is None
    finally:
        storage.close()


def test_0017_live_operator_key_names_are_unique_and_downgrade_drops_the_table(
    database_url: str,
) -> None:
    # The partial index is the guard when two creations race past the service's own check: a
    # second live key of a name is refused by the database itself; a revoked one frees it.
    from alembic import command
    from sqlalchemy.exc import IntegrityError

    from treasury_sqlalchemy.migrate import alembic_config

    engine = create_engine(normalize_url(database_url))
    insert = text(
        "INSERT INTO operator_keys (id, name, key_hash, prefix, created_at, revoked_at)"
        " VALUES (:id, 'ops', :id, 'ok_abcd', '2026-01-01 00:00:00', :revoked)"
    )
    try:
        upgrade(engine)
        with engine.begin() as conn:
            conn.execute(insert, {"id": "opk_1", "revoked": "2026-01-02 00:00:00"})
            conn.execute(insert, {"id": "opk_2", "revoked": None})
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(insert, {"id": "opk_3", "revoked": None})
        config = alembic_config()
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0016")
        assert "operator_keys" not in inspect(engine).get_table_names()
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        assert "operator_keys" in inspect(engine).get_table_names()
    finally:
        engine.dispose()


def test_0018_downgrades_lines_its_identities_told_apart(database_url: str) -> None:
    """Two lines without a bank reference are two bookings at head but one old key below it:
    the downgrade keeps the oldest's key rather than failing on the unique index."""
    import json
    from datetime import UTC, datetime

    from alembic import command

    from treasury_sqlalchemy.migrate import alembic_config

    storage = SqlStorage(database_url)
    storage.migrate()
    with storage.engine.begin() as conn:
        for line_id in ("bsl_1", "bsl_2"):
            body = {"id": line_id, "account": "NL91ABNA0417164300", "entry_reference": None}
            conn.execute(
                text(
                    "INSERT INTO treasury_records (id, kind, company_id, status, lookup_key,"
                    " created_at, body) VALUES (:id, 'bsl', 0, 'unmatched', :key, :at, :body)"
                ),
                {
                    "id": line_id,
                    "key": f"derived-{line_id}",
                    "at": datetime(2026, 1, 1, tzinfo=UTC),
                    "body": json.dumps(body),
                },
            )
    config = alembic_config()
    with storage.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0017")
    with storage.engine.connect() as conn:
        keys = dict(conn.execute(text("SELECT id, lookup_key FROM treasury_records")).all())
    assert keys["bsl_1"] is not None and keys["bsl_2"] is None
    storage.close()
