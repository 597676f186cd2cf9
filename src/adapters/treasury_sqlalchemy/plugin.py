"""Registers the SQLAlchemy storage under ``sqlalchemy`` (SQLAlchemy is imported only when used)."""

from __future__ import annotations

from collections.abc import Mapping

from treasury_core.config import TreasuryConfig
from treasury_core.plugins.hookspecs import StorageFactory, hookimpl
from treasury_core.ports.storage import Storage


def _sql(config: TreasuryConfig) -> Storage:
    from treasury_sqlalchemy.storage import SqlStorage

    return SqlStorage(config.database_url, pool_size=config.pool_size)


@hookimpl
def register_storage() -> Mapping[str, StorageFactory]:
    """SQLite or PostgreSQL, by URL."""
    return {"sqlalchemy": _sql}
