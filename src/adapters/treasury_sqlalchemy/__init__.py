"""SQLAlchemy storage: SQLite (the embedded default) and PostgreSQL, schema owned by Alembic."""

from treasury_sqlalchemy.storage import SqlStorage

__all__ = ["SqlStorage"]
