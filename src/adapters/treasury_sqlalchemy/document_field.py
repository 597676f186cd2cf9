"""A member of a JSON document stored as text: the expression the list filters compare, and the
one the intents' field indexes are built on (migration 0016), so that the two are one."""

from __future__ import annotations

from typing import Any

from sqlalchemy import String, Text, literal
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ColumnElement


class DocumentField(ColumnElement[str]):
    """The text of member ``name`` of the JSON document in ``column`` (``NULL`` when absent).

    Spelled per dialect: SQLite's ``CAST`` to ``JSON`` would be a numeric cast, and PostgreSQL
    has no JSON operator on ``TEXT``. The member name is written into the SQL, not bound: an
    expression index (the intents' reference and e-mail) is only used when the query's
    expression is the index's, constant for constant; the names come from the code's filter
    tables, never from a request.
    """

    type = String()
    # Built per request with its own member name: not worth a compiled-statement cache entry.
    inherit_cache = False

    def __init__(self, column: ColumnElement[Any], name: str) -> None:
        self.column = column
        self.name = name


@compiles(DocumentField, "postgresql")
def _postgresql(element: DocumentField, compiler: SQLCompiler, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    name = compiler.process(literal(element.name, Text), **{**kw, "literal_binds": True})
    return f"(CAST({column} AS JSON) ->> {name})"


@compiles(DocumentField)
def _sqlite(element: DocumentField, compiler: SQLCompiler, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    path = compiler.process(literal(f'$."{element.name}"', Text), **{**kw, "literal_binds": True})
    # json_extract answers an integer member as an integer: compared as text, like PostgreSQL.
    return f"CAST(json_extract({column}, {path}) AS TEXT)"
