"""``python -m bench hot`` at a tiny scale: every contender runs through the services on
PostgreSQL, the ledger passes its invariants afterwards, and the rows come out."""

from __future__ import annotations

from bench import hot

from tests.conftest import postgres_url_or_skip


def test_the_bench_part_runs_and_reports() -> None:
    samples = hot.bench(count=hot.WORKERS, reps=1, url=postgres_url_or_skip())
    assert set(samples) == {
        "transfer_1",
        "transfer_8",
        "deposit_1",
        "deposit_8",
        "card_1",
        "card_8",
        "fx_1",
        "fx_8",
        "card_8_one",
    }
    rows = hot.rows(samples)
    judged = [r for r in rows if r.target]
    assert [r.target for r in judged] == [">= 0.9"] * 3 + [">= 0.8"]
    assert all(r.status in ("met", "MISSED") for r in judged)
