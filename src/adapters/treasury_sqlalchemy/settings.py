"""The SQL storage's settings: ``TREASURY_POOL_SIZE``.

- ``TREASURY_POOL_SIZE``: the connections (and worker threads) the storage keeps, 1 to 128,
  default 8; as many again may be opened beside them for a moment.

The URL (``TREASURY_DATABASE_URL``) is the core's: it picks the storage.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from treasury_core.config import AdapterSettings


class SqlSettings(AdapterSettings):
    """How the SQLite or PostgreSQL storage connects."""

    env_prefix: ClassVar[str] = "TREASURY_"

    pool_size: int = Field(default=8, ge=1, le=128, description="Connections/threads for storage.")
