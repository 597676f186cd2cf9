"""Payment intents: indexed columns plus the intent as JSON; the database assigns ids."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import ColumnElement, Connection, bindparam, false, func, select, update
from sqlalchemy.exc import IntegrityError

from treasury_core.payments.intents import IntentFilter, PaymentIntent
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.hot import INTENT_WRITE_COLUMNS, HotQuery, movement_statements, raw_cursor
from treasury_sqlalchemy.integrity import is_unique_violation
from treasury_sqlalchemy.metadata_filter import metadata_where
from treasury_sqlalchemy.record_lists import intent_field_where

_INTENT_COLUMNS = select(t.payment_intents.c.id, t.payment_intents.c.body)
_INTENT_BY_ID = _INTENT_COLUMNS.where(t.payment_intents.c.id == bindparam("intent_id"))
_INTENT_BY_LOOKUP_ID = _INTENT_COLUMNS.where(
    t.payment_intents.c.lookup_id == bindparam("lookup_id")
)
_INTENT_OF_COMPANY = t.payment_intents.c.company_id == bindparam("company_id")


def _intent_query(query: Any, scoped: bool, locked: bool) -> Any:
    query = query.where(_INTENT_OF_COMPANY) if scoped else query
    return query.with_for_update() if locked else query


#: The intent lookups by (query, scoped to a company, FOR UPDATE), built once each: a statement
#: built per call costs SQLAlchemy a cache-key walk over a new expression every time.
_INTENT_QUERIES: dict[tuple[Any, bool, bool], HotQuery] = {
    (query, scoped, locked): HotQuery(_intent_query(query, scoped, locked))
    for query in (_INTENT_BY_ID, _INTENT_BY_LOOKUP_ID)
    for scoped in (False, True)
    for locked in (False, True)
}


@lru_cache(maxsize=1024)
def _parsed_intent(intent_id: int, body: str) -> PaymentIntent:
    """The intent stored as ``body``, parsed and validated once per distinct body.

    An intent is read far more often than it changes (status polls, the hosted page), and
    parsing and validating its JSON was most of a read's own cost. The stored text determines
    the intent completely and ``PaymentIntent`` is immutable (frozen, tuples only), so one
    parsed instance serves every read of the same text; a change writes a new body, which is a
    new key, never a stale answer.
    """
    return PaymentIntent.model_validate({**json.loads(body), "id": intent_id})


class SqlIntents:
    """Payment intents: indexed columns plus the intent as JSON; the database assigns ids."""

    def __init__(self, conn: Connection, lock_rows: bool) -> None:
        self._conn = conn
        self._lock_rows = lock_rows

    @staticmethod
    def _values(intent: PaymentIntent) -> dict[str, Any]:
        return {
            "company_id": intent.company_id,
            "account_id": intent.account_id,
            "status": intent.status.value,
            "lookup_id": intent.payment_intent_lookup_id,
            "created_at": intent.created_at,
            "body": intent.model_dump_json(exclude={"id"}),
        }

    @staticmethod
    def _intent(row: Sequence[Any]) -> PaymentIntent:
        intent_id, body = row
        return _parsed_intent(intent_id, body)

    def add(self, intent: PaymentIntent) -> PaymentIntent:
        """Insert ``intent``; a taken ``payment_intent_lookup_id`` raises :class:`ValueError`
        (on PostgreSQL the transaction is then aborted and must end)."""
        sql = movement_statements(self._conn.dialect)
        values = self._values(intent)
        values["created_at"] = sql.bind_time(intent.created_at)
        try:
            with raw_cursor(self._conn) as cursor:
                cursor.execute(sql.insert_intent, tuple(values[c] for c in INTENT_WRITE_COLUMNS))
                row = cursor.fetchone()
        except Exception as exc:
            if is_unique_violation(exc):
                raise ValueError(
                    f"duplicate payment intent lookup id {intent.payment_intent_lookup_id}"
                ) from exc
            raise
        assert row is not None  # RETURNING id answers one row
        return intent.model_copy(update={"id": row[0]})

    def _one(
        self, query: Any, params: dict[str, Any], company_id: int | None, for_update: bool
    ) -> PaymentIntent | None:
        if company_id is not None:
            params["company_id"] = company_id
        locked = for_update and self._lock_rows
        row = _INTENT_QUERIES[query, company_id is not None, locked].first(self._conn, params)
        return self._intent(row) if row is not None else None

    def get(
        self, intent_id: int, company_id: int | None, *, for_update: bool = False
    ) -> PaymentIntent | None:
        return self._one(_INTENT_BY_ID, {"intent_id": intent_id}, company_id, for_update)

    def by_lookup_id(
        self, lookup_id: str, company_id: int | None, *, for_update: bool = False
    ) -> PaymentIntent | None:
        return self._one(_INTENT_BY_LOOKUP_ID, {"lookup_id": lookup_id}, company_id, for_update)

    def update(self, intent: PaymentIntent) -> None:
        intents = t.payment_intents
        try:
            result = self._conn.execute(
                update(intents).where(intents.c.id == intent.id).values(self._values(intent))
            )
        except IntegrityError as exc:
            raise ValueError(
                f"duplicate payment intent lookup id {intent.payment_intent_lookup_id}"
            ) from exc
        if result.rowcount != 1:
            raise LookupError(f"no payment intent {intent.id}")

    def list(
        self, company_id: int, filters: IntentFilter, limit: int, starting_after: int | None
    ) -> list[PaymentIntent]:
        intents = t.payment_intents
        query = _INTENT_COLUMNS.where(*_intent_filter(company_id, filters))
        if starting_after is not None:
            query = query.where(intents.c.id < starting_after)
        query = query.order_by(intents.c.id.desc()).limit(limit)
        return [self._intent(r) for r in self._conn.execute(query)]

    def count(self, company_id: int, filters: IntentFilter) -> int:
        query = (
            select(func.count())
            .select_from(t.payment_intents)
            .where(*_intent_filter(company_id, filters))
        )
        return int(self._conn.execute(query).scalar_one())


_MAX_INT32 = 2**31 - 1


def _intent_filter(company_id: int, filters: IntentFilter) -> list[ColumnElement[bool]]:
    """The WHERE of :meth:`IntentFilter.matches`, for one company's intents."""
    intents = t.payment_intents
    where = [intents.c.company_id == company_id]
    if filters.status is not None:
        where.append(intents.c.status == filters.status.value)
    if filters.account_id is not None:
        # Account ids are 32-bit columns; a larger one names no account (and PostgreSQL would
        # refuse to compare it with an INTEGER parameter).
        where.append(
            intents.c.account_id == filters.account_id
            if filters.account_id <= _MAX_INT32
            else false()
        )
    if filters.created_gte is not None:
        where.append(intents.c.created_at >= filters.created_gte)
    if filters.created_lt is not None:
        where.append(intents.c.created_at < filters.created_lt)
    where.extend(intent_field_where(filters))
    where.extend(metadata_where(intents.c.body, filters.metadata))
    return where
