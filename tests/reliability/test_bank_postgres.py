"""The bank test of ``test_bank.py`` on three servers and two workers over one PostgreSQL schema.

A file of its own so that pytest-xdist, which keeps a file's tests on one worker, runs it beside
the SQLite run instead of after it: the two are the suite's longest tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.test_bank import Deployment, deployment, run_bank_test


@pytest.fixture
def postgres_bank(postgres_url: str, tmp_path: Path) -> Iterator[Deployment]:
    # The URL carries the private schema (``options=-csearch_path=…``): every process shares it.
    with deployment(postgres_url, 3, tmp_path, workers=2) as bank:
        yield bank


@pytest.mark.postgres
@pytest.mark.timeout(900)
async def test_bank_three_servers_two_workers_on_postgresql(postgres_bank: Deployment) -> None:
    await run_bank_test(postgres_bank)
