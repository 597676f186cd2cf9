"""Tables, as SQLAlchemy Core metadata. Alembic migrations create them; a test keeps both equal.

Timestamps are stored as UTC (``timestamptz`` on PostgreSQL; ISO text on SQLite, where the type
below re-attaches the zone). Amounts and counters are ``BIGINT`` minor units.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    text,
)
from sqlalchemy.types import TypeDecorator

from treasury_sqlalchemy.document_field import DocumentField


class UtcDateTime(TypeDecorator[datetime]):
    """An aware UTC ``datetime`` in and out, on every backend."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):  # pragma: no cover - drivers return datetimes
            raise TypeError(f"unexpected stored time {value!r}")
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

companies = Table(
    "companies",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(255), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)

merchant_accounts = Table(
    "merchant_accounts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("company_id", Integer, ForeignKey("companies.id"), nullable=False, index=True),
    Column("name", String(255), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("company_id", Integer, ForeignKey("companies.id"), nullable=False, index=True),
    Column("kind", String(16), nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("revoked_at", UtcDateTime, nullable=True),
)

# The operator's keys (migration 0017): bound to no company. A name is unique among live keys,
# so revoking by name means one key; a revoked key's name may be used again.
operator_keys = Table(
    "operator_keys",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("revoked_at", UtcDateTime, nullable=True),
    Index(
        "ix_operator_keys_live_name",
        "name",
        unique=True,
        postgresql_where=text("revoked_at IS NULL"),
        sqlite_where=text("revoked_at IS NULL"),
    ),
)

# Signed-in dashboard browsers (migration 0020): the token's digest, never the token; an
# operator session has no company. Sessions are ended, never deleted, by sign-out and by their
# key's rotation or revocation (found by ``key_id``).
dashboard_sessions = Table(
    "dashboard_sessions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("company_id", Integer, ForeignKey("companies.id"), nullable=True),
    Column("key_id", String(64), nullable=False, index=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("last_seen_at", UtcDateTime, nullable=False),
    Column("ended_at", UtcDateTime, nullable=True),
)

wallets = Table(
    "wallets",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("company_id", Integer, ForeignKey("companies.id"), nullable=False),
    Column("name", String(255), nullable=False),
    Column("description", Text, nullable=True),
    Column("currency", String(3), nullable=False),
    Column("status", String(16), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    # The merchant's key-value pairs as a JSON object; NULL when there are none (migration 0013).
    Column("metadata", Text, nullable=True),
    Index("ix_wallets_company_id_id", "company_id", "id"),
)

ledger_accounts = Table(
    "ledger_accounts",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("currency", String(3), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("company_id", Integer, nullable=True),
    Column("guarded", Boolean, nullable=False),
    Column("overdraft_limit", BigInteger, nullable=False),
    Column("debits_posted", BigInteger, nullable=False),
    Column("credits_posted", BigInteger, nullable=False),
    Column("debits_pending_holds", BigInteger, nullable=False),
    Column("debits_pending_out", BigInteger, nullable=False),
    Column("credits_pending", BigInteger, nullable=False),
    Index("ix_ledger_accounts_company_id_kind_id", "company_id", "kind", "id"),
)

# Striped counters of the accounts never checked for funds (stripes.py): an account's counters
# are its ledger_accounts row plus the sum of its rows here, at most one per stripe.
ledger_account_stripes = Table(
    "ledger_account_stripes",
    metadata,
    Column("account_id", String(64), primary_key=True),
    Column("stripe", Integer, primary_key=True, autoincrement=False),
    Column("debits_posted", BigInteger, nullable=False),
    Column("credits_posted", BigInteger, nullable=False),
    Column("debits_pending_holds", BigInteger, nullable=False),
    Column("debits_pending_out", BigInteger, nullable=False),
    Column("credits_pending", BigInteger, nullable=False),
)

# Append-only: rows are inserted, never updated or deleted.
ledger_postings = Table(
    "ledger_postings",
    metadata,
    Column("id", String(80), primary_key=True),
    Column("journal_id", String(64), nullable=False, index=True),
    Column("operation", String(32), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("debit_account_id", String(64), nullable=False),
    Column("credit_account_id", String(64), nullable=False),
    Column("currency", String(3), nullable=False),
    Column("amount", BigInteger, nullable=False),
    Column("released", BigInteger, nullable=False),
    Column("category", String(8), nullable=True),
    Column("pending_id", String(80), nullable=True),
    Column("deadline", UtcDateTime, nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
)

# Each wallet's history: one row per posting that changed the wallet, with the wallet's figures
# after it, written with the posting (treasury_core.ledger.history). ``seq`` numbers a wallet's
# rows in write order and ``created_at`` never goes back within a wallet, so one index on
# (wallet, created_at, seq) serves the newest-first page, a period and the row before a period;
# a second, led by the type, keeps a filtered page one range read. The primary key finds a
# page's cursor.
wallet_entries = Table(
    "wallet_entries",
    metadata,
    Column("wallet_id", String(64), primary_key=True),
    Column("id", String(80), primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("posting_id", String(80), nullable=False),
    Column("journal_id", String(64), nullable=False),
    Column("type", String(16), nullable=False),
    Column("counter", String(8), nullable=False),
    Column("amount", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("balance_after", BigInteger, nullable=False),
    Column("available_balance_after", BigInteger, nullable=False),
    Column("pending_in_after", BigInteger, nullable=False),
    Column("source_id", String(64), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Index("ix_wallet_entries_wallet_id_created_at_seq", "wallet_id", "created_at", "seq"),
    Index(
        "ix_wallet_entries_wallet_id_type_created_at_seq",
        "wallet_id",
        "type",
        "created_at",
        "seq",
    ),
)

ledger_pendings = Table(
    "ledger_pendings",
    metadata,
    Column("id", String(80), primary_key=True),
    Column("debit_account_id", String(64), nullable=False),
    Column("credit_account_id", String(64), nullable=False),
    Column("currency", String(3), nullable=False),
    Column("amount", BigInteger, nullable=False),
    Column("category", String(8), nullable=False),
    Column("deadline", UtcDateTime, nullable=True),
    Column("status", String(16), nullable=False),
    Column("resolved_by", String(80), nullable=True),
    Index(
        "ix_ledger_pendings_due",
        "deadline",
        postgresql_where=text("status = 'pending'"),
        sqlite_where=text("status = 'pending'"),
    ),
)

events = Table(
    "events",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("company_id", Integer, nullable=False),
    Column("type", String(96), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("payload", Text, nullable=False),
    # When the dispatcher fanned the event out into deliveries; NULL until then.
    Column("dispatched_at", UtcDateTime, nullable=True),
    Index("ix_events_company_id_id", "company_id", "id"),
    # The retention purge looks for old events (migration 0006).
    Index("ix_events_created_at", "created_at"),
    Index(
        "ix_events_undispatched",
        "id",
        postgresql_where=text("dispatched_at IS NULL"),
        sqlite_where=text("dispatched_at IS NULL"),
    ),
)

# Deliveries of events: the columns the worker queries, and the delivery itself as JSON.
# The fair claim's index on PostgreSQL (migration 0015, treasury_sqlalchemy.delivery_claim):
# pending deliveries by (company, destination), each pair's in the order they fall due, so the
# claim skips from pair to pair and reads the first due rows of each. The NULL destination of a
# row older than migration 0008 is spelled '' as the claim spells it.
_DELIVERY_CLAIM_INDEX = Index(
    "ix_deliveries_claim",
    "company_id",
    text("COALESCE(destination, '')"),
    "next_attempt_at",
    "id",
    postgresql_where=text("status = 'pending'"),
).ddl_if(dialect="postgresql")

deliveries = Table(
    "deliveries",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("company_id", Integer, nullable=False),
    Column("event_id", String(64), nullable=False, index=True),
    Column("status", String(16), nullable=False),
    Column("next_attempt_at", UtcDateTime, nullable=False),
    Column("lease_until", UtcDateTime, nullable=True),
    Column("body", Text, nullable=False),
    # ``scheme://host:port`` of the URL, which the fair claim groups and leaves out by
    # (migration 0008; NULL only for a row written by code older than it).
    Column("destination", String(255), nullable=True),
    # For ``treasury events status`` (migration 0009): the endpoint, how many attempts and the
    # real time of the latest, copied from the body so the rate and the failing endpoints are
    # read from indexes rather than from every delivery's JSON.
    Column("endpoint_id", String(64), nullable=True),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("last_attempt_at", UtcDateTime, nullable=True, index=True),
    Index(
        "ix_deliveries_due",
        "next_attempt_at",
        postgresql_where=text("status = 'pending'"),
        sqlite_where=text("status = 'pending'"),
    ),
    Index(
        "ix_deliveries_failing",
        "company_id",
        "endpoint_id",
        postgresql_where=text("status = 'pending' AND attempts > 0"),
        sqlite_where=text("status = 'pending' AND attempts > 0"),
    ),
    _DELIVERY_CLAIM_INDEX,
)

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("company_id", Integer, primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("token", String(64), nullable=False),
    Column("created_at", UtcDateTime, nullable=False, index=True),
    Column("lease_until", UtcDateTime, nullable=False),
    Column("response_status", Integer, nullable=True),
    Column("response_body", LargeBinary, nullable=True),
    Column("resource", String(64), nullable=True),
)

# The metadata filter's index of treasury records, on PostgreSQL only (migration 0013), spelled
# as the filter's ``@>`` spells it (treasury_sqlalchemy.metadata_filter).
_RECORD_METADATA_INDEX = Index(
    "ix_treasury_records_metadata",
    text("(CAST(body AS JSONB) -> 'metadata') jsonb_path_ops"),
    postgresql_using="gin",
).ddl_if(dialect="postgresql")

# Treasury records as documents: the columns a query needs, and the record itself as JSON. The
# money of every movement is in the ledger tables above, relational and append-only.
treasury_records = Table(
    "treasury_records",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("kind", String(8), nullable=False),
    Column("company_id", Integer, nullable=False),
    Column("status", String(32), nullable=False),
    Column("lookup_key", String(64), nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("body", Text, nullable=False),
    Index("ix_treasury_records_company_id_kind_id", "company_id", "kind", "id"),
    Index("ix_treasury_records_kind_lookup_key", "kind", "lookup_key"),
    # The filtered lists: by status, and by a creation window (migration 0012).
    Index("ix_treasury_records_company_id_kind_status_id", "company_id", "kind", "status", "id"),
    Index("ix_treasury_records_company_id_kind_created_at", "company_id", "kind", "created_at"),
    # The bank-file rail's work lists across companies (migration 0010).
    Index("ix_treasury_records_kind_status_id", "kind", "status", "id"),
    # A statement line is applied once: unique (company, account, entry reference) key.
    Index(
        "ux_treasury_records_bank_line",
        "lookup_key",
        unique=True,
        postgresql_where=text("kind = 'bsl'"),
        sqlite_where=text("kind = 'bsl'"),
    ),
    _RECORD_METADATA_INDEX,
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("resource_id", String(64), nullable=False, index=True),
    Column("company_id", Integer, nullable=False),
    Column("due_at", UtcDateTime, nullable=False),
    Column("status", String(16), nullable=False),
    Index(
        "ix_jobs_due",
        "due_at",
        postgresql_where=text("status = 'pending'"),
        sqlite_where=text("status = 'pending'"),
    ),
)

# Payment intents as documents, like treasury records: the columns a query needs, and the intent
# itself as JSON (without ``id``: the id is the column, assigned by the database in insert order).
INTENT_ID = BigInteger().with_variant(Integer(), "sqlite")

# The metadata filter's index, on PostgreSQL only (migration 0013): GIN over the metadata object
# of the JSON body, spelled as the filter's ``@>`` spells it (treasury_sqlalchemy.metadata_filter).
_INTENT_METADATA_INDEX = Index(
    "ix_payment_intents_metadata",
    text("(CAST(body AS JSONB) -> 'metadata') jsonb_path_ops"),
    postgresql_using="gin",
).ddl_if(dialect="postgresql")


payment_intents = Table(
    "payment_intents",
    metadata,
    # 64-bit on PostgreSQL (a busy merchant can pass 2**31 intents); SQLite's INTEGER PRIMARY
    # KEY is 64-bit already and must be spelled INTEGER to be the rowid.
    Column("id", INTENT_ID, primary_key=True, autoincrement=True),
    Column("company_id", Integer, nullable=False),
    Column("account_id", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("lookup_id", String(64), nullable=False, unique=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("body", Text, nullable=False),
    # The list newest first, unfiltered and by status; the created_at window.
    Index("ix_payment_intents_company_id_id", "company_id", "id"),
    Index("ix_payment_intents_company_id_status_id", "company_id", "status", "id"),
    Index("ix_payment_intents_company_id_created_at", "company_id", "created_at"),
    _INTENT_METADATA_INDEX,
)

# The reference and e-mail filters (the dashboard's and the API's; migration 0016): without them a
# filter reads every intent body of the company. Built on the filter's own expression.
for _member in ("merchant_reference", "customer_email"):
    Index(
        f"ix_payment_intents_company_id_{_member}",
        payment_intents.c.company_id,
        DocumentField(payment_intents.c.body, _member),
    )

# The sandbox clock's offset over wall time (one row, ``name`` ``sandbox``), in microseconds, so
# that every process over the database and every restart tell the same business time.
clock_offsets = Table(
    "clock_offsets",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("offset_us", BigInteger, nullable=False),
)
