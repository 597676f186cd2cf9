"""The plugin's tests run users' test files through ``pytester``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def warm_imports(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Import, once in this process, everything the fixtures import lazily.

    An in-process ``pytester`` run puts ``sys.modules`` back as it found it afterwards, so
    modules first imported inside a run are dropped while objects of theirs live on elsewhere
    (cryptography's and SQLAlchemy's compiled parts then fail their own type checks in the next
    run). Imported here first, they are part of what is put back.
    """
    import treasury_aiohttp.app
    import treasury_aiohttp.server  # noqa: F401
    from treasury_core import TreasuryConfig, bootstrap

    path: Path = tmp_path_factory.mktemp("warm") / "warm.db"
    treasury = bootstrap(TreasuryConfig(database_url=f"sqlite:///{path}"))
    try:
        asyncio.run(treasury.companies.create_company("Warm-up"))
    finally:
        treasury.close()
