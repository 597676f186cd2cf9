"""The property-testing guide's example runs, finds its planted bug, and the guide shows that run.

``examples/property_testing`` is the code of ``docs/guides/property-testing.md``: a storage adapter
with a boundary bug in its expiry query, and the property tests that find it. These tests run the
example's suite exactly as the guide tells readers to, and check that the failing example the
guide quotes is the one Hypothesis prints today, so the page cannot silently go stale.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

from treasury_core.ledger import (
    Account,
    AccountKind,
    ExpirePending,
    Journal,
    PendingCategory,
    Reserve,
)
from treasury_core.ports import Storage, UnitOfWork

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "property_testing"
GUIDE = ROOT / "docs" / "guides" / "property-testing.md"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _shop_storage_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("shop_storage", EXAMPLE / "shop_storage.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hold_due_at(storage: Storage, deadline: datetime) -> list[str]:
    """Place a hold with ``deadline``; the ids the expiry query returns exactly at it."""

    def open_and_hold(uow: UnitOfWork) -> None:
        uow.ledger.open_account(Account("world", "EUR", AccountKind.WORLD))
        uow.ledger.open_account(
            Account("w", "EUR", AccountKind.WALLET, company_id=1, guarded=True, overdraft_limit=5)
        )
        hold = Reserve("w", "world", "EUR", 5, PendingCategory.HOLD, deadline)
        uow.ledger.apply(Journal("j1", (hold,)), T0)

    storage.run_sync(open_and_hold)
    due = storage.run_sync(lambda uow: uow.ledger.due_pendings(deadline, 10), write=False)
    return [p.id for p in due]


def test_the_planted_bug_is_the_boundary_of_the_expiry_query() -> None:
    shop = _shop_storage_module()
    deadline = T0 + timedelta(minutes=15)
    assert _hold_due_at(shop.ShopStorage(), deadline) == []
    fixed = shop.FixedShopStorage()
    assert _hold_due_at(fixed, deadline) == ["j1.0"]
    # The fixed storage's answer is one the ledger accepts: at the deadline, expiry is allowed.
    fixed.run_sync(lambda uow: uow.ledger.apply(Journal("j2", (ExpirePending("j1.0"),)), deadline))


def _run_example_suite() -> str:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(EXAMPLE), "-p", "no:cacheprovider", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr  # 1: some tests failed
    return result.stdout


def _falsifying_example(output: str) -> list[str]:
    """The lines of Hypothesis's failing test case, without pytest's ``E`` prefix."""
    lines = [line.removeprefix("E").strip() for line in output.splitlines()]
    start = lines.index("Failing test case: <state machine>")
    end = lines.index("state.teardown()", start)
    return lines[start + 1 : end + 1]


def test_the_kit_finds_the_bug_the_fix_passes_and_the_guide_quotes_the_run() -> None:
    output = _run_example_suite()
    # Only the machine on the buggy storage fails; the fixed storage and the program test pass.
    assert "1 failed, 2 passed" in output, output
    assert "FAILED examples/property_testing/test_shop_storage.py::TestShopLedger::runTest" in (
        output
    )
    assert "AssertionError: storage finds due [], model ['j000001.0']" in output, output
    example = _falsifying_example(output)
    # Shrunk to a hold and one scheduler tick: the shortest way to meet a deadline exactly.
    assert [line for line in example if line.startswith("state.") and "(" in line] == [
        "state.open_ledger(data=data(...))",
        "state.ledger_is_sound_and_matches_model()",
        "state.checkout(data=data(...))",
        "state.ledger_is_sound_and_matches_model()",
        "state.scheduler_tick()",
        "state.teardown()",
    ]
    guide = GUIDE.read_text(encoding="utf-8")
    # The guide quotes the run: its steps, in order. (Not the drawn values word for word: how
    # Hypothesis prints them may change between its releases while the bug found stays the same.)
    at = 0
    for step in (line for line in example if line.startswith("state.")):
        found = guide.find(step, at)
        assert found >= 0, f"the guide's failing example lacks {step!r} (today's output)"
        at = found + len(step)
    assert "AssertionError: storage finds due [], model ['j000001.0']" in guide
