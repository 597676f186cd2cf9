"""``python -m bench dashboard`` at a tiny scale: the seed is a ledger ``treasury ledger verify``
accepts, the seeded company sees its intents and wallet through the services, and the whole
part (seed, verify, serve, sign in, time each page from the access log, report) runs.

The benchmark itself runs by hand (100k intents, 1M postings); no figure is asserted here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bench import dashboard

from treasury_core import TreasuryConfig, bootstrap
from treasury_core.payments.intents import IntentFilter


def test_the_seed_is_a_sound_ledger_the_services_read(tmp_path: Path) -> None:
    seeded = dashboard.seed(tmp_path / "d.db", 250, 1_003)
    assert "ledger sound" in dashboard.check_ledger(seeded.url)
    assert "1003 postings" in dashboard.check_ledger(seeded.url)
    treasury = bootstrap(TreasuryConfig(database_url=seeded.url))
    try:
        principal = asyncio.run(treasury.companies.authenticate(seeded.secret_key))
        company = principal.company_id
        page = asyncio.run(treasury.payments.list(company, IntentFilter(), limit=100))
        assert page.items[0].id == seeded.intent_id  # newest first
        assert all(i.company_id == company for i in page.items)
        wallet = asyncio.run(treasury.wallets.get(company, seeded.wallet_id))
        balance = treasury.storage.run_sync(
            lambda uow: uow.ledger.get_account(seeded.wallet_id), write=False
        )
        assert balance is not None and balance.balance > 0
        assert wallet.currency == "USD"
    finally:
        treasury.close()


def test_the_part_runs_and_reports_every_page() -> None:
    phases: list[str] = []

    def step(label: str, fn: Any) -> Any:
        phases.append(label)
        return fn()

    rows, note = dashboard.bench(120, 400, 2, step)
    assert phases == ["dashboard seed", "ledger verify", "dashboard pages"]
    assert "ledger sound" in note
    assert len(rows) == 12  # every page of the URL contract, filters included
    for row in rows:
        assert row.measure.startswith("dashboard "), row
        assert "(p95 " in row.figure and "2 requests" in row.figure, row
