"""``python -m bench statements`` at a tiny scale: its seeding is the ledger's own history, and
its rows come out.

The benchmark itself runs by hand (a million postings per backend); these check that the fast
seeding path writes exactly what the kernel and ``wallet_entries`` would, and that the whole
part (seed, check through the service, time, report) runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import pytest
from bench import statements

from tests.conftest import postgres_url_or_skip


def test_the_fast_seeding_equals_the_ledgers_own_history() -> None:
    planned: list[tuple[Any, ...]] = []
    fast: list[tuple[Any, ...]] = []
    # Past the month's 500 (so some history falls before and after it), not a whole cycle.
    a = statements.planned_history(1_003, lambda p, e: planned.append((p, e)))
    b = statements.fast_history(1_003, lambda p, e: fast.append((p, e)))
    assert fast == planned
    assert (a.balance, a.counters, a.middle) == (b.balance, b.counters, b.middle)
    times = [entry[-1] for _, entry in fast]
    assert times == sorted(times)
    in_month = [t for t in times if statements.MONTH_START <= t < statements.MONTH_END]
    assert len(in_month) == statements.MONTH


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_bench_part_runs_and_reports(backend: str) -> None:
    if backend == "sqlite":
        samples = statements.bench_sqlite(20, 600, 2, 3)
    else:
        samples = statements.bench_postgres(20, 600, 2, 3, postgres_url_or_skip())
    rows = statements.rows(backend, 20, 600, samples)
    assert len(rows) == 6
    assert [r.target for r in rows[1::2]] == ["<= 1.5x"] * 3
    assert all(r.status in ("met", "MISSED") for r in rows[1::2])
