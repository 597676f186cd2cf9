"""Running the Alembic migrations from code (``treasury migrate``, ``treasury serve``)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS = Path(__file__).parent / "migrations"
# Any fixed number: every process migrating the same PostgreSQL queues on this advisory lock.
_PG_MIGRATION_LOCK = 0x7472656173


def alembic_config() -> Config:
    """An Alembic config pointing at the packaged migrations."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Upgrade the database behind ``engine`` to ``revision``."""
    config = alembic_config()
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
        elif engine.dialect.name == "sqlite":
            # pysqlite is in autocommit mode here (see storage.py): without this, each DDL
            # statement would commit alone and two processes migrating at once would collide.
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (``None`` before the first migration)."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    """The newest revision shipped."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()
