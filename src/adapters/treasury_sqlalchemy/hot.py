"""Every statement of the SQL adapter that bypasses SQLAlchemy's execution: one place for raw SQL.

Two kinds, both run on the DBAPI cursor of the transaction's connection, because on the request
path SQLAlchemy's execution machinery (compiled-cache lookup, execution context, result
metadata) cost more client time than the database spent on the statement (docs/performance.md
and CHANGELOG.md's "Performance history" have the figures):

- :class:`HotQuery` and :class:`HotInsert` keep a statement as SQLAlchemy Core (so the SQL
  still comes from the table metadata and the dialect), compile it once per dialect, and convert
  parameters and results with the column types' own processors, so the values are the ones
  SQLAlchemy would give. Only for statements with plain bound parameters (an expanding ``IN`` is
  refused at compile time), and only for the ``qmark`` (sqlite3) and ``format``/``pyformat``
  (psycopg) paramstyles. Compiled statements are kept per dialect, driver and paramstyle.
- :class:`MovementStatements` and :class:`StripeStatements`: the ledger's movement (an account
  ``UPDATE … RETURNING``, a posting ``INSERT``, a stripe's ``INSERT … ON CONFLICT``) and the
  intent ``INSERT``, rendered as SQL text once per dialect from the same metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import Select

from treasury_core.ledger import CounterDelta
from treasury_sqlalchemy import schema as t

_Processor = Callable[[Any], Any] | None


def _key(dialect: Dialect) -> tuple[str, str, str]:
    return dialect.name, dialect.driver, dialect.paramstyle


def _mark(dialect: Dialect) -> str:
    """The positional placeholder of the dialect's paramstyle."""
    if dialect.paramstyle == "qmark":
        return "?"
    if dialect.paramstyle in ("format", "pyformat"):
        return "%s"
    raise ValueError(f"hot statements do not support the {dialect.paramstyle} paramstyle")


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    #: Parameter names in order (positional paramstyles) or ``None`` (named: a dict is passed).
    names: tuple[str, ...] | None
    #: Values compiled into the statement's own bound parameters (a ``LIMIT``, a literal).
    defaults: dict[str, Any]
    #: Bind processors by parameter name, only those that convert something.
    binds: dict[str, Callable[[Any], Any]]
    #: ``(column index, result processor)`` for the selected columns that need converting
    #: (most need none, and visiting only these is what keeps a wide row cheap).
    results: tuple[tuple[int, Callable[[Any], Any]], ...]


#: Where a psycopg connection's kept cursor lives: the pool's record of the DBAPI connection,
#: whose ``info`` lasts as long as that connection and is dropped with it.
_KEPT_CURSOR = "treasury_hot_cursor"


def open_cursor(conn: Connection) -> tuple[Any, bool]:
    """A DBAPI cursor on the transaction's connection, for the statements of this module, and
    whether the caller must close it.

    psycopg: one cursor per connection, kept and reused (a statement's results are read before
    the next statement runs). Making a cursor builds its adapters map, a measurable share of
    each statement's client time when several workers share the GIL (docs/performance.md).
    sqlite3: a cursor per statement, to be closed after it, because closing is what finalizes a
    statement whose rows were not all read, and an unfinalized one can hold SQLite's locks.
    (A function, not a context manager: on this path the manager's own cost showed.)
    """
    record = conn.connection
    dbapi = record.dbapi_connection
    if conn.dialect.name != "postgresql":
        return dbapi.cursor(), True  # type: ignore[union-attr]
    kept = record.info.get(_KEPT_CURSOR)
    if kept is None or kept[0] is not dbapi:
        kept = record.info[_KEPT_CURSOR] = (dbapi, dbapi.cursor())  # type: ignore[union-attr]
    return kept[1], False


@contextmanager
def raw_cursor(conn: Connection) -> Iterator[Any]:
    """:func:`open_cursor` as a context manager, closing the cursor if it must be."""
    cursor, owned = open_cursor(conn)
    try:
        yield cursor
    finally:
        if owned:
            cursor.close()


class HotQuery:
    """A ``SELECT`` run on the DBAPI cursor of the connection's current transaction."""

    __slots__ = ("_compiled", "_last", "_query")

    def __init__(self, query: Select[Any]) -> None:
        self._query = query
        self._compiled: dict[tuple[str, str, str], _Compiled] = {}
        #: The dialect object last seen and its statement (one tuple: threads swap it whole).
        self._last: tuple[Dialect, _Compiled] | None = None

    def _compile(self, dialect: Dialect) -> _Compiled:
        _mark(dialect)  # refuses a paramstyle the cursor calls below do not speak
        compiled = self._query.compile(dialect=dialect)
        if any(bind.expanding for bind in compiled.binds.values()):
            raise ValueError("HotQuery cannot run an expanding IN; use Connection.execute")
        binds: dict[str, Callable[[Any], Any]] = {}
        for name, bind in compiled.binds.items():
            processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if processor is not None:
                binds[name] = processor
        results = tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, None)
            for column in self._query.selected_columns
        )
        positional = compiled.positiontup
        return _Compiled(
            sql=str(compiled),
            names=tuple(positional) if dialect.positional and positional is not None else None,
            defaults={k: v for k, v in compiled.params.items() if v is not None},
            binds=binds,
            results=tuple((i, p) for i, p in enumerate(results) if p is not None),
        )

    def _compiled_for(self, dialect: Dialect) -> _Compiled:
        compiled = self._compiled.get(_key(dialect))
        if compiled is None:
            compiled = self._compiled[_key(dialect)] = self._compile(dialect)
        return compiled

    def rows(self, conn: Connection, params: dict[str, Any]) -> list[Sequence[Any]]:
        """Every row, as tuples in the order of the selected columns."""
        dialect = conn.dialect
        last = self._last
        if last is not None and last[0] is dialect:
            compiled = last[1]  # the usual case: one engine, so one dialect object
        else:
            compiled = self._compiled_for(dialect)
            self._last = (dialect, compiled)
        values = params
        if compiled.defaults or compiled.binds:
            values = {**compiled.defaults, **params}
            for name, processor in compiled.binds.items():
                if name in values:
                    values[name] = processor(values[name])
        cursor, owned = open_cursor(conn)
        try:
            if compiled.names is not None:
                cursor.execute(compiled.sql, [values[name] for name in compiled.names])
            else:
                cursor.execute(compiled.sql, values)
            # A list from both drivers (the DBAPI types promise only a sequence).
            rows: list[Sequence[Any]] = cursor.fetchall()
        finally:
            if owned:
                cursor.close()
        results = compiled.results
        if not results:
            return rows
        converted: list[Sequence[Any]] = []
        for row in rows:
            fields = list(row)
            for index, processor in results:
                if fields[index] is not None:
                    fields[index] = processor(fields[index])
            converted.append(tuple(fields))
        return converted

    def first(self, conn: Connection, params: dict[str, Any]) -> Sequence[Any] | None:
        """The first row, or ``None``."""
        rows = self.rows(conn, params)
        return rows[0] if rows else None


@dataclass(frozen=True, slots=True)
class _CompiledInsert:
    sql: str
    columns: tuple[str, ...]
    #: Bind processors in column order (``None`` where the value goes as it is).
    binds: tuple[_Processor, ...]


#: Two inserts' SQL joined by :meth:`HotInsert.execute_with`, by their two statements.
_COMBINED: dict[tuple[str, str], str] = {}


class HotInsert:
    """A one-row ``INSERT`` of every column of ``table`` (but ``omit``), on the DBAPI cursor.

    Values pass through each column type's bind processor, as SQLAlchemy would convert them.
    """

    __slots__ = ("_compiled", "_omit", "_table")

    def __init__(self, table: Table, *, omit: tuple[str, ...] = ()) -> None:
        self._table = table
        self._omit = omit
        self._compiled: dict[tuple[str, str, str], _CompiledInsert] = {}

    def _compile(self, dialect: Dialect) -> _CompiledInsert:
        columns = [c for c in self._table.columns if c.name not in self._omit]
        mark = _mark(dialect)
        # Only table and column names from our own metadata are interpolated; values are bound.
        sql = (
            f"INSERT INTO {self._table.name} ({', '.join(c.name for c in columns)}) "  # noqa: S608
            f"VALUES ({', '.join([mark] * len(columns))})"
        )
        binds = tuple(c.type.dialect_impl(dialect).bind_processor(dialect) for c in columns)
        return _CompiledInsert(sql, tuple(c.name for c in columns), binds)

    def execute_rows(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
        """Insert ``rows`` with one statement (one round trip), however many there are."""
        if len(rows) <= 1:
            for values in rows:
                self.execute(conn, values)
            return
        dialect = conn.dialect
        compiled = self._compiled_for(dialect)
        one = compiled.sql[compiled.sql.index(" VALUES ") + len(" VALUES ") :]
        sql = compiled.sql + ", " + ", ".join([one] * (len(rows) - 1))
        params: list[Any] = []
        for values in rows:
            params.extend(self._row(compiled, values))
        cursor, owned = open_cursor(conn)
        try:
            cursor.execute(sql, params)
        finally:
            if owned:
                cursor.close()

    def _compiled_for(self, dialect: Dialect) -> _CompiledInsert:
        compiled = self._compiled.get(_key(dialect))
        if compiled is None:
            compiled = self._compiled[_key(dialect)] = self._compile(dialect)
        return compiled

    @staticmethod
    def _row(compiled: _CompiledInsert, values: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(
            values[name] if processor is None else processor(values[name])
            for name, processor in zip(compiled.columns, compiled.binds, strict=True)
        )

    def execute_with(
        self,
        conn: Connection,
        values: dict[str, Any],
        following: HotInsert,
        following_values: dict[str, Any],
    ) -> None:
        """Insert one row here and one with ``following``, as one statement on PostgreSQL
        (``WITH first_row AS (INSERT …) INSERT …``: one round trip, and a refused row writes
        neither) and as two elsewhere (SQLite has no data-modifying ``WITH``)."""
        dialect = conn.dialect
        if dialect.name != "postgresql":
            self.execute(conn, values)
            following.execute(conn, following_values)
            return
        first, second = self._compiled_for(dialect), following._compiled_for(dialect)
        key = (first.sql, second.sql)
        sql = _COMBINED.get(key)
        if sql is None:
            sql = _COMBINED[key] = f"WITH first_row AS ({first.sql}) {second.sql}"
        cursor, owned = open_cursor(conn)
        try:
            cursor.execute(sql, (*self._row(first, values), *self._row(second, following_values)))
        finally:
            if owned:
                cursor.close()

    def execute(self, conn: Connection, values: dict[str, Any]) -> None:
        """Insert one row; ``values`` must name every column the statement writes."""
        dialect = conn.dialect
        compiled = self._compiled.get(_key(dialect))
        if compiled is None:
            compiled = self._compiled[_key(dialect)] = self._compile(dialect)
        row = tuple(
            values[name] if processor is None else processor(values[name])
            for name, processor in zip(compiled.columns, compiled.binds, strict=True)
        )
        cursor, owned = open_cursor(conn)
        try:
            cursor.execute(compiled.sql, row)
        finally:
            if owned:
                cursor.close()


# --- the ledger's movements, rendered as SQL text --------------------------------------------

#: The counters of a ledger account row, in the order the statements bind them.
LEDGER_COUNTERS = (
    "debits_posted",
    "credits_posted",
    "debits_pending_holds",
    "debits_pending_out",
    "credits_pending",
)

_ACCOUNT_COLUMNS = tuple(c.name for c in t.ledger_accounts.c)
_POSTING_COLUMNS = tuple(c.name for c in t.ledger_postings.c)
INTENT_WRITE_COLUMNS = tuple(c.name for c in t.payment_intents.c if c.name != "id")


class MovementStatements:
    """The ledger's hot path, rendered once per dialect and run on the DBAPI cursor.

    A movement is two account UPDATEs and one posting INSERT; through SQLAlchemy's execution
    machinery each statement cost more client time than the database spent on it (see
    CHANGELOG.md, "Performance history"). The SQL is built from the same table metadata, and
    timestamps are bound through the column type's own bind processor, so the rows are
    identical to what SQLAlchemy would write.
    """

    def __init__(self, dialect: Dialect) -> None:
        # Only table and column names from our own metadata are interpolated; values are bound.
        mark = "?" if dialect.paramstyle == "qmark" else "%s"
        bump = ", ".join(f"{c} = {c} + {mark}" for c in LEDGER_COUNTERS)
        self.bump = (
            f"UPDATE ledger_accounts SET {bump} WHERE id = {mark} "  # noqa: S608
            f"RETURNING {', '.join(_ACCOUNT_COLUMNS)}"
        )
        self.insert_posting = (
            f"INSERT INTO ledger_postings ({', '.join(_POSTING_COLUMNS)}) "  # noqa: S608
            f"VALUES ({', '.join([mark] * len(_POSTING_COLUMNS))})"
        )
        # Each create of an intent writes one intent row (CHANGELOG.md, "Performance history": the
        # create-intent path); it goes the same way, with the id the database assigns.
        self.insert_intent = (
            f"INSERT INTO payment_intents ({', '.join(INTENT_WRITE_COLUMNS)}) "  # noqa: S608
            f"VALUES ({', '.join([mark] * len(INTENT_WRITE_COLUMNS))}) RETURNING id"
        )
        # dialect_impl: the type as this dialect stores it (SQLite: SQLAlchemy's own text format,
        # not sqlite3's deprecated default adapter). Every timestamp column has the same type.
        column_type = t.ledger_postings.c.created_at.type.dialect_impl(dialect)
        processor = column_type.bind_processor(dialect)
        self.bind_time: Callable[[datetime | None], Any] = processor or (lambda value: value)
        read = column_type.result_processor(dialect, None)
        self.read_time: Callable[[Any], datetime | None] = read or (lambda value: value)
        self._mark = mark
        self._with_heads: dict[int, str] = {}

    def insert_posting_with_heads(self, wallets: int) -> str:
        """:attr:`insert_posting` that also returns the history position (``created_at``,
        ``seq``) of the latest entry of each of ``wallets`` wallets, bound after the posting's
        values: ``NULL`` for a wallet without history.

        The journal's first posting carries this read so that it costs no round trip of its
        own. It must run after the accounts' ``UPDATE``: a statement started once the wallets'
        rows are locked sees every entry committed before (each was written under that lock),
        and no other can be added until this transaction ends.
        """
        statement = self._with_heads.get(wallets)
        if statement is None:
            mark = self._mark
            latest = (
                "(SELECT {column} FROM wallet_entries WHERE wallet_id = "  # noqa: S608
                f"{mark} ORDER BY created_at DESC, seq DESC LIMIT 1)"
            )
            heads = ", ".join(
                f"{latest.format(column='created_at')}, {latest.format(column='seq')}"
                for _ in range(wallets)
            )
            statement = self._with_heads[wallets] = f"{self.insert_posting} RETURNING {heads}"
        return statement

    def heads_params(self, wallet_ids: Sequence[str]) -> tuple[str, ...]:
        """The parameters :meth:`insert_posting_with_heads` binds after the posting's values."""
        return tuple(w for wallet_id in wallet_ids for w in (wallet_id, wallet_id))


_MOVEMENT_STATEMENTS: dict[str, MovementStatements] = {}


def movement_statements(dialect: Dialect) -> MovementStatements:
    """The movement statements of ``dialect``, rendered once."""
    statements = _MOVEMENT_STATEMENTS.get(dialect.name)
    if statements is None:
        statements = _MOVEMENT_STATEMENTS[dialect.name] = MovementStatements(dialect)
    return statements


# --- striped counters (stripes.py): a movement's delta added to one stripe row -----------------


class StripeStatements:
    """The SQL of striped counters for one dialect (both speak ``ON CONFLICT ... DO UPDATE``)."""

    def __init__(self, dialect: Dialect) -> None:
        mark = "?" if dialect.paramstyle == "qmark" else "%s"
        columns = ("account_id", "stripe", *LEDGER_COUNTERS)
        added = ", ".join(
            f"{c} = ledger_account_stripes.{c} + excluded.{c}" for c in LEDGER_COUNTERS
        )
        # Only table and column names from our own metadata are interpolated; values are bound.
        self.add = (
            f"INSERT INTO ledger_account_stripes ({', '.join(columns)}) "  # noqa: S608
            f"VALUES ({', '.join([mark] * len(columns))}) "
            f"ON CONFLICT (account_id, stripe) DO UPDATE SET {added}"
        )

    @staticmethod
    def params(account_id: str, stripe: int, d: CounterDelta) -> tuple[Any, ...]:
        """The parameters of :attr:`add` for ``d`` on ``stripe`` of ``account_id``."""
        return (
            account_id,
            stripe,
            d.debits_posted,
            d.credits_posted,
            d.debits_pending_holds,
            d.debits_pending_out,
            d.credits_pending,
        )


_STRIPE_STATEMENTS: dict[str, StripeStatements] = {}


def stripe_statements(dialect: Dialect) -> StripeStatements:
    """The statements for ``dialect``, built once."""
    statements = _STRIPE_STATEMENTS.get(dialect.name)
    if statements is None:
        statements = _STRIPE_STATEMENTS[dialect.name] = StripeStatements(dialect)
    return statements
