"""The event pipeline end to end: from a committed create to a webhook receiver.

Method. One ``treasury serve`` process as shipped (SQLite file in a temp dir, WAL +
``synchronous=FULL``, background jobs on, the per-key rate limit off as in ``bench http``), one
company, and one receiver process (``python -m bench.events receiver PORT DEAD_PORT``): a small
aiohttp app that answers 200 at once to every POST on ``/hooks/{name}``, reads the body, and
keeps, for each ``payment_intent.created`` event it has not seen before (by ``webhook-id``), the
intent's id and the arrival time. The same process holds a *dead* port that accepts connections
and never answers. Everything is on loopback; the benchmark only talks HTTP to processes it
starts, so it measures whatever delivery loop the server ships. After an untimed warm-up
(creates at saturation, no endpoint, for up to ``WARMUP`` seconds), the phases run in this order
on the one server, each after the server has gone quiet (and the previous phase's events have
all arrived):

1. **create**: no webhook endpoint; a Python aiohttp client keeps 32 create-intent requests in
   flight for ``seconds`` (then waits for those in flight): the create rate alone.
2. **end to end**: one endpoint registered (``payment_intent.created`` only) at the receiver;
   the same saturation for the same time, then wait until every created intent's event has
   arrived (by intent id, at most ``DRAIN_LIMIT`` seconds). Events/s = intents created / (last
   arrival - start of the creates); compared with the create rate of phase 1. The deliveries/s
   are the same arrivals over first to last arrival: the rate the receiver saw.
3. **latency**: creates paced at 200/s (open loop: each request is sent on its schedule,
   whatever the others are doing) for ``paced_seconds``; each intent's latency is its event's
   arrival time at the receiver minus the time its create's answer reached the client. Both
   stamps are ``time.time()`` of processes on this machine: one kernel clock, read in two
   processes, so the difference needs no synchronisation (a clock step between the two reads
   would show; NTP slews both alike). The answer leaves the server after the commit, so the
   figure slightly *under*states commit-to-receiver, by the answer's trip back (well under a
   millisecond on loopback when the server is not saturated).
4. **bare client**: the physical limit of the receiver over HTTP: an aiohttp client in the
   benchmark's process, a keep-alive pool, 32 posts in flight for ``bare_seconds``, each a body
   that the server actually delivered (same size), signed as the server signs (Standard
   Webhooks, the endpoint's secret, a fresh ``webhook-id`` and timestamp per post).
5. **dead endpoint**: a second endpoint, at the dead port, takes the same events; creates paced
   at 200/s again; the healthy endpoint's latency as in phase 3, waiting at most
   ``DEAD_DRAIN_LIMIT`` seconds after the last create (an event not arrived by then counts as
   later than any that did, so a p99 that falls on one prints as ``> limit``). It runs last: the
   dead endpoint's deliveries keep timing out and being retried until the server stops.

Latency percentiles are nearest-rank over every intent of the phase. The CPU column of the two
saturation rows is the load client's CPU per create (it shares the two cores with the server
and the receiver; when it nears the time per create, the client is what limits the rate).
Each phase runs once (the targets are ratios from one run): rerun to see the noise.

``python -m bench events`` runs this part alone.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.http_intents import (
    CREATE_PATH,
    _company,
    _quiet,
    _treasury_cli,
    free_port,
    run_server,
)
from bench.report import Row, verdict

CREATED = "merchant_of_record.payment_intent.created"
CONNECTIONS = 32
#: Default seconds of saturation (phases 1 and 2), of paced creates (3 and 5), of bare posts (4).
SECONDS = 5.0
PACED_SECONDS = 5.0
BARE_SECONDS = 3.0
PACED_RATE = 200.0
#: At most this many seconds of untimed creates first, with no endpoint.
WARMUP = 2.0
#: The longest wait for the last event after the creates stop (end to end, latency phases) and
#: beside the dead endpoint: a run stops by itself whatever the delivery loop does.
DRAIN_LIMIT = 60.0
DEAD_DRAIN_LIMIT = 20.0

#: Targets (issue 22): end to end >= this share of the create rate; latency at 200 creates/s;
#: deliveries >= this share of the bare client's posts; the healthy endpoint's p99 beside a
#: dead one.
E2E_SHARE_TARGET = 0.6
P50_TARGET_MS = 50.0
P99_TARGET_MS = 500.0
BARE_SHARE_TARGET = 0.5
DEAD_P99_TARGET_MS = 1000.0

HEALTHY = "healthy"
BARE = "bare"


# --- the receiver -----------------------------------------------------------------------------


@dataclass(slots=True)
class Arrivals:
    """What a receiver saw, per hook name: posts, and the first arrival of each created intent."""

    posts: dict[str, int] = field(default_factory=dict)
    repeats: dict[str, int] = field(default_factory=dict)
    #: name -> intent id -> arrival (``time.time()``) of its ``created`` event's first delivery.
    created: dict[str, dict[str, float]] = field(default_factory=dict)
    #: name -> the last created event's body and signature headers (for the bare client).
    sample: dict[str, tuple[bytes, dict[str, str]]] = field(default_factory=dict)
    _ids: set[str] = field(default_factory=set)

    def record(self, name: str, body: bytes, headers: dict[str, str], at: float) -> None:
        """One POST on ``/hooks/{name}`` that arrived at ``at``."""
        self.posts[name] = self.posts.get(name, 0) + 1
        try:
            event = json.loads(body)
            intent = str(event["data"]["object"]["id"]) if event["type"] == CREATED else None
        except (ValueError, KeyError, TypeError):
            return
        if intent is None:
            return
        self.sample[name] = (body, headers)
        event_id = f"{name} {headers.get('webhook-id', '')}"
        if event_id in self._ids:  # at least once: a repeat is not a new arrival
            self.repeats[name] = self.repeats.get(name, 0) + 1
            return
        self._ids.add(event_id)
        self.created.setdefault(name, {}).setdefault(intent, at)


def receiver_app(arrivals: Arrivals) -> Any:
    """The receiver's aiohttp app over ``arrivals`` (routes in the module docstring)."""
    from aiohttp import web

    async def hook(request: web.Request) -> web.Response:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower().startswith("webhook-")}
        arrivals.record(request.match_info["name"], body, headers, time.time())
        return web.Response(status=200)

    async def count(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return web.json_response(
            {
                "created": len(arrivals.created.get(name, {})),
                "posts": arrivals.posts.get(name, 0),
                "repeats": arrivals.repeats.get(name, 0),
            }
        )

    async def created(request: web.Request) -> web.Response:
        return web.json_response(arrivals.created.get(request.match_info["name"], {}))

    async def sample(request: web.Request) -> web.Response:
        body, headers = arrivals.sample[request.match_info["name"]]
        return web.json_response({"body": base64.b64encode(body).decode(), "headers": headers})

    app = web.Application(client_max_size=1 << 20)
    app.router.add_post("/hooks/{name}", hook)
    app.router.add_get("/count/{name}", count)
    app.router.add_get("/created/{name}", created)
    app.router.add_get("/sample/{name}", sample)
    return app


async def _swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    # Accept, read whatever comes, never answer: the sender's timeout is all it gets.
    while await reader.read(65536):
        pass
    writer.close()


async def serve_receiver(port: int, dead_port: int) -> None:
    """The receiver on ``port`` and the dead port beside it, until the process is stopped."""
    from aiohttp import web

    dead = await asyncio.start_server(_swallow, "127.0.0.1", dead_port)
    runner = web.AppRunner(receiver_app(Arrivals()), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    async with dead:
        await dead.serve_forever()


# --- load -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Load:
    """One load phase: each created intent's id and when its answer arrived, and the bounds."""

    answered: dict[str, float]
    errors: int
    started: float
    ended: float
    #: The load client's CPU seconds (this process): is the client the bottleneck?
    cpu: float = 0.0

    @property
    def rate(self) -> float:
        """Creates answered per second over the phase."""
        return len(self.answered) / (self.ended - self.started)


def _create_body(account: int, reference: str) -> bytes:
    return json.dumps(
        {
            "account_id": account,
            "billing_amount": 1000,
            "billing_currency": "USD",
            "payment_type": "Card Payment",
            "merchant_reference": reference,
        }
    ).encode()


async def _create(
    session: Any, url: str, body: bytes, answered: dict[str, float], errors: list[int]
) -> None:
    try:
        async with session.post(url, data=body) as response:
            answer = await response.read()
            at = time.time()
            if response.status == 201 or response.status == 200:
                answered[str(json.loads(answer)["id"])] = at
            else:
                errors.append(response.status)
    except OSError:
        errors.append(0)


def _session(key: str) -> Any:
    import aiohttp

    return aiohttp.ClientSession(
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        connector=aiohttp.TCPConnector(limit=CONNECTIONS),
        timeout=aiohttp.ClientTimeout(total=30),
    )


async def saturate(url: str, key: str, account: int, tag: str, seconds: float) -> Load:
    """``CONNECTIONS`` creates always in flight for ``seconds``, then those in flight finish."""
    answered: dict[str, float] = {}
    errors: list[int] = []
    started, cpu = time.time(), time.process_time()
    stop = time.monotonic() + seconds
    counter = iter(range(sys.maxsize))

    async with _session(key) as session:

        async def loop() -> None:
            while time.monotonic() < stop:
                body = _create_body(account, f"ev-{tag}-{next(counter)}")
                await _create(session, url, body, answered, errors)

        await asyncio.gather(*(loop() for _ in range(CONNECTIONS)))
    return Load(answered, len(errors), started, time.time(), time.process_time() - cpu)


async def paced(url: str, key: str, account: int, tag: str, rate: float, seconds: float) -> Load:
    """Creates sent at ``rate`` per second on a fixed schedule (open loop) for ``seconds``."""
    answered: dict[str, float] = {}
    errors: list[int] = []
    count = max(1, round(rate * seconds))
    started = time.time()
    origin = time.monotonic()
    async with _session(key) as session:
        tasks = []
        for n in range(count):
            delay = origin + n / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            body = _create_body(account, f"ev-{tag}-{n}")
            tasks.append(asyncio.create_task(_create(session, url, body, answered, errors)))
        await asyncio.gather(*tasks)
    return Load(answered, len(errors), started, time.time())


def _sign(secret: str, event_id: str, body: bytes) -> dict[str, str]:
    from standardwebhooks import Webhook

    now = datetime.fromtimestamp(int(time.time()), UTC)
    return {
        "Content-Type": "application/json",
        "webhook-id": event_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(event_id, now, body.decode()),
    }


async def bare_posts(
    url: str, body: bytes, secret: str, seconds: float, count: int | None = None
) -> tuple[int, float]:
    """Signed posts of ``body``, ``CONNECTIONS`` in flight, for ``seconds`` (or until ``count``
    have been sent, if given): (2xx posts, seconds)."""
    import aiohttp

    done = 0
    counter = iter(range(sys.maxsize if count is None else count))
    stop = time.monotonic() + seconds
    start = time.perf_counter()
    connector = aiohttp.TCPConnector(limit=CONNECTIONS)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def loop() -> None:
            nonlocal done
            while time.monotonic() < stop:
                n = next(counter, None)
                if n is None:
                    return
                headers = _sign(secret, f"evt_bare_{n}", body)
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()
                    done += 200 <= response.status < 300

        await asyncio.gather(*(loop() for _ in range(CONNECTIONS)))
    return done, time.perf_counter() - start


async def bare_count(url: str, body: bytes, secret: str, count: int) -> tuple[int, float]:
    """:func:`bare_posts` of exactly ``count`` bodies (at most ``DRAIN_LIMIT`` seconds)."""
    return await bare_posts(url, body, secret, DRAIN_LIMIT, count)


# --- the run ----------------------------------------------------------------------------------


def _http(url: str, key: str | None = None, body: object = None) -> Any:
    request = urllib.request.Request(url, method="GET" if body is None else "POST")
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, data=data, timeout=10) as response:
        return json.loads(response.read())


def wait_for(
    receiver: str, ids: Iterable[str], deadline: float, *, name: str = HEALTHY
) -> dict[str, float]:
    """Poll the receiver until every intent of ``ids`` has arrived at hook ``name`` or the
    ``time.monotonic()`` ``deadline`` passes; the arrivals of those that did.

    Between full reads of the arrivals it polls only their count, and reads them again once
    enough have come for the missing ones to be there: the polling takes next to no CPU from
    the server being measured.
    """
    wanted = set(ids)
    while True:
        seen: dict[str, float] = _http(f"{receiver}/created/{name}")
        got = {i: seen[i] for i in wanted if i in seen}
        if len(got) == len(wanted) or time.monotonic() >= deadline:
            return got
        enough = len(seen) + len(wanted) - len(got)
        while time.monotonic() < deadline:
            time.sleep(0.02)
            if _http(f"{receiver}/count/{name}")["created"] >= enough:
                break


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 < q <= 1); ``inf`` stands for a missing value."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def latencies_ms(load: Load, arrived: dict[str, float]) -> list[float]:
    """Per intent: arrival minus answer, ms; ``inf`` for an event that never arrived."""
    return [
        (arrived[i] - at) * 1000 if i in arrived else math.inf for i, at in load.answered.items()
    ]


@dataclass(frozen=True, slots=True)
class EventsResult:
    """One run's figures (see the module docstring for each phase)."""

    create: Load
    e2e: Load
    e2e_arrived: dict[str, float]
    latency: Load
    latency_ms: list[float]
    bare_posts: int
    bare_seconds: float
    dead: Load
    dead_ms: list[float]
    repeats: int

    @property
    def e2e_rate(self) -> float:
        """Intents created in phase 2 over the time from its start to its last arrival."""
        end = max(self.e2e_arrived.values(), default=self.e2e.ended)
        if len(self.e2e_arrived) < len(self.e2e.answered):
            end = max(end, self.e2e.ended + DRAIN_LIMIT)
        return len(self.e2e_arrived) / (end - self.e2e.started)

    @property
    def tail_seconds(self) -> float:
        """From the end of phase 2's creates to its last arrival."""
        return max(self.e2e_arrived.values(), default=self.e2e.ended) - self.e2e.ended

    @property
    def delivery_rate(self) -> float:
        """Phase 2's arrivals over their first to last arrival."""
        times = self.e2e_arrived.values()
        span = max(times) - min(times) if len(times) > 1 else 0.0
        return len(times) / span if span > 0 else 0.0

    @property
    def bare_rate(self) -> float:
        """The bare client's posts per second."""
        return self.bare_posts / self.bare_seconds


def bench_events(
    seconds: float = SECONDS,
    paced_seconds: float = PACED_SECONDS,
    bare_seconds: float = BARE_SECONDS,
    progress: Callable[[str], None] = lambda _: None,
) -> EventsResult:
    """Start the server and the receiver, run the five phases, stop both."""
    with tempfile.TemporaryDirectory(prefix="bench-events-") as tmp:
        root = Path(tmp)
        db = str(root / "treasury.db")
        cli = _treasury_cli()
        key, account = _company(cli, db)
        port, receiver_port, dead_port = free_port(), free_port(), free_port()
        base, receiver = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{receiver_port}"
        receiver_cmd = [
            sys.executable,
            "-m",
            "bench.events",
            "receiver",
            str(receiver_port),
            str(dead_port),
        ]
        serve_cmd = [*cli, "serve", "--port", str(port), "--database", db]
        with (
            run_server(serve_cmd, port, root / "serve.log") as server,
            run_server(receiver_cmd, receiver_port, root / "receiver.log") as recv,
        ):
            pids = [server.pid, recv.pid]
            url = base + CREATE_PATH

            def phase(label: str, work: Callable[[], Any]) -> Any:
                _quiet(pids)
                progress(label)
                return asyncio.run(work())

            # Untimed, as every HTTP workload's warm-up: first connections, caches, the WAL.
            phase("warm-up", lambda: saturate(url, key, account, "w", min(seconds, WARMUP)))
            create: Load = phase(
                "create, no endpoint", lambda: saturate(url, key, account, "a", seconds)
            )
            _quiet(pids)  # every event of phase 1 fanned out (to no endpoint) before one exists
            endpoint = _http(
                base + "/api/v1/webhook-endpoints",
                key,
                {"url": f"{receiver}/hooks/{HEALTHY}", "events": [CREATED]},
            )
            secret = str(endpoint["secret"])
            e2e: Load = phase("end to end", lambda: saturate(url, key, account, "b", seconds))
            e2e_arrived = wait_for(receiver, e2e.answered, time.monotonic() + DRAIN_LIMIT)
            latency: Load = phase(
                "paced latency", lambda: paced(url, key, account, "c", PACED_RATE, paced_seconds)
            )
            arrived = wait_for(receiver, latency.answered, time.monotonic() + DRAIN_LIMIT)
            sample = _http(f"{receiver}/sample/{HEALTHY}")
            body = base64.b64decode(sample["body"])
            posts, elapsed = phase(
                "bare client",
                lambda: bare_posts(f"{receiver}/hooks/{BARE}", body, secret, bare_seconds),
            )
            _http(
                base + "/api/v1/webhook-endpoints",
                key,
                {"url": f"http://127.0.0.1:{dead_port}/hooks", "events": [CREATED]},
            )
            dead: Load = phase(
                "dead endpoint", lambda: paced(url, key, account, "e", PACED_RATE, paced_seconds)
            )
            dead_arrived = wait_for(receiver, dead.answered, time.monotonic() + DEAD_DRAIN_LIMIT)
            repeats = int(_http(f"{receiver}/count/{HEALTHY}")["repeats"])
    return EventsResult(
        create=create,
        e2e=e2e,
        e2e_arrived=e2e_arrived,
        latency=latency,
        latency_ms=latencies_ms(latency, arrived),
        bare_posts=posts,
        bare_seconds=elapsed,
        dead=dead,
        dead_ms=latencies_ms(dead, dead_arrived),
        repeats=repeats,
    )


# --- the rows ---------------------------------------------------------------------------------


def _ms(value: float, limit: float) -> str:
    if math.isinf(value):
        return f"> {limit:,.0f} s (not arrived)"
    return f"{value:,.1f} ms" if value < 1000 else f"{value / 1000:,.2f} s"


def _cpu(load: Load) -> str:
    return f"{load.cpu / len(load.answered) * 1e6:,.0f} us" if load.answered else ""


def _errors(load: Load) -> str:
    return f"; {load.errors:,} create errors" if load.errors else ""


def _latency(load: Load, values: list[float], limit: float) -> str:
    """``p50 …, p99 …``, with how many never arrived within ``limit`` and any create errors."""
    text = f"p50 {_ms(percentile(values, 0.5), limit)}, p99 {_ms(percentile(values, 0.99), limit)}"
    lost = sum(math.isinf(v) for v in values)
    if lost:
        text += f"; {lost:,} of {len(load.answered):,} not arrived"
    return text + _errors(load)


def events_rows(result: EventsResult) -> list[Row]:
    """The ``bench events`` rows, with ratios, targets and verdicts."""
    r = result
    create_rate = r.create.rate
    share = r.e2e_rate / create_rate
    all_arrived = len(r.e2e_arrived) == len(r.e2e.answered)
    p50, p99 = percentile(r.latency_ms, 0.5), percentile(r.latency_ms, 0.99)
    dead99 = percentile(r.dead_ms, 0.99)
    bare_share = r.delivery_rate / r.bare_rate if r.bare_rate else 0.0
    lost = len(r.e2e.answered) - len(r.e2e_arrived)
    return [
        Row(
            f"Events: create intent, no endpoint ({CONNECTIONS} conn)",
            f"{create_rate:,.0f} creates/s ({len(r.create.answered):,} in"
            f" {r.create.ended - r.create.started:.1f} s){_errors(r.create)}",
            _cpu(r.create),
        ),
        Row(
            f"Events: end to end, 1 endpoint, creates at saturation until every event arrived"
            f" ({CONNECTIONS} conn)",
            f"{r.e2e_rate:,.0f} events/s ({len(r.e2e.answered):,} created at"
            f" {r.e2e.rate:,.0f}/s; last arrival {r.tail_seconds:.1f} s after the creates)"
            + (f"; {lost:,} not arrived in {DRAIN_LIMIT:g} s" if lost else "")
            + _errors(r.e2e),
            _cpu(r.e2e),
            f"{share:.2f} of create rate",
            f">= {E2E_SHARE_TARGET:g} of create rate",
            verdict(share >= E2E_SHARE_TARGET and all_arrived),
        ),
        Row(
            f"Events: answer to receiver at {PACED_RATE:g} creates/s",
            _latency(r.latency, r.latency_ms, DRAIN_LIMIT),
            "",
            "",
            f"p50 <= {P50_TARGET_MS:g} ms, p99 <= {P99_TARGET_MS:g} ms",
            verdict(p50 <= P50_TARGET_MS and p99 <= P99_TARGET_MS),
        ),
        Row(
            f"Events: bare aiohttp client, same signed bodies ({CONNECTIONS} in flight)",
            f"{r.bare_rate:,.0f} posts/s",
        ),
        Row(
            "Events: deliveries to a fast receiver (first to last arrival, end-to-end phase)",
            f"{r.delivery_rate:,.0f} deliveries/s"
            + (f"; {r.repeats:,} repeats" if r.repeats else ""),
            "",
            f"{bare_share:.2f} of bare client",
            f">= {BARE_SHARE_TARGET:g} of bare client",
            verdict(bare_share >= BARE_SHARE_TARGET),
        ),
        Row(
            f"Events: healthy endpoint beside a dead one, {PACED_RATE:g} creates/s",
            _latency(r.dead, r.dead_ms, DEAD_DRAIN_LIMIT),
            "",
            "",
            f"p99 <= {DEAD_P99_TARGET_MS / 1000:g} s",
            verdict(dead99 <= DEAD_P99_TARGET_MS),
        ),
    ]


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "receiver":
        asyncio.run(serve_receiver(int(sys.argv[2]), int(sys.argv[3])))
    else:
        sys.exit("usage: python -m bench.events receiver PORT DEAD_PORT")
