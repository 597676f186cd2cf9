"""SQLAlchemy storage: SQLite (the embedded default) and PostgreSQL, schema owned by Alembic.

``SqlStorage`` is imported on first use, so loading this package's plugin (which every plugin
manager does) costs nothing for applications that never touch SQL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from treasury_sqlalchemy.storage import SqlStorage

__all__ = ["SqlStorage"]


def __getattr__(name: str) -> Any:
    if name == "SqlStorage":
        from treasury_sqlalchemy.storage import SqlStorage

        return SqlStorage
    raise AttributeError(f"module 'treasury_sqlalchemy' has no attribute {name!r}")
