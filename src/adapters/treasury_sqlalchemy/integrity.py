"""What a database error means, across the two drivers."""

from __future__ import annotations

import sqlite3


def is_unique_violation(error: Exception) -> bool:
    """Whether ``error`` is a unique-key violation."""
    # Raw DBAPI errors from the hot path: sqlite3's IntegrityError, psycopg's SQLSTATE 23505.
    return isinstance(error, sqlite3.IntegrityError) or getattr(error, "sqlstate", None) == "23505"
