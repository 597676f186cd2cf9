"""The ledger workload through python-accounting, on an SQLite file in WAL mode, synchronous=FULL.

Runs inside python-accounting's own virtual environment (see ``bench/peers.py``), never in the
benchmark's process: treasury-core is not importable here, so the workload definition,
``bench/ledger_plan.py``, is loaded by file path and replayed exactly as ours replays it.

What is measured, and why it compares with ours:

- setup (untimed): an SQLite file in a fresh temporary directory, every connection set to
  ``journal_mode=WAL`` and ``synchronous=FULL`` (what our SQLite storage uses, so each commit is
  as durable), the library's tables created from its models, an Entity (which opens its
  reporting period), a USD Currency, an Equity account and ``WALLETS`` Bank accounts, each
  funded with ``FUNDING`` by a Journal Entry from the Equity account;
- timed: ``count`` transfers, each the library's normal two-account transaction, a Journal Entry
  whose main account (credited) is the source and whose single line item (debited) is the
  target, posted to the ledger; ``post`` commits the session, so each transfer is one database
  transaction, as each of ours is. Wall-clock and this process's CPU time are reported (SQLite
  runs in-process, so its work is in the CPU figure);
- timed: every wallet's balance read once: the account looked up by id and its
  ``closing_balance`` (the library's balance call: opening balance plus ledger movement);
- the balances are checked against ``expected_balances(count)``.

Amounts are USD (minor units / 100) because the library stores ``DECIMAL(13, 4)``.

Prints one JSON line on stdout; anything else goes to stderr. Exits non-zero only when it
could not measure; wrong balances are a measurement, ``"balances_ok": false``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
import sqlite3
import sys
import tempfile
import time
from datetime import datetime
from decimal import Decimal
from importlib import metadata
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from python_accounting.database.session import get_session
from python_accounting.models import Account, Base, Currency, Entity, LineItem
from python_accounting.transactions import JournalEntry
from sqlalchemy import Engine, create_engine, event

#: The workload definition, next to this script's folder.
PLAN_PATH = Path(__file__).resolve().parent.parent / "ledger_plan.py"
#: Minor units per USD.
CENTS = Decimal(100)


def load_plan(path: Path) -> ModuleType:
    """``bench/ledger_plan.py`` as a module, loaded by path."""
    spec = importlib.util.spec_from_file_location("ledger_plan", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load the ledger plan from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def durable_engine(path: Path) -> Engine:
    """An engine on the SQLite file ``path`` whose every connection uses WAL and FULL sync."""
    engine = create_engine(f"sqlite:///{path}")

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.close()

    return engine


def journal_entry(
    session: Any, entity_id: int, credit_id: int, debit_id: int, amount: Decimal
) -> None:
    """Post ``amount`` from ``credit_id`` to ``debit_id`` as a Journal Entry (commits)."""
    entry = JournalEntry(
        narration="bench transfer",
        transaction_date=datetime.now(),
        account_id=credit_id,
        entity_id=entity_id,
    )
    session.add(entry)
    session.flush()
    line = LineItem(
        narration="bench transfer",
        account_id=debit_id,
        amount=amount,
        entity_id=entity_id,
    )
    session.add(line)
    session.flush()
    entry.line_items.add(line)
    session.add(entry)
    entry.post(session)


def measure(count: int, directory: Path, plan: ModuleType) -> dict[str, Any]:
    """Set up, run and check the workload on an SQLite file in ``directory``."""
    engine = durable_engine(directory / "accounting.db")
    setup_start = time.perf_counter()
    Base.metadata.create_all(engine)
    with get_session(engine) as session:
        entity = Entity(name="Bench")
        session.add(entity)
        session.commit()
        entity_id = entity.id
        currency = Currency(name="US Dollars", code="USD", entity_id=entity_id)
        session.add(currency)
        session.commit()
        equity = Account(
            name="Funding",
            account_type=Account.AccountType.EQUITY,
            currency_id=currency.id,
            entity_id=entity_id,
        )
        wallets = [
            Account(
                name=f"Wallet {i}",
                account_type=Account.AccountType.BANK,
                currency_id=currency.id,
                entity_id=entity_id,
            )
            for i in range(plan.WALLETS)
        ]
        session.add_all([equity, *wallets])
        session.commit()
        equity_id = equity.id
        wallet_ids = [w.id for w in wallets]
        funding = Decimal(plan.FUNDING) / CENTS
        for wallet_id in wallet_ids:
            journal_entry(session, entity_id, equity_id, wallet_id, funding)
        moves = [
            (wallet_ids[s], wallet_ids[t], Decimal(a) / CENTS) for s, t, a in plan.transfers(count)
        ]
        setup_seconds = time.perf_counter() - setup_start

        cpu = time.process_time()
        start = time.perf_counter()
        for source_id, target_id, amount in moves:
            journal_entry(session, entity_id, source_id, target_id, amount)
        transfer_seconds = time.perf_counter() - start
        transfer_cpu = time.process_time() - cpu

        cpu = time.process_time()
        start = time.perf_counter()
        balances = [
            session.get(Account, wallet_id).closing_balance(session) for wallet_id in wallet_ids
        ]
        read_seconds = time.perf_counter() - start
        read_cpu = time.process_time() - cpu

        pragmas = session.connection().exec_driver_sql("PRAGMA journal_mode").scalar()
        sync = session.connection().exec_driver_sql("PRAGMA synchronous").scalar()
    engine.dispose()

    got = [Decimal(b) * CENTS for b in balances]
    expected = plan.expected_balances(count)
    ok = all(g == g.to_integral_value() and int(g) == e for g, e in zip(got, expected, strict=True))
    if not ok:
        bad = [(i, str(g), e) for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e]
        print(f"balance mismatches (index, got, expected): {bad[:5]}", file=sys.stderr)
    return {
        "transfers": count,
        "transfer_seconds": transfer_seconds,
        "transfer_cpu_seconds": transfer_cpu,
        "read_seconds": read_seconds,
        "read_cpu_seconds": read_cpu,
        "setup_seconds": setup_seconds,
        "balances_ok": ok,
        "versions": {
            "python-accounting": metadata.version("python-accounting"),
            "SQLAlchemy": metadata.version("SQLAlchemy"),
            "sqlite": sqlite3.sqlite_version,
            "python": sys.version.split()[0],
        },
        "durability": {"journal_mode": pragmas, "synchronous": sync},
    }


def _terminate(signum: int, _frame: FrameType | None) -> None:
    """Turn SIGTERM into an exit, so the temporary directory is still removed."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the workload once and print its JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="timed transfers")
    parser.add_argument("--plan", type=Path, default=PLAN_PATH, help="path of ledger_plan.py")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    plan = load_plan(args.plan)
    with tempfile.TemporaryDirectory(prefix="bench-accounting-") as directory:
        result = measure(args.count, Path(directory), plan)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
