"""Draining a standing backlog of webhook deliveries: one SQLite server against the bare
client, and one then two ``treasury worker`` processes on PostgreSQL.

Method. A backlog is built in this process through the library's own services (``bootstrap``
on a fresh database: a company, one webhook endpoint taking ``payment_intent.created`` at the
receiver of ``bench events``, ``count`` intents created, their events fanned out with no sender,
so ``count`` deliveries wait, due). Nothing is delivering meanwhile. Then the deliverers start
and the run waits until every intent's event has arrived at the receiver (by intent id, at most
``DRAIN_LIMIT`` seconds). The drain rate is the arrivals over first to last arrival: the start
of a Python process (imports, first connections) is not a delivery cost and is left out; the
time from starting the processes to the last arrival is reported beside it.

1. **SQLite**: one ``treasury serve`` process on the SQLite file (as the other ``bench events``
   rows run), delivering the backlog. Then the bare aiohttp client of ``bench events`` posts
   the same number of signed bodies (one the server delivered: same size) to the same receiver,
   32 in flight: deliveries/s against its posts/s is the share of the physical limit that the
   delivery loop reaches.
2. **PostgreSQL** (a private schema each run): one ``treasury worker`` drains a backlog; then,
   on a fresh backlog of the same size, two workers drain it together (each claims its own
   rows). Their ratio is the gain of the second worker.

CPU per delivery. For each drain, the CPU time (user + system, ``/proc/PID/stat``) that each
part used between the first and the last arrival: the deliverers, the receiver, and on
PostgreSQL the database backends serving the workers (found by their ``application_name``); and
the whole machine's busy time from ``/proc/stat``, which counts other work running beside the
benchmark. Divided by the deliveries, these say where a delivery's CPU goes and so whether two
cores can take a second worker.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from bench import fixtures
from bench.events import CONNECTIONS, CREATED, bare_count, wait_for
from bench.http_intents import _treasury_cli, free_port, run_server
from bench.report import Row, verdict

#: The default backlog of each drain, and the longest wait for it to arrive.
COUNT = 5_000
DRAIN_LIMIT = 120.0
#: Creates in flight while the backlog is built (the storage's pool is this size).
BUILDERS = 8
#: Deliveries >= this share of the bare client's posts (issue 22).
BARE_SHARE_TARGET = 0.5
#: Two workers >= this multiple of one worker's drain rate: more than the run-to-run noise.
GROWTH_TARGET = 1.1

_HZ = os.sysconf("SC_CLK_TCK")


# --- the backlog ------------------------------------------------------------------------------


def build_backlog(url: str, hook: str, count: int) -> str:
    """A company with one endpoint at ``hook`` and ``count`` due deliveries on ``url``; the
    endpoint's signing secret. Built through the services, with no sender: nothing is sent."""
    from treasury_core import TreasuryConfig, bootstrap
    from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest
    from treasury_core.notifications.events import EventType
    from treasury_core.payments.intents import PaymentType
    from treasury_core.payments.requests import CreateIntentRequest
    from treasury_sqlalchemy.settings import SqlSettings

    async def build() -> str:
        treasury = bootstrap(
            TreasuryConfig(database_url=url, adapters=[SqlSettings(pool_size=BUILDERS)])
        )
        try:
            made = await treasury.companies.create_company("Drain Co")
            company, account = made.company.id, made.merchant_account.id
            endpoint = await treasury.notifications.create_endpoint(
                company, CreateWebhookEndpointRequest(url=hook, events=[EventType(CREATED)])
            )
            numbers = iter(range(count))
            request = CreateIntentRequest(
                account_id=account,
                billing_amount=1000,
                billing_currency="USD",
                payment_type=PaymentType.CARD_PAYMENT,
            )

            async def creates() -> None:
                for _ in numbers:
                    await treasury.payments.create(company, request)

            await asyncio.gather(*(creates() for _ in range(BUILDERS)))
            await treasury.notifications.dispatch_all()
            return endpoint.secret
        finally:
            treasury.close()

    return asyncio.run(build())


# --- CPU accounting ---------------------------------------------------------------------------


def _ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime


def _machine_busy() -> tuple[int, int]:
    """(busy, all) jiffies of the whole machine since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def _backends(url: str, application: str) -> list[int]:
    """The PostgreSQL backend pids of connections named ``application``."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (application,)
        ).fetchall()
    return [int(r[0]) for r in rows]


@dataclass(slots=True)
class CpuWatch:
    """CPU seconds per part between :meth:`start` and :meth:`stop`."""

    parts: dict[str, Callable[[], list[int]]]
    _before: dict[str, dict[int, int]] = field(default_factory=dict)
    _machine: tuple[int, int] = (0, 0)
    seconds: dict[str, float] = field(default_factory=dict)
    machine_busy: float = 0.0  # cores busy on average, whatever ran

    def start(self) -> None:
        self._before = {name: {p: _ticks(p) for p in pids()} for name, pids in self.parts.items()}
        self._machine = _machine_busy()

    def stop(self) -> None:
        busy, total = _machine_busy()
        cores = os.cpu_count() or 1
        spent = total - self._machine[1]
        self.machine_busy = (busy - self._machine[0]) / spent * cores if spent else 0.0
        for name, pids in self.parts.items():
            before = self._before.get(name, {})
            # A process that appeared meanwhile (a backend opened late) counts from zero.
            ticks = sum(_ticks(p) - before.get(p, 0) for p in set(pids()) | set(before))
            self.seconds[name] = ticks / _HZ


# --- one drain --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Drain:
    """One drain of ``count`` deliveries by ``processes`` deliverers."""

    label: str
    processes: int
    count: int
    arrived: dict[str, float]
    spawned: float
    cpu: CpuWatch

    @property
    def span(self) -> float:
        """First to last arrival, seconds."""
        times = self.arrived.values()
        return max(times) - min(times) if len(times) > 1 else 0.0

    @property
    def rate(self) -> float:
        """Deliveries per second, first to last arrival."""
        return len(self.arrived) / self.span if self.span > 0 else 0.0

    @property
    def from_spawn(self) -> float:
        """From starting the processes to the last arrival, seconds."""
        return max(self.arrived.values(), default=self.spawned) - self.spawned

    @property
    def complete(self) -> bool:
        """Whether every delivery arrived."""
        return len(self.arrived) == self.count

    def us_per_delivery(self, part: str) -> float:
        """CPU microseconds of ``part`` per delivery."""
        return self.cpu.seconds.get(part, 0.0) / max(1, len(self.arrived)) * 1e6


def _first_arrival(receiver: str, hook: str, deadline: float) -> None:
    from bench.events import _http

    while time.monotonic() < deadline:
        if _http(f"{receiver}/count/{hook}")["created"] > 0:
            return
        time.sleep(0.01)


@contextmanager
def _processes(commands: list[list[str]], root: Path, env: dict[str, str]) -> Iterator[list[int]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for n, command in enumerate(commands):
            out = (root / f"deliverer-{n}.log").open("wb")
            procs.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env))
            out.close()
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def drain(
    label: str,
    commands: list[list[str]],
    *,
    receiver: str,
    receiver_pid: int,
    hook: str,
    ids: list[str],
    root: Path,
    backends: Callable[[], list[int]] | None = None,
) -> Drain:
    """Start ``commands`` (the deliverers), wait until every one of ``ids`` arrived at
    ``hook``, and measure CPU from the first arrival to the last."""
    env = {**os.environ, "TREASURY_RATE_LIMIT_PER_SECOND": "0"}
    spawned = time.time()
    deadline = time.monotonic() + DRAIN_LIMIT
    with _processes(commands, root, env) as pids:
        parts: dict[str, Callable[[], list[int]]] = {
            "deliverers": lambda: pids,
            "receiver": lambda: [receiver_pid],
        }
        if backends is not None:
            parts["database"] = backends
        watch = CpuWatch(parts)
        _first_arrival(receiver, hook, deadline)
        watch.start()
        arrived = wait_for(receiver, ids, deadline, name=hook)
        watch.stop()
    return Drain(label, len(commands), len(ids), arrived, spawned, watch)


# --- the run ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DrainResult:
    """The drains of one run and the bare client's posts of the same number of bodies."""

    count: int
    sqlite: Drain
    bare_posts: int
    bare_seconds: float
    postgres: tuple[Drain, ...] = ()
    postgres_problem: str | None = None

    @property
    def bare_rate(self) -> float:
        """The bare client's posts per second."""
        return self.bare_posts / self.bare_seconds if self.bare_seconds else 0.0


def _ids(count: int) -> list[str]:
    # Intent ids are numbered from 1 in each fresh database; each drain has a hook of its own.
    return [str(n) for n in range(1, count + 1)]


def bench_drain(
    count: int = COUNT,
    *,
    postgres_url: str | None = fixtures.POSTGRES_URL,
    progress: Callable[[str], None] = lambda _: None,
) -> DrainResult:
    """Run the drains (see the module docstring) with the receiver of ``bench events``; the
    PostgreSQL ones on ``postgres_url`` (none when ``None`` or unreachable)."""
    cli = _treasury_cli()
    with tempfile.TemporaryDirectory(prefix="bench-drain-") as tmp:
        root = Path(tmp)
        receiver_port, dead_port = free_port(), free_port()
        receiver = f"http://127.0.0.1:{receiver_port}"
        receiver_cmd = [
            sys.executable,
            "-m",
            "bench.events",
            "receiver",
            str(receiver_port),
            str(dead_port),
        ]
        with run_server(receiver_cmd, receiver_port, root / "receiver.log") as recv:
            ids = _ids(count)

            # SQLite: one serving process, then the bare client.
            db = root / "drain.db"
            progress(f"drain: building {count:,} deliveries on SQLite")
            secret = build_backlog(f"sqlite:///{db}", f"{receiver}/hooks/sqlite", count)
            progress("drain: one SQLite server delivering")
            port = free_port()
            serve = [*cli, "serve", "--port", str(port), "--database", str(db)]
            sqlite = drain(
                "SQLite, 1 server",
                [serve],
                receiver=receiver,
                receiver_pid=recv.pid,
                hook="sqlite",
                ids=ids,
                root=root,
            )
            from bench.events import _http

            sample = _http(f"{receiver}/sample/sqlite")
            body = base64.b64decode(sample["body"])
            progress(f"drain: bare client, {count:,} posts")
            posts, seconds = asyncio.run(bare_count(f"{receiver}/hooks/bare", body, secret, count))

            problem = (
                "disabled by --no-postgres"
                if postgres_url is None
                else fixtures.postgres_available(postgres_url)
            )
            drains: list[Drain] = []
            for workers in () if problem is not None else (1, 2):
                application = f"bench_drain_{workers}"
                assert postgres_url is not None  # no problem: there is a URL
                with fixtures.postgres_schema(postgres_url) as schema_url:
                    url = f"{schema_url}&application_name={application}"
                    hook = f"pg{workers}"
                    progress(f"drain: building {count:,} deliveries on PostgreSQL")
                    build_backlog(schema_url, f"{receiver}/hooks/{hook}", count)
                    progress(f"drain: {workers} treasury worker process(es) on PostgreSQL")
                    worker = [*cli, "worker", "--database", url]
                    drains.append(
                        drain(
                            f"PostgreSQL, {workers} worker{'s' if workers > 1 else ''}",
                            [worker] * workers,
                            receiver=receiver,
                            receiver_pid=recv.pid,
                            hook=hook,
                            ids=ids,
                            root=root,
                            backends=partial(_backends, postgres_url, application),
                        )
                    )
    return DrainResult(count, sqlite, posts, seconds, tuple(drains), problem)


# --- the rows ---------------------------------------------------------------------------------


def _cpu_text(d: Drain) -> str:
    parts = ", ".join(
        f"{name} {d.us_per_delivery(name):,.0f}"
        for name in ("deliverers", "database", "receiver")
        if name in d.cpu.seconds
    )
    busy = f"machine {d.cpu.machine_busy:.1f} of {os.cpu_count()} cores busy"
    return f"CPU us/delivery: {parts}; {busy}"


def _figure(d: Drain) -> str:
    lost = d.count - len(d.arrived)
    return (
        f"{d.rate:,.0f} deliveries/s ({len(d.arrived):,} in {d.span:.1f} s; last"
        f" {d.from_spawn:.1f} s after the start)"
        + (f"; {lost:,} not arrived in {DRAIN_LIMIT:g} s" if lost else "")
    )


def drain_rows(result: DrainResult) -> list[Row]:
    """The drain rows, with ratios, the bare client's target and the second worker's gain."""
    r = result
    share = r.sqlite.rate / r.bare_rate if r.bare_rate else 0.0
    rows = [
        Row(
            f"Events drain: bare aiohttp client, {r.count:,} signed bodies ({CONNECTIONS} in"
            " flight)",
            f"{r.bare_rate:,.0f} posts/s ({r.bare_posts:,} in {r.bare_seconds:.1f} s)",
        ),
        Row(
            f"Events drain: {r.count:,} due deliveries, one SQLite server",
            _figure(r.sqlite),
            "",
            f"{share:.2f} of bare client",
            f">= {BARE_SHARE_TARGET:g} of bare client",
            verdict(share >= BARE_SHARE_TARGET and r.sqlite.complete),
        ),
    ]
    base = r.postgres[0] if r.postgres else None
    for d in r.postgres:
        gain = d.rate / base.rate if base is not None and base.rate else 0.0
        rows.append(
            Row(
                f"Events drain: {r.count:,} due deliveries, {d.label}",
                _figure(d),
                "",
                f"{gain:.2f}x 1 worker" if d is not base else "",
                f">= {GROWTH_TARGET:g}x 1 worker" if d is not base else "",
                verdict(gain >= GROWTH_TARGET and d.complete) if d is not base else "",
            )
        )
    return rows


def drain_details(result: DrainResult) -> list[str]:
    """Where each drain's CPU went (under the table)."""
    drains = [result.sqlite, *result.postgres]
    return [f"Drain {d.label}: {_cpu_text(d)}." for d in drains]
