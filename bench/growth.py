"""Growth: what history costs. Reads and creates at a small and a large history, and the server's
memory after ``rss_intents`` payment intents.

Three parts, all on SQLite files in a temp dir, each bounded:

- **Wallet reads** through the service (``bootstrap(TreasuryConfig(database_url=...))``): two
  databases, each with a company of ``WALLETS`` wallets made by ``wallets.create``. ``small`` and
  ``large`` ledger postings (world account -> the first wallet, 1 minor unit each) are then
  bulk-inserted into the migrated schema with ``sqlite3``, the way :mod:`bench.reads` does, with
  the two accounts' counters raised by the same sums; the counters are checked against the sum of
  the postings and against ``wallets.balance``. ``wallets.balance`` (one wallet), ``wallets.list``
  (first page) and ``wallets.balances`` (first page, report only) are timed, small and large
  interleaved within every repetition (order reversed every other one) after a warm-up;
  figures are medians, ratios the median of per-repetition ratios.
- **Create intent** through the service (``payments.create``, one request at a time, awaited, so
  the figure is the latency of one create including its commit): two databases holding ``small``
  and ``large`` payment intents. One intent is created through the service; the rest are copies
  of its stored row (``payment_intents``: new id, lookup id and merchant reference; body JSON
  re-serialised the way the adapter writes it) and of its ``payment_intent.created`` event
  (``events``, marked dispatched as a running server would have), bulk-inserted in one
  transaction; ``payments.count`` and ``payments.get_by_lookup_id`` of copies check the rows.
  Interleaved as above. Each repetition adds its creates to both databases (small beside
  ``large``).
- **Server RSS**: ``treasury serve`` on a fresh file (``TREASURY_RATE_LIMIT_PER_SECOND=0``), a
  company from ``treasury companies create``, then ``wrk`` (32 connections) posting new intents
  in runs of a few seconds until the database holds ``rss_intents`` or the HTTP budget is spent.
  After every run the server's ``VmRSS``, ``VmHWM`` and ``RssAnon`` (``/proc/<pid>/status``) and
  the stored count (read from the file, not through the server) are recorded, so the growth
  with requests served is visible. If the budget runs out first, the remaining intents are
  bulk-inserted into the running server's database (as for the create benchmark), then a fixed
  run of HTTP creates follows and the server's count and a read of a copied intent check that it
  sees them. The table says how many intents came over HTTP and how many were inserted.

What the RSS figures mean: ``VmRSS`` is resident memory, mostly the interpreter and its imported
libraries at start; then Python's heap and every SQLite connection's page cache (``cache_size``,
2 MB by default, per pooled connection), which fills as the file grows and then stays. What a
user cares about is whether memory grows with stored data or with requests served, without
bound; the points separate the two (the insert step adds stored intents without requests, a
``wrk`` run adds both), and the slope between the first and the last ``wrk`` run is reported.
``VmHWM`` is the peak; ``RssAnon`` excludes mapped files (the heap and the page caches).

``python -m bench.growth`` runs it alone (``--help`` for counts); :func:`bench_growth` and
:func:`growth_rows` are what ``python -m bench`` calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from bench.http_intents import free_port, run_server
from bench.report import Row, cost, cpu, ratio, render, verdict
from bench.timing import Elapsed, Samples, Workload
from treasury_core import Treasury, bootstrap
from treasury_core.config import TreasuryConfig
from treasury_core.payments import IntentFilter, PaymentType
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.services.payments import new_lookup_id
from treasury_core.wallets import CreateWalletRequest

#: A read or list at the large history may cost at most this multiple of the small one ...
GROWTH_TARGET = 1.2
#: ... and a balance read under this many microseconds.
READ_COST_TARGET_US = 1000.0
#: The server's VmRSS after ``rss_intents`` intents, in MB (10**6 bytes).
RSS_TARGET_MB = 150.0
#: Wallets of the benchmark company; the first one holds the postings.
WALLETS = 10
#: Where the seeded postings come from (the treasury opens it at bootstrap).
WORLD_USD = "world:USD"
CREATE_PATH = "/api/v1/payments/intent"
COUNT_PATH = "/api/v1/payments/intents/count"
CONNECTIONS = 32
_CLI = (sys.executable, "-m", "treasury_aiohttp.cli")

_POST_SCRIPT = """\
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %(key)s"
local n = 0
local run = "%(run)s"
request = function()
  n = n + 1
  local body = '{"account_id": %(account)d, "billing_amount": 1000, "billing_currency": "USD",'
    .. ' "payment_type": "Card Payment", "merchant_reference": "growth-' .. run .. '-' .. n .. '"}'
  return wrk.format(nil, nil, nil, body)
end
"""


# --- results ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RssPoint:
    """The server's memory at one moment: after ``served`` HTTP creates, ``stored`` intents."""

    label: str
    served: int
    stored: int
    rss_kb: int
    hwm_kb: int
    anon_kb: int


@dataclass(frozen=True, slots=True)
class RssResult:
    """The server-memory run: its points in order, and how the intents got there."""

    target: int
    points: tuple[RssPoint, ...]
    http_created: int
    seeded: int
    errors: int
    http_seconds: float
    seconds: float

    @property
    def final(self) -> RssPoint:
        """The last point (after all intents and the last HTTP run)."""
        return self.points[-1]

    @property
    def by_http(self) -> bool:
        """Whether every intent came over HTTP (nothing was bulk-inserted)."""
        return self.seeded == 0

    def http_span(self) -> tuple[RssPoint, RssPoint] | None:
        """The points after the first and the last ``wrk`` run on the fresh file (the first run
        pays for warming up: lazy imports, first-use caches), or ``None`` with fewer than two."""
        runs = [p for p in self.points if p.label.startswith("wrk run")]
        if len(runs) < 2 or runs[-1].served == runs[0].served:
            return None
        return runs[0], runs[-1]


@dataclass(frozen=True, slots=True)
class GrowthResults:
    """Everything :func:`bench_growth` measured.

    ``reads`` keys: ``balance_small``, ``balance_large``, ``list_small``, ``list_large``,
    ``balances_small``, ``balances_large``; ``creates``: ``small``, ``large``. ``rss`` is
    ``None`` when skipped, with the reason in ``rss_problem``.
    """

    small: int
    large: int
    reads: dict[str, Samples]
    creates: dict[str, Samples]
    rss: RssResult | None
    rss_problem: str | None
    seconds: float


# --- helpers ---------------------------------------------------------------------------------


def _mb(kb: int) -> float:
    return kb * 1024 / 1e6


def _progress(message: str) -> None:
    print(f"... growth: {message}", file=sys.stderr, flush=True)


async def _timed_async(op: Callable[[], Awaitable[object]], count: int) -> Elapsed:
    cpu_start = time.process_time()
    start = time.perf_counter()
    for _ in range(count):
        await op()
    return Elapsed(time.perf_counter() - start, time.process_time() - cpu_start)


def _async_workload(runner: asyncio.Runner, op: Callable[[], Awaitable[object]]) -> Workload:
    """A :data:`Workload` that awaits ``op`` ``count`` times on ``runner``'s loop."""
    return lambda count: runner.run(_timed_async(op, count))


def interleave_alternating(
    workloads: Mapping[str, Workload], count: int, reps: int
) -> dict[str, Samples]:
    """As :func:`bench.timing.interleave`, but every other repetition runs the workloads in
    reverse order (A B, B A, A B, ...), so neither size always runs first, right after the
    other's garbage or the other's cache misses."""
    names = list(workloads)
    for name in names:
        workloads[name](max(1, count // 10))
    runs: dict[str, list[Elapsed]] = {name: [] for name in names}
    for rep in range(reps):
        for name in names if rep % 2 == 0 else reversed(names):
            runs[name].append(workloads[name](count))
    return {name: Samples(count, tuple(values)) for name, values in runs.items()}


def _open_treasury(path: Path) -> Treasury:
    return bootstrap(TreasuryConfig(database_url=f"sqlite:///{path}"))


# --- seeding ---------------------------------------------------------------------------------

_POSTING_COLUMNS = (
    "id, journal_id, operation, kind, debit_account_id, credit_account_id, currency, amount,"
    " released, created_at"
)


def seed_postings(path: Path, wallet_id: str, count: int, created_at: str) -> None:
    """Insert ``count`` posted moves of 1 from ``world:USD`` into ``wallet_id``; raise both
    accounts' counters by the same sums and check the wallet's against the postings."""
    rows = (
        (
            f"growth-{n}.0",
            f"growth-{n}",
            "movement",
            "posted",
            WORLD_USD,
            wallet_id,
            "USD",
            1,
            0,
            created_at,
        )
        for n in range(count)
    )
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            f"INSERT INTO ledger_postings ({_POSTING_COLUMNS}) VALUES ({', '.join('?' * 10)})",
            rows,
        )
        conn.execute(
            "UPDATE ledger_accounts SET debits_posted = debits_posted + ? WHERE id = ?",
            (count, WORLD_USD),
        )
        conn.execute(
            "UPDATE ledger_accounts SET credits_posted = credits_posted + ? WHERE id = ?",
            (count, wallet_id),
        )
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        counter, total = conn.execute(
            "SELECT a.credits_posted - a.debits_posted, (SELECT COALESCE(SUM(amount), 0)"
            " FROM ledger_postings WHERE credit_account_id = a.id)"
            " FROM ledger_accounts a WHERE a.id = ?",
            (wallet_id,),
        ).fetchone()
    finally:
        conn.close()
    if not counter == total == count:
        raise RuntimeError(f"postings seeding: counter {counter}, sum {total}, want {count}")


def seed_intents(path: Path, count: int) -> list[str]:
    """Copy the newest stored intent (and its ``created`` event) ``count`` times, in one
    transaction; returns the copies' lookup ids (a few, for checks).

    The copies differ from the original in id, ``payment_intent_lookup_id`` and
    ``merchant_reference``; their bodies are the original's JSON with those fields replaced,
    serialised compactly as the adapter does. Copied events are marked dispatched.
    """
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        conn.execute("BEGIN IMMEDIATE")
        intent = conn.execute(
            "SELECT id, company_id, account_id, status, lookup_id, created_at, body"
            " FROM payment_intents ORDER BY id DESC LIMIT 1"
        ).fetchone()
        if intent is None:
            raise RuntimeError("no intent to copy: create one first")
        first_id, company_id, account_id, status, lookup_id, created_at, body_json = intent
        event = conn.execute(
            "SELECT id, type, created_at, payload FROM events"
            " WHERE type LIKE '%payment_intent.created' AND payload LIKE ?"
            " ORDER BY id DESC LIMIT 1",
            (f'%"payment_intent_lookup_id":"{lookup_id}"%',),
        ).fetchone()
        if event is None:
            raise RuntimeError(f"no created event for intent {first_id}")
        event_id, event_type, event_at, payload_json = event
        body: dict[str, Any] = json.loads(body_json)
        payload: dict[str, Any] = json.loads(payload_json)
        # Event ids keep the original's prefix (its time part) with a counter for the rest.
        event_prefix = event_id[: len(event_id) - 10]
        samples: list[str] = []
        # The copies' lookup ids carry the original's creation time, as their rows do.
        made_at = datetime.fromisoformat(str(created_at)).replace(tzinfo=UTC)

        def copies() -> Iterator[tuple[tuple[Any, ...], tuple[Any, ...]]]:
            for n in range(1, count + 1):
                new_lookup = new_lookup_id(made_at, secrets.token_urlsafe(24))
                new_id = first_id + n
                body["payment_intent_lookup_id"] = new_lookup
                body["merchant_reference"] = f"growth-seed-{n}"
                obj = payload["object"]
                obj.update(
                    id=str(new_id),
                    payment_intent_lookup_id=new_lookup,
                    merchant_reference=body["merchant_reference"],
                )
                if n <= 3 or n == count:
                    samples.append(new_lookup)
                body_text = json.dumps(body, separators=(",", ":"))
                payload_text = json.dumps(payload, separators=(",", ":"))
                event_row = (f"{event_prefix}{n:010d}", company_id, event_type, event_at)
                yield (
                    (new_id, company_id, account_id, status, new_lookup, created_at, body_text),
                    (*event_row, payload_text, event_at),
                )

        batch: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
        for pair in copies():
            batch.append(pair)
            if len(batch) == 5_000:
                _insert_intent_batch(conn, batch)
                batch.clear()
        _insert_intent_batch(conn, batch)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return samples


def _insert_intent_batch(
    conn: sqlite3.Connection, batch: list[tuple[tuple[Any, ...], tuple[Any, ...]]]
) -> None:
    conn.executemany(
        "INSERT INTO payment_intents"
        " (id, company_id, account_id, status, lookup_id, created_at, body)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [intent for intent, _ in batch],
    )
    conn.executemany(
        "INSERT INTO events (id, company_id, type, created_at, payload, dispatched_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [event for _, event in batch],
    )


def _stored_intents(path: Path, settle: float = 0.25, timeout: float = 10.0) -> int:
    """The intents in the file once the count holds still for ``settle`` seconds: requests a
    ``wrk`` run left in flight still commit after it exits."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        deadline = time.monotonic() + timeout
        seen = -1
        while True:
            count = int(conn.execute("SELECT count(*) FROM payment_intents").fetchone()[0])
            if count == seen or time.monotonic() > deadline:
                return count
            seen = count
            time.sleep(settle)
    finally:
        conn.close()


# --- wallet reads ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _WalletDb:
    treasury: Treasury
    company_id: int
    wallet_id: str


async def _wallet_db(path: Path, postings: int) -> _WalletDb:
    treasury = _open_treasury(path)
    try:
        created = await treasury.companies.create_company("Growth Co")
        company_id = created.company.id
        wallet_ids = []
        for n in range(WALLETS):
            request = CreateWalletRequest(name=f"growth {n}", currency_id="USD")
            wallet_ids.append((await treasury.wallets.create(company_id, request)).id)
        seed_postings(path, wallet_ids[0], postings, "2025-01-01 00:00:00.000000")
        balance = await treasury.wallets.balance(company_id, wallet_ids[0])
        listed = await treasury.wallets.list(company_id)
    except BaseException:
        treasury.close()
        raise
    if balance.balance != postings:
        raise RuntimeError(f"wallet balance {balance.balance}, want {postings}")
    if len(listed.items) != WALLETS:
        raise RuntimeError(f"wallet list has {len(listed.items)} wallets, want {WALLETS}")
    return _WalletDb(treasury, company_id, wallet_ids[0])


def bench_wallet_reads(small: int, large: int, count: int, reps: int) -> dict[str, Samples]:
    """Balance read, wallet list and balances list at ``small`` and ``large`` postings."""
    with (
        tempfile.TemporaryDirectory(prefix="bench-growth-") as tmp,
        asyncio.Runner() as runner,
        ExitStack() as stack,
    ):
        dbs: dict[str, _WalletDb] = {}
        for name, postings in (("small", small), ("large", large)):
            db = runner.run(_wallet_db(Path(tmp) / f"wallets-{name}.db", postings))
            stack.callback(db.treasury.close)
            dbs[name] = db
        workloads: dict[str, Workload] = {}
        for name, db in dbs.items():
            wallets, company, wallet = db.treasury.wallets, db.company_id, db.wallet_id
            ops: dict[str, Callable[[], Awaitable[object]]] = {
                "balance": partial(wallets.balance, company, wallet),
                "list": partial(wallets.list, company),
                "balances": partial(wallets.balances, company),
            }
            for op_name, op in ops.items():
                workloads[f"{op_name}_{name}"] = _async_workload(runner, op)
        return interleave_alternating(workloads, count, reps)


# --- create intent ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _IntentDb:
    treasury: Treasury
    company_id: int
    request: CreateIntentRequest


async def _intent_db(path: Path, intents: int) -> _IntentDb:
    treasury = _open_treasury(path)
    try:
        created = await treasury.companies.create_company("Growth Co")
        company_id = created.company.id
        request = CreateIntentRequest(
            account_id=created.merchant_account.id,
            billing_amount=1000,
            billing_currency="USD",
            payment_type=PaymentType.CARD_PAYMENT,
            merchant_reference="growth",
        )
        await treasury.payments.create(company_id, request)
        lookups = seed_intents(path, intents - 1) if intents > 1 else []
        stored = await treasury.payments.count(company_id, IntentFilter())
        for lookup in lookups:
            copy = await treasury.payments.get_by_lookup_id(company_id, lookup)
            if copy.payment_intent_lookup_id != lookup:
                raise RuntimeError(f"seeded intent {lookup} reads back as {copy}")
    except BaseException:
        treasury.close()
        raise
    if stored != intents:
        raise RuntimeError(f"{stored} intents stored, want {intents}")
    return _IntentDb(treasury, company_id, request)


def bench_intent_creates(small: int, large: int, count: int, reps: int) -> dict[str, Samples]:
    """``payments.create`` latency with ``small`` and ``large`` intents already stored."""
    with (
        tempfile.TemporaryDirectory(prefix="bench-growth-") as tmp,
        asyncio.Runner() as runner,
        ExitStack() as stack,
    ):
        workloads: dict[str, Workload] = {}
        for name, intents in (("small", small), ("large", large)):
            db = runner.run(_intent_db(Path(tmp) / f"intents-{name}.db", intents))
            stack.callback(db.treasury.close)
            create = partial(db.treasury.payments.create, db.company_id, db.request)
            workloads[name] = _async_workload(runner, create)
        return interleave_alternating(workloads, count, reps)


# --- server RSS ------------------------------------------------------------------------------


def rss_problem() -> str | None:
    """Why the RSS part cannot run here, or ``None``."""
    if shutil.which("wrk") is None:
        return "wrk is not installed (apt-get install wrk)"
    if not Path("/proc/self/status").exists():
        return "no /proc/<pid>/status to read the server's memory from"
    return None


def _memory(pid: int) -> tuple[int, int, int]:
    """``VmRSS``, ``VmHWM`` and ``RssAnon`` of ``pid`` in kB."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon"):
            fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"], fields["RssAnon"]


def _get(url: str, key: str) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@contextmanager
def _serve(db: Path, log: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``treasury serve`` on ``db``; yields the process and its base URL once it accepts."""
    port = free_port()
    args = [*_CLI, "serve", "--port", str(port), "--database", str(db)]
    with run_server(args, port, log) as proc:
        yield proc, f"http://127.0.0.1:{port}"


def _wrk(url: str, script: Path, seconds: int) -> tuple[int, int]:
    """One ``wrk`` run; requests completed and errors (non-2xx plus socket errors)."""
    out = subprocess.run(
        ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{seconds}s", "--timeout=10s", f"-s{script}", url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    done = re.search(r"(\d+) requests in", out)
    if done is None:
        raise RuntimeError(f"cannot parse wrk output:\n{out}")
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    socket_errors = re.search(r"Socket errors: (.*)", out)
    if socket_errors:
        errors += sum(int(n) for n in re.findall(r"\d+", socket_errors.group(1)))
    return int(done.group(1)), errors


def bench_server_rss(
    intents: int, http_budget: float, chunk_seconds: float = 5.0, final_seconds: float = 3.0
) -> RssResult:
    """Serve on a fresh file and create ``intents`` over HTTP within ``http_budget`` seconds of
    ``wrk``, bulk-inserting the rest if the budget runs out (see the module docstring)."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-growth-rss-") as tmp:
        root = Path(tmp)
        db = root / "treasury.db"
        made = subprocess.run(
            [*_CLI, "companies", "create", "Growth Co", "--database", str(db)],
            check=True,
            capture_output=True,
            text=True,
        )
        company = json.loads(made.stdout.strip().splitlines()[-1])
        key, account = str(company["secret_key"]), int(company["account_id"])
        points: list[RssPoint] = []
        served = errors = seeded = 0
        http_seconds = 0.0
        with _serve(db, root / "server.log") as (proc, base):

            def point(label: str) -> None:
                rss, hwm, anon = _memory(proc.pid)
                points.append(RssPoint(label, served, _stored_intents(db), rss, hwm, anon))

            def drive(seconds: int) -> None:
                nonlocal served, errors, http_seconds
                script = root / f"post-{len(points)}.lua"
                values = {"key": key, "account": account, "run": len(points)}
                script.write_text(_POST_SCRIPT % values)
                start = time.perf_counter()
                done, failed = _wrk(base + CREATE_PATH, script, seconds)
                http_seconds += time.perf_counter() - start
                served += done
                errors += failed

            point("server started")
            while http_seconds < http_budget:
                stored = points[-1].stored
                if stored >= intents:
                    break
                rate = served / http_seconds if http_seconds else 0.0
                left = http_budget - http_seconds
                # Aim just past the target, in runs of at most ``chunk_seconds``.
                needed = (intents - stored) / rate * 1.05 + 0.2 if rate else chunk_seconds
                drive(max(1, min(round(min(chunk_seconds, needed)), int(left))))
                point(f"wrk run {len(points)}")
            stored = points[-1].stored
            if stored < intents:
                lookups = seed_intents(db, intents - stored)
                seeded = intents - stored
                point(f"+{seeded:,} inserted")
                drive(max(1, round(final_seconds)))
                point("wrk after insert")
                read = _get(f"{base}{CREATE_PATH}?payment_intent_lookup_id={lookups[-1]}", key)
                if read.get("payment_intent_lookup_id") != lookups[-1]:
                    raise RuntimeError(f"server cannot read a copied intent: {read}")
            counted = int(_get(base + COUNT_PATH, key)["count"])
            if counted != points[-1].stored:
                raise RuntimeError(f"server counts {counted}, file holds {points[-1].stored}")
            point("after count")
    return RssResult(
        target=intents,
        points=tuple(points),
        http_created=points[-1].stored - seeded,
        seeded=seeded,
        errors=errors,
        http_seconds=http_seconds,
        seconds=time.perf_counter() - started,
    )


# --- everything ------------------------------------------------------------------------------


def bench_growth(
    small: int = 1_000,
    large: int = 100_000,
    *,
    reads: int = 500,
    creates: int = 100,
    reps: int = 7,
    rss_intents: int = 100_000,
    http_budget: float = 65.0,
    rss: bool = True,
    progress: Callable[[str], None] | None = None,
) -> GrowthResults:
    """All three parts at the given sizes (about two minutes at the defaults; the RSS part at
    most ``http_budget`` + 3 s of ``wrk`` plus start-up and inserts). ``progress`` is told
    which part starts."""
    if reps < 3:
        raise ValueError("reps must be at least 3 (the figures are medians)")
    say = progress or (lambda _message: None)
    started = time.perf_counter()
    say(f"wallet reads at {small:,} and {large:,} postings")
    read_samples = bench_wallet_reads(small, large, reads, reps)
    say(f"create intent at {small:,} and {large:,} stored intents")
    create_samples = bench_intent_creates(small, large, creates, reps)
    result: RssResult | None = None
    problem = rss_problem() if rss else "disabled"
    if problem is None:
        say(f"server RSS to {rss_intents:,} intents (HTTP budget {http_budget:g} s)")
        result = bench_server_rss(rss_intents, http_budget)
    return GrowthResults(
        small=small,
        large=large,
        reads=read_samples,
        creates=create_samples,
        rss=result,
        rss_problem=problem,
        seconds=time.perf_counter() - started,
    )


def _growth_row(
    measure: str, large: Samples, small: Samples, *, cost_cap_us: float | None = None
) -> Row:
    growth = ratio(large, small, of_cost=True)
    met = growth <= GROWTH_TARGET
    target = f"<= {GROWTH_TARGET}x"
    if cost_cap_us is not None:
        met = met and large.median_us < cost_cap_us
        target += f", < {cost_cap_us / 1000:g} ms"
    # The client's CPU per operation, small to large: steadier than wall time where the wall
    # time is mostly waiting (a commit's fsync), so it shows growth the noise could hide.
    cpu_growth = large.median_cpu_us / small.median_cpu_us
    figure = f"{growth:.2f}x small (CPU {cpu_growth:.2f}x)"
    return Row(measure, cost(large), cpu(large), figure, target, verdict(met))


def _rss_rows(rss: RssResult) -> list[Row]:
    final = rss.final
    how = (
        f"all {rss.http_created:,} over HTTP"
        if rss.by_http
        else f"{rss.http_created:,} over HTTP + {rss.seeded:,} inserted"
    )
    errors = f", {rss.errors} HTTP errors" if rss.errors else ""
    span = rss.http_span()
    slope = "n/a (fewer than two wrk runs)"
    if span is not None:
        a, b = span
        per_10k = _mb(b.rss_kb - a.rss_kb) / (b.served - a.served) * 10_000
        slope = (
            f"{_mb(a.rss_kb):.1f} -> {_mb(b.rss_kb):.1f} MB over {b.served - a.served:,} creates"
            f" ({per_10k:+.2f} MB per 10k)"
        )
    met = final.stored >= rss.target and _mb(final.rss_kb) <= RSS_TARGET_MB and not rss.errors
    first = rss.points[0]
    return [
        Row(
            "Growth: server VmRSS at start (fresh SQLite file)",
            f"{_mb(first.rss_kb):.1f} MB",
            f"RssAnon {_mb(first.anon_kb):.1f} MB",
        ),
        Row(
            f"Growth: server VmRSS after {final.stored:,} intents ({how}{errors})",
            f"{_mb(final.rss_kb):.1f} MB (VmHWM {_mb(final.hwm_kb):.1f} MB)",
            f"RssAnon {_mb(final.anon_kb):.1f} MB",
            f"{final.rss_kb / first.rss_kb:.2f}x start",
            f"<= {RSS_TARGET_MB:g} MB",
            verdict(met),
        ),
        Row(
            "Growth: server VmRSS with HTTP creates served (first to last wrk run)",
            slope,
            "",
            f"{rss.final.served / rss.http_seconds:,.0f} creates/s" if rss.http_seconds else "",
        ),
    ]


def growth_rows(results: GrowthResults) -> list[Row]:
    """The growth rows: the small figures for reference, the large with ratio and target."""
    r, c = results.reads, results.creates
    small, large = f"{results.small:,}", f"{results.large:,}"
    rows = [
        Row(
            f"Growth: wallets.balance, {small} postings",
            cost(r["balance_small"]),
            cpu(r["balance_small"]),
        ),
        _growth_row(
            f"Growth: wallets.balance, {large} postings",
            r["balance_large"],
            r["balance_small"],
            cost_cap_us=READ_COST_TARGET_US,
        ),
        Row(
            f"Growth: wallets.list ({WALLETS} wallets), {small} postings",
            cost(r["list_small"]),
            cpu(r["list_small"]),
        ),
        _growth_row(
            f"Growth: wallets.list ({WALLETS} wallets), {large} postings",
            r["list_large"],
            r["list_small"],
        ),
        Row(
            f"Growth: wallets.balances ({WALLETS} wallets), {small} postings",
            cost(r["balances_small"]),
            cpu(r["balances_small"]),
        ),
        Row(
            f"Growth: wallets.balances ({WALLETS} wallets), {large} postings",
            cost(r["balances_large"]),
            cpu(r["balances_large"]),
            f"{ratio(r['balances_large'], r['balances_small'], of_cost=True):.2f}x small",
        ),
        Row(f"Growth: payments.create, {small} intents stored", cost(c["small"]), cpu(c["small"])),
        _growth_row(f"Growth: payments.create, {large} intents stored", c["large"], c["small"]),
    ]
    if results.rss is not None:
        rows += _rss_rows(results.rss)
    else:
        rows.append(Row("Growth: server VmRSS", f"skipped: {results.rss_problem}"))
    return rows


def growth_details(results: GrowthResults) -> list[str]:
    """Lines to print under the table: the time taken and the server's memory at every point."""
    lines = [f"Growth part took {results.seconds:.1f} s."]
    rss = results.rss
    if rss is not None:
        lines.append(
            f"Server RSS run: {rss.seconds:.1f} s, {rss.http_seconds:.1f} s of wrk;"
            f" {rss.http_created:,} intents over HTTP, {rss.seeded:,} bulk-inserted."
        )
        lines += [
            f"  {p.label:<22} served {p.served:>7,}  stored {p.stored:>7,}"
            f"  VmRSS {_mb(p.rss_kb):6.1f} MB  VmHWM {_mb(p.hwm_kb):6.1f} MB"
            f"  RssAnon {_mb(p.anon_kb):6.1f} MB"
            for p in rss.points
        ]
    return lines


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.growth``: run the growth part alone and print its rows."""
    parser = argparse.ArgumentParser(prog="python -m bench.growth", description=__doc__)
    parser.add_argument("--small", type=int, default=1_000, help="small history")
    parser.add_argument("--large", type=int, default=100_000, help="large history")
    parser.add_argument("--reads", type=int, default=500, help="reads per rep and workload")
    parser.add_argument("--creates", type=int, default=100, help="creates per rep and database")
    parser.add_argument("--reps", type=int, default=7, help="timed repetitions (>= 3)")
    parser.add_argument("--rss-intents", type=int, default=100_000, help="intents for RSS")
    parser.add_argument("--http-budget", type=float, default=65.0, help="wrk seconds at most")
    parser.add_argument("--no-rss", action="store_true", help="skip the server RSS part")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--quick", action="store_true", help="a smoke run with small counts")
    args = parser.parse_args(argv)
    if args.reps < 3:
        parser.error("--reps must be at least 3 (the figures are medians)")
    if args.quick:
        args.large, args.reads, args.creates = 10_000, 200, 30
        args.rss_intents, args.http_budget = 10_000, 5.0
    results = bench_growth(
        args.small,
        args.large,
        reads=args.reads,
        creates=args.creates,
        reps=args.reps,
        rss_intents=args.rss_intents,
        http_budget=args.http_budget,
        rss=not args.no_rss,
        progress=_progress,
    )
    print(
        f"Medians of {args.reps} interleaved repetitions; {args.reads:,} reads and"
        f" {args.creates:,} creates per repetition and workload.\n"
    )
    print(render(growth_rows(results), markdown=args.markdown))
    print()
    print("\n".join(growth_details(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
