"""Registers the in-memory storage under the name ``memory``."""

from __future__ import annotations

from collections.abc import Mapping

from treasury_core.config import TreasuryConfig
from treasury_core.plugins.hookspecs import StorageFactory, hookimpl
from treasury_core.ports.storage import Storage


def _memory(config: TreasuryConfig) -> Storage:
    from treasury_core.memory.storage import MemoryStorage

    return MemoryStorage()


@hookimpl
def register_storage() -> Mapping[str, StorageFactory]:
    """The in-memory storage."""
    return {"memory": _memory}
