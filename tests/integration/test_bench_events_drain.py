"""``bench events-drain`` end to end at a tiny scale, so the benchmark cannot rot: real
backlogs built through the services, a real ``treasury serve`` on SQLite and real
``treasury worker`` processes on PostgreSQL delivering to the real receiver process.

The figures themselves are not checked (no timed assertions): that every delivery of each
backlog arrived, and that the report and the CPU accounting say what was measured.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from bench.events_drain import bench_drain, drain_details, drain_rows

ROOT = Path(__file__).resolve().parents[2]
POSTGRES_URL = os.environ.get("TREASURY_TEST_POSTGRES_URL")


@pytest.mark.skipif(
    not POSTGRES_URL,
    reason="TREASURY_TEST_POSTGRES_URL is not set: the drain's worker rows need PostgreSQL",
)
def test_the_drain_benchmark_runs_end_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # ``-m bench.events`` (the receiver) from the project's root
    result = bench_drain(12, postgres_url=POSTGRES_URL)

    assert result.postgres_problem is None
    assert [d.label for d in (result.sqlite, *result.postgres)] == [
        "SQLite, 1 server",
        "PostgreSQL, 1 worker",
        "PostgreSQL, 2 workers",
    ]
    for drain in (result.sqlite, *result.postgres):
        assert drain.complete, drain.label
        assert sorted(drain.arrived, key=int) == [str(n) for n in range(1, 13)]
        assert drain.rate > 0
        assert set(drain.cpu.seconds) >= {"deliverers", "receiver"}
    assert [d.processes for d in result.postgres] == [1, 2]
    # The workers' database backends were found by their application name.
    assert all("database" in d.cpu.seconds for d in result.postgres)
    assert result.bare_posts == 12

    rows = drain_rows(result)
    assert [row.measure for row in rows] == [
        "Events drain: bare aiohttp client, 12 signed bodies (32 in flight)",
        "Events drain: 12 due deliveries, one SQLite server",
        "Events drain: 12 due deliveries, PostgreSQL, 1 worker",
        "Events drain: 12 due deliveries, PostgreSQL, 2 workers",
    ]
    assert rows[1].ratio.endswith("of bare client")
    assert rows[3].ratio.endswith("x 1 worker")
    assert "not arrived" not in " ".join(row.figure for row in rows)
    assert len(drain_details(result)) == 3
