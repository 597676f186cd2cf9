"""The ledger workload through django-hordak, on PostgreSQL through psycopg2.

Runs inside hordak's own virtual environment (see ``bench/peers.py``), never in the benchmark's
process: treasury-core is not importable here, so the workload definition,
``bench/ledger_plan.py``, is loaded by file path and replayed exactly as ours replays it.

What is measured, and why it compares with ours:

- setup (untimed): a database of its own, ``bench_hordak_<random>``, created on the PostgreSQL
  server given by ``--postgres-url`` (the one our PostgreSQL rows use, with its own settings:
  ``synchronous_commit`` is reported, ``on`` by default, so each commit waits for its WAL
  flush as ours does); Django configured in code with hordak and its dependencies, hordak's
  migrations run (they install its triggers and balance functions); an Equity account and
  ``WALLETS`` Asset accounts, each funded with ``FUNDING`` by ``Account.transfer_to``;
- timed: ``count`` transfers, each ``source.transfer_to(target, Money(...))``: hordak's own
  transfer call, a Transaction and its two Legs in one ``transaction.atomic()`` (so one
  database transaction, checked by hordak's deferred balance trigger at commit), as each of
  ours is one transaction. Wall-clock and this process's CPU time are reported; PostgreSQL's
  own CPU time is not in the latter;
- timed: every wallet's balance read once: the account fetched by id and its
  ``get_balance()`` (hordak's per-account balance call);
- the balances are checked against ``expected_balances(count)``, and the database is dropped.

Amounts are USD (minor units / 100): hordak stores ``Money`` with two decimal places.

Prints one JSON line on stdout; anything else goes to stderr. Exits non-zero only when it
could not measure; wrong balances are a measurement, ``"balances_ok": false``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import secrets
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from importlib import metadata
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any
from urllib.parse import unquote, urlsplit

import psycopg2

#: The workload definition, next to this script's folder.
PLAN_PATH = Path(__file__).resolve().parent.parent / "ledger_plan.py"
#: The benchmark's PostgreSQL (the database named here is only used to create our own).
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
#: Minor units per USD.
CENTS = Decimal(100)
#: The packages whose versions the result records.
PACKAGES = ("django-hordak", "Django", "psycopg2-binary", "django-money", "py-moneyed")


def load_plan(path: Path) -> ModuleType:
    """``bench/ledger_plan.py`` as a module, loaded by path."""
    spec = importlib.util.spec_from_file_location("ledger_plan", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load the ledger plan from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def connection_params(url: str) -> dict[str, Any]:
    """psycopg2 / Django connection parameters from a ``postgresql://`` URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ValueError(f"not a PostgreSQL URL: {url}")
    return {
        "user": unquote(parts.username or "postgres"),
        "password": unquote(parts.password or ""),
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 5432,
        "dbname": unquote(parts.path.lstrip("/")) or "postgres",
    }


def _admin(params: dict[str, Any], sql: str) -> None:
    conn = psycopg2.connect(connect_timeout=10, **params)
    try:
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute(sql)
    finally:
        conn.close()


@contextmanager
def scratch_database(params: dict[str, Any]) -> Iterator[str]:
    """A fresh database ``bench_hordak_<random>`` on the server; dropped afterwards."""
    name = f"bench_hordak_{secrets.token_hex(4)}"
    _admin(params, f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        _admin(params, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def configure_django(params: dict[str, Any], database: str) -> None:
    """The least Django configuration hordak runs with, on ``database``."""
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        USE_TZ=True,
        TIME_ZONE="UTC",
        SECRET_KEY="bench-hordak",
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        INSTALLED_APPS=[
            "django.contrib.contenttypes",
            "django.contrib.auth",
            "mptt",
            "djmoney",
            "hordak",
        ],
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": database,
                "USER": params["user"],
                "PASSWORD": params["password"],
                "HOST": params["host"],
                "PORT": str(params["port"]),
            }
        },
        DEFAULT_CURRENCY="USD",
        CURRENCIES=["USD"],
        HORDAK_CURRENCIES=["USD"],
    )
    import django

    django.setup()


def measure(count: int, plan: ModuleType) -> dict[str, Any]:
    """Migrate, set up, run and check the workload on the configured database."""
    from django.core.management import call_command
    from django.db import connection
    from hordak.models import Account, AccountType
    from moneyed import Money

    setup_start = time.perf_counter()
    call_command("migrate", verbosity=0, interactive=False)
    equity = Account.objects.create(
        name="Funding", code="900", type=AccountType.equity, currencies=["USD"]
    )
    wallets = [
        Account.objects.create(
            name=f"Wallet {i}", code=f"{i:03d}", type=AccountType.asset, currencies=["USD"]
        )
        for i in range(plan.WALLETS)
    ]
    funding = Money(Decimal(plan.FUNDING) / CENTS, "USD")
    for wallet in wallets:
        equity.transfer_to(wallet, funding, description="funding")
    moves = [
        (wallets[s], wallets[t], Money(Decimal(a) / CENTS, "USD"))
        for s, t, a in plan.transfers(count)
    ]
    wallet_ids = [w.pk for w in wallets]
    setup_seconds = time.perf_counter() - setup_start

    cpu = time.process_time()
    start = time.perf_counter()
    for source, target, amount in moves:
        source.transfer_to(target, amount, description="bench transfer")
    transfer_seconds = time.perf_counter() - start
    transfer_cpu = time.process_time() - cpu

    cpu = time.process_time()
    start = time.perf_counter()
    balances = [Account.objects.get(pk=pk).get_balance() for pk in wallet_ids]
    read_seconds = time.perf_counter() - start
    read_cpu = time.process_time() - cpu

    with connection.cursor() as cursor:
        settings_in_force = {}
        for name in ("server_version", "synchronous_commit", "fsync", "wal_sync_method"):
            cursor.execute(f"SHOW {name}")
            settings_in_force[name] = cursor.fetchone()[0]
    connection.close()

    got = [balance["USD"].amount * CENTS for balance in balances]
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
            **{package: metadata.version(package) for package in PACKAGES},
            "postgresql": settings_in_force.pop("server_version"),
            "python": sys.version.split()[0],
        },
        "durability": settings_in_force,
    }


def _terminate(signum: int, _frame: FrameType | None) -> None:
    """Turn SIGTERM into an exit, so the scratch database is still dropped."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the workload once and print its JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="timed transfers")
    parser.add_argument("--postgres-url", default=DEFAULT_URL, help="the PostgreSQL server")
    parser.add_argument("--plan", type=Path, default=PLAN_PATH, help="path of ledger_plan.py")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    plan = load_plan(args.plan)
    params = connection_params(args.postgres_url)
    with scratch_database(params) as database:
        configure_django(params, database)
        try:
            result = measure(args.count, plan)
        finally:
            from django.db import connections

            connections.close_all()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
