"""Filtered record lists (:class:`treasury_core.listing.RecordFilter`) as SQL.

``status`` and the creation window are columns of ``treasury_records`` (indexed with the company
and kind, migration 0012). The other filters name fields of the record's JSON document: they
are read with the dialect's JSON operator (SQLite's ``json_extract``, PostgreSQL's ``->>``)
within the company's rows of the kind, which the index narrows the scan to.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from sqlalchemy import Connection, false, or_, select
from sqlalchemy.sql.elements import ColumnElement

from treasury_core.listing import DELETED, FILTER_FIELDS, RecordFilter
from treasury_core.movements.records import TreasuryRecord
from treasury_core.payments.intents import IntentFilter
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.document_field import DocumentField
from treasury_sqlalchemy.metadata_filter import metadata_where

R = TypeVar("R", bound=TreasuryRecord)


def _field_equals(
    name: str, value: Any, column: ColumnElement[Any] = t.treasury_records.c.body
) -> ColumnElement[bool]:
    return DocumentField(column, name) == str(value)


def record_where(kind: type[TreasuryRecord], filters: RecordFilter) -> list[ColumnElement[bool]]:
    """The WHERE of :meth:`RecordFilter.matches` for ``kind`` (without the company)."""
    records = t.treasury_records
    where: list[ColumnElement[bool]] = [records.c.kind == kind.prefix, records.c.status != DELETED]
    if filters.status is not None:
        where.append(records.c.status == filters.status)
    if filters.created_gte is not None:
        where.append(records.c.created_at >= filters.created_gte)
    if filters.created_lt is not None:
        where.append(records.c.created_at < filters.created_lt)
    attributes = FILTER_FIELDS.get(kind.prefix, {})
    for name, wanted in filters.field_filters().items():
        names = attributes.get(name)
        if not names:
            where.append(false())
            continue
        where.append(or_(*(_field_equals(a, wanted) for a in names)))
    where.extend(metadata_where(records.c.body, filters.metadata))
    return where


def record_page(
    conn: Connection,
    kind: type[R],
    company_id: int,
    filters: RecordFilter,
    limit: int,
    starting_after: str | None,
) -> list[R]:
    """Up to ``limit`` of the company's records of ``kind`` passing ``filters``, newest first."""
    records = t.treasury_records
    query = select(records.c.body).where(
        records.c.company_id == company_id, *record_where(kind, filters)
    )
    if starting_after is not None:
        query = query.where(records.c.id < starting_after)
    query = query.order_by(records.c.id.desc()).limit(limit)
    return [kind.model_validate(json.loads(body)) for body in conn.execute(query).scalars()]


def intent_field_where(filters: IntentFilter) -> list[ColumnElement[bool]]:
    """The WHERE of an intent filter's document fields (``merchant_reference`` and the like)."""
    body = t.payment_intents.c.body
    return [_field_equals(name, value, body) for name, value in filters.field_filters().items()]


def newest_first(statement: Any, id_column: Any, limit: int, starting_after: str | None) -> Any:
    """``statement`` ordered newest id first, ``limit`` rows below ``starting_after``."""
    if starting_after is not None:
        statement = statement.where(id_column < starting_after)
    return statement.order_by(id_column.desc()).limit(limit)
