"""Registers the SQLAlchemy storage under ``sqlalchemy`` (SQLAlchemy is imported only when used)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from treasury_core.config import AdapterSettings, TreasuryConfig
from treasury_core.plugins.hookspecs import StorageFactory, hookimpl
from treasury_core.ports.storage import Storage


def _sql(config: TreasuryConfig) -> Storage:
    try:
        from treasury_sqlalchemy.storage import SqlStorage
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "sqlalchemy":
            raise
        # The core install has no SQL libraries, and a bare "No module named" does not say
        # which extra brings them; a PostgreSQL URL needs its driver as well.
        extra = "postgres" if config.database_url.startswith("postgres") else "sql"
        raise ModuleNotFoundError(
            f"SQLite and PostgreSQL storage need SQLAlchemy: pip install 'treasury-core[{extra}]'",
            name=exc.name,
        ) from exc
    from treasury_sqlalchemy.settings import SqlSettings

    return SqlStorage(config.database_url, pool_size=config.adapter_settings(SqlSettings).pool_size)


@hookimpl
def register_storage() -> Mapping[str, StorageFactory]:
    """SQLite or PostgreSQL, by URL."""
    return {"sqlalchemy": _sql}


@hookimpl
def treasury_settings_models() -> Iterable[type[AdapterSettings]]:
    """``TREASURY_POOL_SIZE``: :class:`~treasury_sqlalchemy.settings.SqlSettings`."""
    from treasury_sqlalchemy.settings import SqlSettings

    return (SqlSettings,)
