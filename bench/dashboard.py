"""Dashboard pages at volume (issue 27): server time per page with 100k intents and 1M postings.

Seeding (:func:`seed`), on an SQLite file migrated by ``bootstrap``:

- the company, its merchant account and its keys through ``CompanyService``, a USD wallet
  through ``WalletService`` (so its guarded ledger account is the service's);
- ``intents`` payment intents, unpaid links (``INITIALIZED``) created over the last 30 days of
  business time, built as ``PaymentService.create`` builds them and written in batches through
  the storage port (``uow.intents.add``): the service's own write costs about a millisecond an
  intent with its event and expiry job, minutes for 100k. Unpaid, they move no money, so the
  ledger stays what the postings below make it;
- ``postings`` postings of that wallet's history, bulk-inserted exactly as ``python -m bench
  statements`` does (:func:`bench.statements.seed_sqlite`: every journal balanced, wallet
  entries from the kernel's own function, account counters the fold of the postings). The
  seeded file passes ``treasury ledger verify`` (:func:`check_ledger`).

Measuring (:func:`measure`): ``treasury serve`` runs as its own process on the file; a client
signs in to the dashboard (``POST /dashboard/login``) and requests each page ``count`` times,
the pages interleaved. Server time is the duration the server's access log writes for each
request (aiohttp's time from the request's arrival to the response's end, in the server
process), matched to the request by its path and order; the client's round trip is not used.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from statistics import median
from typing import Any
from urllib.parse import urlencode

import aiohttp

from bench.report import Row, verdict
from bench.statements import FEES, WORLD, seed_sqlite
from treasury_core import TreasuryConfig, bootstrap
from treasury_core.payments import PaymentIntent
from treasury_core.ports.storage import UnitOfWork
from treasury_core.services.payments import new_lookup_id
from treasury_core.testing.fakes.clock import FakeClock
from treasury_core.wallets import CreateWalletRequest

#: The issue's volume, and timed requests per page.
INTENTS, POSTINGS, REQUESTS = 100_000, 1_000_000, 50
#: The target: every page's p95 server time under this many milliseconds.
TARGET_MS = 200.0
_BATCH = 10_000
_LOG_LINE = re.compile(r'"GET (\S+) HTTP/[\d.]+" (\d{3}) \S+ ([\d.]+)s')


@dataclass(frozen=True, slots=True)
class Seeded:
    """What :func:`seed` made: the database, the company's secret key, ids to open."""

    url: str
    now: datetime
    secret_key: str
    wallet_id: str
    intent_id: int
    intents: int
    postings: int


def seed(path: Path, intents: int, postings: int) -> Seeded:
    """Seed the SQLite file ``path`` (see the module docstring)."""
    url = f"sqlite:///{path}"
    # Real time: the server's sandbox clock starts at it, so the home page's last 24 hours
    # hold the newest intents.
    now = datetime.now(UTC)
    treasury = bootstrap(TreasuryConfig(database_url=url), clock=FakeClock(now))
    try:
        loop = asyncio.new_event_loop()
        try:
            created = loop.run_until_complete(treasury.companies.create_company("Bench Ltd"))
            company = created.company.id
            wallet = loop.run_until_complete(
                treasury.wallets.create(
                    company, CreateWalletRequest(name="Operating", currency_id="USD")
                )
            )
        finally:
            loop.close()
        storage = treasury.storage

        def open_accounts(uow: UnitOfWork) -> None:
            for account in (WORLD, FEES):
                uow.ledger.ensure_account(account)

        def add(drafts: list[PaymentIntent]) -> Callable[[UnitOfWork], list[PaymentIntent]]:
            return lambda uow: [uow.intents.add(i) for i in drafts]

        storage.run_sync(open_accounts)
        step = timedelta(days=30) / max(intents, 1)
        last_id = 0
        for start in range(0, intents, _BATCH):
            drafts = [
                _intent(company, created.merchant_account.id, n, now - step * (intents - n))
                for n in range(start, min(intents, start + _BATCH))
            ]
            last_id = storage.run_sync(add(drafts))[-1].id
    finally:
        treasury.close()
    seed_sqlite(str(path), postings, wallet.id)
    return Seeded(url, now, created.secret_key, wallet.id, last_id, intents, postings)


def _intent(company_id: int, account_id: int, n: int, at: datetime) -> PaymentIntent:
    amount = 500 + (n * 37) % 20_000
    return PaymentIntent(
        id=0,
        company_id=company_id,
        account_id=account_id,
        billing_amount=amount,
        billing_currency="USD",
        processing_amount=amount,
        processing_currency="USD",
        merchant_reference=f"order-{n:07d}",
        customer_email=f"customer{n % 5_000}@example.com",
        payment_intent_lookup_id=new_lookup_id(at, f"{n:024x}"),
        created_at=at,
    )


def check_ledger(url: str) -> str:
    """Run ``treasury ledger verify`` on the seeded file; its summary, or raise."""
    done = subprocess.run(
        [_treasury(), "ledger", "verify", "--database", url, "--page-size", "100000"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"treasury ledger verify refused the seed: {done.stdout}{done.stderr}")
    return done.stdout.strip()


def _treasury() -> str:
    return str(Path(sys.executable).with_name("treasury"))


def pages(seeded: Seeded) -> dict[str, str]:
    """The measured pages: name -> path."""
    day = (seeded.now - timedelta(days=20)).replace(microsecond=0)
    one_day = urlencode(
        {"created_gte": day.isoformat(), "created_lt": (day + timedelta(days=1)).isoformat()}
    )
    return {
        "home": "/dashboard",
        "payments": "/dashboard/payments",
        "payments, status filter": "/dashboard/payments?status=INITIALIZED",
        "payments, no match (status)": "/dashboard/payments?status=PROCESSED",
        "payments, e-mail filter": "/dashboard/payments?customer_email=customer42%40example.com",
        "payments, reference": "/dashboard/payments?merchant_reference=order-0050000",
        "payments, one day": f"/dashboard/payments?{one_day}",
        "payment detail": f"/dashboard/payments/{seeded.intent_id}",
        "wallets": "/dashboard/wallets",
        "wallet detail": f"/dashboard/wallets/{seeded.wallet_id}",
        "events": "/dashboard/events",
        "webhooks": "/dashboard/webhooks",
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def measure(seeded: Seeded, count: int, log_path: Path) -> dict[str, list[float]]:
    """Server times in ms per page, ``count`` requests each (after one warm-up each)."""
    port = _free_port()
    env = {**os.environ, "TREASURY_DATABASE_URL": seeded.url, "TREASURY_DASHBOARD": "1"}
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [_treasury(), "serve", "--port", str(port)], stdout=log, stderr=log, env=env
        )
    try:
        targets = pages(seeded)
        sent = asyncio.run(_requests(f"http://127.0.0.1:{port}", seeded, targets, count, server))
    finally:
        server.terminate()
        server.wait(timeout=30)
    return _server_times(log_path.read_text(), targets, sent)


async def _requests(
    base: str,
    seeded: Seeded,
    targets: dict[str, str],
    count: int,
    server: subprocess.Popen[bytes],
) -> int:
    """Sign in, warm every page up once, then ``count`` rounds; the number of timed GETs."""
    # unsafe: the jar keeps cookies of an IP address (the server is on 127.0.0.1).
    jar = aiohttp.CookieJar(unsafe=True)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(base, cookie_jar=jar, timeout=timeout) as session:
        deadline = time.monotonic() + 60
        while True:
            try:
                async with session.get("/dashboard/login") as form:
                    html = await form.text()
                break
            except aiohttp.ClientConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the server did not start (see its log)") from None
                await asyncio.sleep(0.2)
        token = re.search(r'name="csrf_token" value="([^"]+)"', html)
        if token is None:
            raise RuntimeError("no csrf_token on /dashboard/login")
        data = {"secret_key": seeded.secret_key, "csrf_token": token.group(1)}
        async with session.post("/dashboard/login", data=data, allow_redirects=False) as answer:
            if not any(c.key == "treasury_dashboard" for c in jar):
                raise RuntimeError(f"sign-in failed: {answer.status} {await answer.text()}")
        for path in targets.values():  # warm-up: first queries, template compilation
            async with session.get(path, allow_redirects=False) as answer:
                if answer.status != 200:
                    raise RuntimeError(f"{path}: {answer.status} {(await answer.text())[:300]}")
        sent = 0
        for _ in range(count):
            for path in targets.values():
                async with session.get(path, allow_redirects=False) as answer:
                    await answer.read()
                    answer.raise_for_status()
                sent += 1
        return sent


def _server_times(log: str, targets: dict[str, str], measured: int) -> dict[str, list[float]]:
    """The last ``measured`` GETs of the access log, as milliseconds per page name: they are
    the timed rounds, in the order sent (one client, one request at a time). The log writes a
    decoded query, so lines are checked against the sent path without its query."""
    lines = [m for m in _LOG_LINE.finditer(log)][-measured:]
    order = list(targets.items())
    times: dict[str, list[float]] = {name: [] for name in targets}
    for n, m in enumerate(lines):
        name, path = order[n % len(order)]
        if m.group(1).split("?")[0] != path.split("?")[0] or m.group(2) != "200":
            raise RuntimeError(f"access log line {m.group(0)!r} is not the GET of {path}")
        times[name].append(float(m.group(3)) * 1000)
    return times


def bench(
    intents: int, postings: int, requests: int, step: Callable[[str, Callable[[], Any]], Any]
) -> tuple[list[Row], str]:
    """Seed, verify, measure in a scratch directory; the rows and a note on the seed
    (``step(label, fn)`` runs and reports each phase)."""
    with tempfile.TemporaryDirectory(prefix="treasury-bench-") as tmp:
        seeded: Seeded = step("dashboard seed", lambda: seed(Path(tmp, "d.db"), intents, postings))
        verified: str = step("ledger verify", lambda: check_ledger(seeded.url))
        times: dict[str, list[float]] = step(
            "dashboard pages", lambda: measure(seeded, requests, Path(tmp, "server.log"))
        )
    return rows(seeded, times), f"Dashboard seed, `treasury ledger verify`: {verified}"


def settings(intents: int, postings: int, requests: int) -> str:
    """The settings line of a run."""
    return (
        f"Dashboard: {intents:,} intents and {postings:,} postings (see bench/dashboard.py);"
        f" `treasury serve` on SQLite; {requests} requests per page, pages interleaved, after"
        " one warm-up each; server time from the access log; one client, loopback."
    )


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * 95 // 100) - 1)]


def rows(seeded: Seeded, times: dict[str, list[float]]) -> list[Row]:
    """One row per page: median and p95 server time against the target."""
    out = []
    for name, values in times.items():
        worst = p95(values)
        out.append(
            Row(
                f"dashboard {name}, {seeded.intents:,} intents, {seeded.postings:,} postings",
                f"{median(values):.1f} ms (p95 {worst:.1f} ms, {len(values)} requests)",
                "",
                "",
                f"p95 < {TARGET_MS:g} ms",
                verdict(worst < TARGET_MS),
            )
        )
    return out
