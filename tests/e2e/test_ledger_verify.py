"""``treasury ledger verify`` as operators run it: a real process over a real database.

A ledger is built through the services (deposits, transfers in one and in two currencies, card
payments captured and held), then audited: a sound ledger exits 0 with a summary; the same
database damaged behind the service's back (a stored counter changed, a posting deleted, a
journal unbalanced, a pending movement's resolution lost) exits 1 and names each difference.
The audit function itself is also held to ``check_invariants`` and run against live writers.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.ledger import AccountKind, PendingStatus, PostingKind
from treasury_core.ledger.audit import AuditProgress, AuditReport, audit_ledger
from treasury_core.memory.storage import MemoryStorage
from treasury_core.movements.requests import CreateDepositRequest, CreateTransferRequest
from treasury_core.payments.intents import CaptureMethod, PaymentType
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports.card_provider import CardData
from treasury_core.testing.fakes.clock import FakeClock
from treasury_core.testing.invariants import ledger_violations, read_ledger
from treasury_core.wallets import CreateWalletRequest
from treasury_sqlalchemy.storage import normalize_url

TREASURY = [sys.executable, "-m", "treasury_aiohttp.cli"]
CARD = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="123")


@dataclass(frozen=True)
class Ledger:
    """What the built ledger holds, read back through the storage port."""

    url: str
    accounts: int
    postings: int
    pendings: int
    open_pendings: int
    usd_wallet: str
    usd_wallet_2: str


def verify(
    url: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``treasury ledger verify --database url`` as its own process."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")}
    return subprocess.run(
        [*TREASURY, "ledger", "verify", "--database", url, *args],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def build_ledger(url: str) -> Ledger:
    """A ledger with every kind of movement, made through the services on ``url``."""
    clock = FakeClock()
    treasury = bootstrap(
        TreasuryConfig(database_url=url, pool_size=2), clock=clock, wall_clock=clock
    )
    try:
        wallets = asyncio.run(_movements(treasury))
        return _describe(url, treasury, *wallets)
    finally:
        treasury.close()


async def _movements(treasury: Treasury) -> tuple[str, str]:
    created = await treasury.companies.create_company("Acme")
    company = created.company.id

    async def wallet(name: str, currency: str) -> str:
        made = await treasury.wallets.create(
            company, CreateWalletRequest(name=name, currency_id=currency)
        )
        return made.id

    usd, usd2, eur = await wallet("U", "USD"), await wallet("U2", "USD"), await wallet("E", "EUR")
    for amount in (5_000, 7_000):
        deposit = await treasury.deposits.create(
            company, CreateDepositRequest(wallet_id=usd, from_amount=amount, from_currency_id="USD")
        )
        await treasury.deposits.complete(None, deposit.id)
    # Still pending: the wallet shows it as pending_in.
    await treasury.deposits.create(
        company, CreateDepositRequest(wallet_id=usd2, from_amount=900, from_currency_id="USD")
    )
    await treasury.transfers.create(
        company, CreateTransferRequest(from_wallet_id=usd, to_wallet_id=usd2, from_amount=1_000)
    )
    settled = await treasury.transfers.create(
        company, CreateTransferRequest(from_wallet_id=usd, to_wallet_id=eur, from_amount=500)
    )
    await treasury.transfers.complete(None, settled.id)
    await treasury.transfers.create(  # reserved until the conversion settles
        company, CreateTransferRequest(from_wallet_id=usd, to_wallet_id=eur, from_amount=300)
    )
    for capture in (CaptureMethod.AUTOMATIC, CaptureMethod.MANUAL):
        intent = await treasury.payments.create(
            company,
            CreateIntentRequest(
                account_id=created.merchant_account.id,
                billing_amount=2_500,
                billing_currency="USD",
                payment_type=PaymentType.CARD_PAYMENT,
                capture_method=capture,
            ),
        )
        await treasury.payments.pay(intent.payment_intent_lookup_id, CARD)
    return usd, usd2


def _describe(url: str, treasury: Treasury, usd: str, usd2: str) -> Ledger:
    snapshot = read_ledger(treasury.storage)
    assert ledger_violations(snapshot) == []  # the services built a sound ledger
    kinds = {p.kind for p in snapshot.postings}
    # Every kind of posting is there for the audit to fold.
    assert {PostingKind.POSTED, PostingKind.PENDING, PostingKind.POST_PENDING} <= kinds
    by_id = {a.id: a for a in snapshot.accounts}
    assert by_id[usd].kind is AccountKind.WALLET
    open_pendings = sum(p.status.value == "pending" for p in snapshot.pendings)
    assert 0 < open_pendings < len(snapshot.pendings)
    return Ledger(
        url=url,
        accounts=len(snapshot.accounts),
        postings=len(snapshot.postings),
        pendings=len(snapshot.pendings),
        open_pendings=open_pendings,
        usd_wallet=usd,
        usd_wallet_2=usd2,
    )


@pytest.fixture(scope="module")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Ledger]:
    """One ledger built once; each test audits (and damages) its own copy."""
    path = tmp_path_factory.mktemp("ledger") / "template.db"
    return path, build_ledger(f"sqlite:///{path}")


@pytest.fixture
def sqlite_ledger(sqlite_template: tuple[Path, Ledger], tmp_path: Path) -> tuple[Path, Ledger]:
    source, ledger = sqlite_template
    copy = tmp_path / "treasury.db"
    # The backup API copies what is still in the WAL too, which a file copy could miss.
    with sqlite3.connect(source) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    return copy, Ledger(**{**ledger.__dict__, "url": f"sqlite:///{copy}"})


def damage(path: Path, *statements: str) -> None:
    """Change the database behind the service's back."""
    with sqlite3.connect(path) as conn:
        for statement in statements:
            assert conn.execute(statement).rowcount >= 1, statement
    conn.close()


def first(path: Path, query: str) -> str:
    with sqlite3.connect(path) as conn:
        row = conn.execute(query).fetchone()
    conn.close()
    assert row is not None, query
    return str(row[0])


def summary(ledger: Ledger) -> str:
    return (
        f"{ledger.accounts} accounts, {ledger.postings} postings, {ledger.pendings} pending "
        f"movements ({ledger.open_pendings} open)"
    )


def test_sound_ledger_exits_zero_with_a_summary(sqlite_ledger: tuple[Path, Ledger]) -> None:
    path, ledger = sqlite_ledger
    before = path.read_bytes()
    result = verify(ledger.url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"ledger sound: {summary(ledger)} in ")
    assert "no differences" in result.stdout
    assert result.stdout.count("\n") == 1
    assert path.read_bytes() == before  # an audit writes nothing

    as_json = verify(ledger.url, "--json")
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["ok"] is True
    assert report["differences"] == []
    assert (report["accounts"], report["postings"]) == (ledger.accounts, ledger.postings)
    assert (report["pending_movements"], report["open_pending_movements"]) == (
        ledger.pendings,
        ledger.open_pendings,
    )
    assert {"EUR", "USD"} <= set(report["currencies"])


def test_progress_bar_on_a_terminal_goes_to_stderr(sqlite_ledger: tuple[Path, Ledger]) -> None:
    _, ledger = sqlite_ledger
    # FORCE_COLOR makes rich treat the pipe as a terminal, as an operator's shell would be.
    shown = verify(ledger.url, "--page-size", "3", "--json", env={"FORCE_COLOR": "1"})
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["ok"] is True  # stdout stays clean for the report
    for line in ("accounts", "postings", "pending movements"):
        assert line in shown.stderr
    assert f"{ledger.postings}/{ledger.postings}" in shown.stderr
    # In a log (stderr not a terminal) there is no bar at all.
    assert verify(ledger.url).stderr == ""


def test_changed_counter_is_named(sqlite_ledger: tuple[Path, Ledger]) -> None:
    path, ledger = sqlite_ledger
    damage(
        path,
        "UPDATE ledger_accounts SET credits_posted = credits_posted + 1 "
        f"WHERE id = '{ledger.usd_wallet}'",
    )
    result = verify(ledger.url)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("ledger differs: 2 difference(s) in ")
    assert f"[3] account {ledger.usd_wallet}: stored credits_posted is" in result.stdout
    assert "[2] USD: posted credits - debits over all accounts is 1, not 0" in result.stdout


def test_deleted_posting_is_named(sqlite_ledger: tuple[Path, Ledger]) -> None:
    path, ledger = sqlite_ledger
    posting = first(
        path,
        "SELECT id FROM ledger_postings WHERE kind = 'posted' "
        f"AND credit_account_id = '{ledger.usd_wallet_2}'",
    )
    damage(path, f"DELETE FROM ledger_postings WHERE id = '{posting}'")
    result = verify(ledger.url, "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["postings"] == ledger.postings - 1
    stale = [d for d in report["differences"] if d.startswith(f"[3] account {ledger.usd_wallet_2}")]
    assert stale == [
        f"[3] account {ledger.usd_wallet_2}: stored credits_posted is 1000, its postings fold to 0"
    ]


def test_unbalanced_journal_is_named(sqlite_ledger: tuple[Path, Ledger]) -> None:
    path, ledger = sqlite_ledger
    # One leg of the USD -> USD transfer relabelled EUR: USD no longer balances in that journal.
    posting = first(
        path,
        "SELECT id FROM ledger_postings WHERE kind = 'posted' "
        f"AND debit_account_id = '{ledger.usd_wallet}' "
        f"AND credit_account_id = '{ledger.usd_wallet_2}'",
    )
    damage(path, f"UPDATE ledger_postings SET currency = 'EUR' WHERE id = '{posting}'")
    result = verify(ledger.url)
    assert result.returncode == 1
    assert (
        f"[1] posting {posting} (posted) is in EUR but its debit account {ledger.usd_wallet} "
        "holds USD" in result.stdout
    )
    assert f"its credit account {ledger.usd_wallet_2} holds USD" in result.stdout


def test_lost_resolution_is_named(sqlite_ledger: tuple[Path, Ledger]) -> None:
    path, ledger = sqlite_ledger
    pending = first(path, "SELECT id FROM ledger_pendings WHERE status = 'posted'")
    damage(path, f"DELETE FROM ledger_postings WHERE pending_id = '{pending}'")
    result = verify(ledger.url)
    assert result.returncode == 1
    assert (
        f"[6] pending movement {pending} (posted) must have exactly one resolution posting, "
        "has: none" in result.stdout
    )


def test_cannot_run_is_exit_two_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.db"
    result = verify(str(missing))
    assert result.returncode == 2
    assert f"no database at {missing}" in result.stderr
    assert not missing.exists()

    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    result = verify(str(empty))
    assert result.returncode == 2
    assert "cannot read the ledger" in result.stderr
    assert "treasury migrate" in result.stderr


def test_a_bad_setting_is_exit_two(sqlite_ledger: tuple[Path, Ledger]) -> None:
    # The audit did not run, which exit status 1 ("differences found") would claim.
    path, _ = sqlite_ledger
    result = verify(str(path), env={"TREASURY_POOL_SIZE": "eight"})
    assert result.returncode == 2, result.stderr
    assert "TREASURY_POOL_SIZE='eight'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_postgres_sound_then_damaged(postgres_url: str) -> None:
    ledger = build_ledger(postgres_url)
    result = verify(postgres_url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"ledger sound: {summary(ledger)} in ")

    engine = create_engine(normalize_url(postgres_url))
    try:
        with engine.begin() as conn:
            conn.execute(
                text("UPDATE ledger_accounts SET debits_pending_out = 7 WHERE id = :id"),
                {"id": ledger.usd_wallet_2},
            )
    finally:
        engine.dispose()
    damaged = verify(postgres_url)
    assert damaged.returncode == 1
    assert f"[3] account {ledger.usd_wallet_2}: stored debits_pending_out is 7" in damaged.stdout
    assert (
        f"[6] account {ledger.usd_wallet_2}: debits_pending_out is 7, its open pending "
        "movements reserve 0" in damaged.stdout
    )


# The audit function itself -------------------------------------------------------------------


@pytest.fixture
def memory_ledger() -> Iterator[Treasury]:
    clock = FakeClock()
    treasury = bootstrap(TreasuryConfig(database_url="memory://"), clock=clock, wall_clock=clock)
    asyncio.run(_movements(treasury))
    yield treasury
    treasury.close()


def _lower_a_counter(storage: MemoryStorage) -> None:
    accounts = storage._state.accounts
    some = next(a for a in accounts.values() if a.debits_posted)
    accounts[some.id] = replace(some, debits_posted=some.debits_posted - 3)


def _drop_a_posting(storage: MemoryStorage) -> None:
    storage._state.postings.pop(0)


def _reopen_a_resolved_pending(storage: MemoryStorage) -> None:
    pendings = storage._state.pendings
    done = next(p for p in pendings.values() if p.resolved_by)
    pendings[done.id] = replace(done, status=PendingStatus.PENDING, resolved_by=None)


def _relabel_a_posting(storage: MemoryStorage) -> None:
    postings = storage._state.postings
    postings[-1] = replace(postings[-1], currency="JPY")


# Corruptions are edits of a MemoryStorage's state behind the port's back, as in
# tests/unit/test_invariants.py: what a buggy adapter or kernel would leave.
CORRUPTIONS = [_lower_a_counter, _drop_a_posting, _reopen_a_resolved_pending, _relabel_a_posting]


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=lambda f: f.__name__.lstrip("_"))
@pytest.mark.parametrize("page_size", [1, 4, 1_000])
def test_audit_finds_what_check_invariants_finds(
    memory_ledger: Treasury, corrupt: Callable[[MemoryStorage], None], page_size: int
) -> None:
    storage = memory_ledger.storage
    assert isinstance(storage, MemoryStorage)
    assert audit_ledger(storage, page_size=page_size).ok
    corrupt(storage)
    report = audit_ledger(storage, page_size=page_size)
    assert not report.ok
    # Whole-ledger and paged audits agree, difference for difference.
    assert sorted(report.differences) == sorted(ledger_violations(read_ledger(storage)))


def test_progress_reaches_every_row(memory_ledger: Treasury) -> None:
    seen: list[AuditProgress] = []
    report = audit_ledger(memory_ledger.storage, page_size=3, progress=seen.append)
    last = {step.stage: step for step in seen}
    assert [s for s in dict.fromkeys(step.stage for step in seen)] == [
        "accounts",
        "postings",
        "pendings",
    ]
    assert (last["accounts"].done, last["accounts"].total) == (report.accounts,) * 2
    assert (last["postings"].done, last["postings"].total) == (report.postings,) * 2
    assert (last["pendings"].done, last["pendings"].total) == (report.pending_movements,) * 2
    postings = [step.done for step in seen if step.stage == "postings"]
    assert postings == sorted(postings) and len(postings) > 2  # page by page


def test_live_writers_never_cause_a_false_alarm(postgres_url: str) -> None:
    """Audits run while transfers commit: one snapshot, so counters and postings always agree."""
    ledger = build_ledger(postgres_url)
    clock = FakeClock()
    treasury = bootstrap(
        TreasuryConfig(database_url=postgres_url, pool_size=2), clock=clock, wall_clock=clock
    )
    stop = threading.Event()
    moved: list[int] = []
    company = treasury.storage.run_sync(
        lambda uow: uow.ledger.get_account(ledger.usd_wallet), write=False
    )
    assert company is not None and company.company_id is not None

    def write() -> None:
        async def loop() -> None:
            pair = (ledger.usd_wallet, ledger.usd_wallet_2)
            while not stop.is_set():
                await treasury.transfers.create(
                    company.company_id,  # type: ignore[arg-type]
                    CreateTransferRequest(
                        from_wallet_id=pair[0], to_wallet_id=pair[1], from_amount=1
                    ),
                )
                moved.append(1)
                pair = pair[::-1]

        asyncio.run(loop())

    writer = threading.Thread(target=write)
    writer.start()
    try:
        reports: list[AuditReport] = []
        # Enough audits that writes land between and during them (checked below).
        while writer.is_alive() and (len(moved) < 40 or len(reports) < 5):
            reports.append(audit_ledger(treasury.storage, page_size=2))
    finally:
        stop.set()
        writer.join(timeout=60)
        treasury.close()
    assert len(moved) >= 40, "the writer stopped early"
    assert [r.differences for r in reports] == [()] * len(reports)
    # The audits saw the ledger grow: they really ran among the writes.
    assert len({r.postings for r in reports}) > 1
