"""The ``metadata[key]=value`` list filter as SQL (decisions.md, "Metadata").

Metadata lives inside each record's JSON document (one source of truth, read with the record),
so the filter is an expression over that document, one per dialect:

- PostgreSQL: ``CAST(body AS JSONB) -> 'metadata' @> :wanted``, the containment operator a GIN
  index over that same expression (``jsonb_path_ops``, migration 0013) answers for any key;
- SQLite: one ``EXISTS`` over ``json_each`` per pair, within the company's rows the other
  conditions of the query already narrow down (no index serves arbitrary keys there).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Boolean, Text, literal
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ColumnElement


class MetadataContains(ColumnElement[bool]):
    """True for rows whose metadata holds every pair of ``wanted``.

    ``document`` is a text column holding JSON; ``path`` names the member holding the metadata
    (``None``: the column is the metadata object itself).
    """

    type = Boolean()
    # Each filter's pairs differ; the statement is built per request and not worth caching.
    inherit_cache = False

    def __init__(
        self, document: ColumnElement[Any], wanted: Mapping[str, str], path: str | None
    ) -> None:
        self.document = document
        self.wanted = dict(wanted)
        self.path = path


def metadata_where(
    document: ColumnElement[Any], wanted: Mapping[str, str] | None, path: str | None = "metadata"
) -> list[ColumnElement[bool]]:
    """The WHERE conditions of a metadata filter (none for no filter)."""
    return [MetadataContains(document, wanted, path)] if wanted else []


@compiles(MetadataContains, "postgresql")
def _postgresql(element: MetadataContains, compiler: SQLCompiler, **kw: Any) -> str:
    document = compiler.process(element.document, **kw)
    wanted = compiler.process(literal(json.dumps(element.wanted), Text), **kw)
    # The expression must be spelled as migration 0013's index spells it for the index to
    # apply; the member name is a constant of the code, never user input.
    target = (
        f"(CAST({document} AS JSONB) -> '{element.path}')"
        if element.path
        else (f"CAST({document} AS JSONB)")
    )
    return f"({target} @> CAST({wanted} AS JSONB))"


@compiles(MetadataContains)
def _sqlite(element: MetadataContains, compiler: SQLCompiler, **kw: Any) -> str:
    document = compiler.process(element.document, **kw)
    source = (
        f"json_each({document}, '$.{element.path}')" if element.path else f"json_each({document})"
    )
    parts = []
    for key, value in element.wanted.items():
        # The key and the value are bound parameters; the rest is constants of the code.
        k = compiler.process(literal(key, Text), **kw)
        v = compiler.process(literal(value, Text), **kw)
        match = f"md.key = {k} AND md.value = {v}"
        parts.append(f"EXISTS (SELECT 1 FROM {source} AS md WHERE {match})")  # noqa: S608
    return "(" + " AND ".join(parts) + ")"
