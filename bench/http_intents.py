"""Requests per second over HTTP: ours against a bare aiohttp handler and against localstripe.

Method. Each server is one process on loopback, driven in turn by ``wrk`` (one client thread,
32 connections, a fixed duration, ``--latency``). Every workload gets one untimed warm-up run;
then each repetition runs every workload once, in a fixed order, so that all of them see the same
machine noise, and a ratio is the median of per-repetition ratios. Before each run the benchmark
waits (up to a few seconds) until none of the server processes is still busy, so that one
workload's aftermath (a server finishing queued work, a WAL checkpoint) does not eat into the next
run's CPU on this two-core machine. Every run's non-2xx answers and socket errors are counted;
the warm-up must have none, and every request shape is checked once by hand (status and body)
before any run.
``wrk`` is a closed loop (32 requests always in flight), so its latencies are those of a
saturated server, without correction for coordinated omission.

Servers and workloads:

- **ours**: ``treasury serve`` as shipped (SQLite file in a temp dir, WAL + ``synchronous=FULL``,
  so every write is on disk before its answer; background jobs on; the access log on), one company
  from ``treasury companies create``; the per-key rate limit switched off, as a load test of a real
  deployment would. ``ours_create``: ``POST /api/v1/payments/intent``, a new
  ``merchant_reference`` per request. ``ours_read``: ``GET /api/v1/payments/intent`` by the
  lookup id of one intent. ``ours_transfer``: ``POST /api/v1/transfer`` of 1.00 between two USD
  wallets (same currency, so it completes at once), a new ``reference`` per request (the API does
  not deduplicate on it; the counter keeps requests distinct anyway); the source wallet is funded
  beforehand through the API by one deposit completed with the sandbox control
  ``POST /api/v1/sandbox/deposits/{id}/complete``, with enough for every transfer the runs can make.
  ``ours_balance``: ``GET /api/v1/wallet/{id}/balance`` of that source wallet, whose history grows
  with every transfer run.
- **bare**: ``web.run_app`` with one handler per route, parsing the same JSON body or reading the
  same query parameter and answering a small JSON object (its access log is off, aiohttp's
  default). ``bare_create`` is the POST ceiling for both create intent and create transfer,
  ``bare_read`` the GET ceiling for both reads.
- **localstripe** (the peer, from PyPI, in its own venv; see ``bench/peers.py``), served by
  ``bench/localstripe_server.py`` with localstripe's own app. ``ls_create``:
  ``POST /v1/payment_intents`` form-encoded ``amount=1000&currency=usd``; ``ls_read``:
  ``GET /v1/payment_intents/{id}`` of one intent. localstripe keeps its state in a Python dict in
  memory; it is not durable. As shipped, after every write it pickles its *whole* store to a file
  (no ``fsync``), so each create costs more than the last: its rate falls as its store grows (on
  this machine about 190/s over its first 600 intents, 80/s by 1,200). To measure every repetition
  alike, its store is emptied (its own ``DELETE /_config/data``) before every ``ls_create`` run;
  the figure is therefore its rate while its store grows from empty over one run, its best case
  as shipped. ``ls_create_mem`` runs a second localstripe with that pickling switched off: its
  request handling alone, an upper bound on what localstripe could do, reported next to it.

``python -m bench.http_intents bare PORT`` runs the bare server on its own.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench import peers
from bench.report import Row, verdict

CONNECTIONS = 32
#: Default seconds per timed ``wrk`` run and per warm-up run. Nine workloads x three
#: repetitions x 4 s, plus nine 2 s warm-ups and start-up, is about 2.5 minutes.
SECONDS = 4.0
WARMUP_SECONDS = 2.0

CREATE_PATH = "/api/v1/payments/intent"
TRANSFER_PATH = "/api/v1/transfer"
LS_INTENTS_PATH = "/v1/payment_intents"
#: localstripe accepts any secret key of this shape.
LS_KEY = "sk_test_bench"
#: Amount of one benchmark transfer (minor units) and the deposit that funds them all:
#: 10^8 transfers, far beyond what any run can make.
TRANSFER_AMOUNT = 100
FUNDING = 10_000_000_000

#: Create intent over HTTP: at least this many requests per second, this share of the bare
#: handler's rate, this multiple of localstripe's create, and this p99 latency (ms).
CREATE_RATE_TARGET = 3000.0
CREATE_SHARE_TARGET = 0.15
CREATE_LOCALSTRIPE_TARGET = 12.0
CREATE_P99_TARGET_MS = 20.0
#: Reads (get intent, get balance): at least this share of the bare GET's rate.
READ_SHARE_TARGET = 0.50

#: ``wrk`` request builders. A counter per thread makes every create body distinct.
_INTENT_SCRIPT = """\
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %(key)s"
local n = 0
request = function()
  n = n + 1
  local body = '{"account_id": %(account)d, "billing_amount": 1000, "billing_currency": "USD",'
    .. ' "payment_type": "Card Payment", "merchant_reference": "bench-' .. n .. '"}'
  return wrk.format(nil, nil, nil, body)
end
"""
_TRANSFER_SCRIPT = """\
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %(key)s"
local n = 0
request = function()
  n = n + 1
  local body = '{"from_wallet_id": "%(source)s", "to_wallet_id": "%(target)s",'
    .. ' "from_amount": %(amount)d, "reference": "bench-' .. n .. '"}'
  return wrk.format(nil, nil, nil, body)
end
"""
_GET_SCRIPT = """\
wrk.headers["Authorization"] = "Bearer %(key)s"
"""
_LS_CREATE_SCRIPT = """\
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.headers["Authorization"] = "Bearer %(key)s"
wrk.body = "amount=1000&currency=usd"
"""


@dataclass(frozen=True, slots=True)
class Run:
    """One ``wrk`` run: requests per second and latency percentiles in milliseconds."""

    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int


@dataclass(frozen=True, slots=True)
class Runs:
    """One workload's runs, one per repetition."""

    runs: tuple[Run, ...]

    @property
    def rps(self) -> float:
        """Median requests per second."""
        return statistics.median(r.rps for r in self.runs)

    @property
    def p50_ms(self) -> float:
        """Median of the per-run p50 latencies."""
        return statistics.median(r.p50_ms for r in self.runs)

    @property
    def p99_ms(self) -> float:
        """Median of the per-run p99 latencies."""
        return statistics.median(r.p99_ms for r in self.runs)

    @property
    def errors(self) -> int:
        """Non-2xx responses and socket errors over all runs."""
        return sum(r.errors for r in self.runs)

    def ratio(self, other: Runs) -> float:
        """The median of per-repetition rate ratios (same repetition, same noise)."""
        return statistics.median(a.rps / b.rps for a, b in zip(self.runs, other.runs, strict=True))


@dataclass(frozen=True, slots=True)
class Workload:
    """One ``wrk`` target; ``before`` runs ahead of every run of it (warm-up included)."""

    url: str
    script: Path
    before: Callable[[], None] | None = None


def wrk_problem() -> str | None:
    """Why the HTTP rows cannot run, or ``None``."""
    return None if shutil.which("wrk") else "wrk is not installed (apt-get install wrk)"


@functools.cache
def localstripe_problem() -> str | None:
    """Why the localstripe rows cannot run (its install failed), or ``None``; installs it once."""
    return peers.problem(peers.LOCALSTRIPE)


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _treasury_cli() -> list[str]:
    return [sys.executable, "-m", "treasury_aiohttp.cli"]


def _wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server on port {port} did not start in {timeout:.0f}s")


@contextmanager
def run_server(args: list[str], port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``args`` (a server listening on ``port``) with its output in ``log``, the per-key
    rate limit off; yields once it accepts connections, stops it on the way out."""
    with log.open("wb") as out:
        # One API key drives thousands of requests a second here: our per-key rate limit
        # (100/s by default) is switched off, as a load test against a real deployment would.
        env = {**os.environ, "TREASURY_RATE_LIMIT_PER_SECOND": "0"}
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            _wait_ready(port, proc)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total


def _quiet(pids: list[int], timeout: float = 5.0) -> None:
    """Wait until the servers together use under ~10% of a CPU over 0.2 s (or ``timeout``)."""
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    deadline = time.monotonic() + timeout
    before = _cpu_ticks(pids)
    while time.monotonic() < deadline:
        time.sleep(0.2)
        after = _cpu_ticks(pids)
        if after - before <= 0.02 * hz:
            return
        before = after


def _ms(value: str, unit: str) -> float:
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def _wrk(url: str, script: Path, seconds: float) -> Run:
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{CONNECTIONS}",
            f"-d{max(1, round(seconds))}s",  # wrk takes whole seconds
            "--latency",
            "--timeout",
            "10s",
            "-s",
            str(script),
            url,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    done = re.search(r"(\d+) requests in", out)
    pct: dict[str, float] = {}
    for p, value, unit in re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M):
        pct[p] = _ms(value, unit)
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    socket_errors = re.search(r"Socket errors: (.*)", out)
    if socket_errors:
        errors += sum(int(n) for n in re.findall(r"\d+", socket_errors.group(1)))
    if not (rps and done and "50" in pct and "99" in pct):
        raise RuntimeError(f"cannot parse wrk output:\n{out}")
    return Run(float(rps.group(1)), pct["50"], pct["99"], int(done.group(1)), errors)


def _call(
    method: str,
    url: str,
    key: str,
    body: dict[str, object] | None = None,
    *,
    form: bool = False,
) -> dict[str, object]:
    """One request; raises on a non-2xx status; the JSON object answered."""
    data: bytes | None = None
    request = urllib.request.Request(url, method=method)
    request.add_header("Authorization", f"Bearer {key}")
    if body is not None:
        if form:
            data = urllib.parse.urlencode(body).encode()
            request.add_header("Content-Type", "application/x-www-form-urlencoded")
        else:
            data = json.dumps(body).encode()
            request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, data=data, timeout=10) as response:
        answer = json.loads(response.read())
    if not isinstance(answer, dict):
        raise RuntimeError(f"{method} {url}: expected a JSON object, got {answer!r}")
    return answer


def _expect(answer: dict[str, object], what: str, **fields: object) -> dict[str, object]:
    wrong = {k: answer.get(k) for k, v in fields.items() if answer.get(k) != v}
    if wrong:
        raise RuntimeError(f"unexpected {what} answer (wanted {fields}): {answer}")
    return answer


@dataclass(frozen=True, slots=True)
class _Ours:
    """What the requests against our server need."""

    key: str
    account: int
    lookup_id: str
    intent_id: object
    source: str
    target: str


def _set_up_ours(base: str, key: str, account: int) -> _Ours:
    """One intent to read; two USD wallets, the source funded by a completed sandbox deposit."""
    intent = _expect(
        _call(
            "POST",
            base + CREATE_PATH,
            key,
            {
                "account_id": account,
                "billing_amount": 1000,
                "billing_currency": "USD",
                "payment_type": "Card Payment",
                "merchant_reference": "bench-read",
            },
        ),
        "create intent",
        status="INITIALIZED",
    )
    lookup_id = str(intent["payment_intent_lookup_id"])
    query = urllib.parse.urlencode({"payment_intent_lookup_id": lookup_id})
    _expect(_call("GET", f"{base}{CREATE_PATH}?{query}", key), "get intent", id=intent["id"])
    wallets = [
        str(_call("POST", base + "/api/v1/wallet", key, {"name": name, "currency_id": "USD"})["id"])
        for name in ("Bench source", "Bench target")
    ]
    source, target = wallets
    deposit = _call(
        "POST",
        base + "/api/v1/deposit",
        key,
        {"wallet_id": source, "from_amount": FUNDING, "from_currency_id": "USD"},
    )
    _expect(
        _call("POST", f"{base}/api/v1/sandbox/deposits/{deposit['id']}/complete", key, {}),
        "complete deposit",
        status="completed",
    )
    transfer = _call(
        "POST",
        base + TRANSFER_PATH,
        key,
        {"from_wallet_id": source, "to_wallet_id": target, "from_amount": TRANSFER_AMOUNT},
    )
    _expect(transfer, "create transfer", status="completed", to_amount=TRANSFER_AMOUNT)
    _expect(
        _call("GET", f"{base}/api/v1/wallet/{source}/balance", key),
        "get balance",
        wallet_id=source,
        available_balance=FUNDING - TRANSFER_AMOUNT,
    )
    return _Ours(key, account, lookup_id, intent["id"], source, target)


def our_requests(base: str, ours: _Ours) -> dict[str, tuple[str, str]]:
    """Our four workloads (``create``, ``read``, ``transfer``, ``balance``) against the server
    at ``base``, each as (URL, ``wrk`` script)."""
    query = urllib.parse.urlencode({"payment_intent_lookup_id": ours.lookup_id})
    get = _GET_SCRIPT % {"key": ours.key}
    transfer = _TRANSFER_SCRIPT % {
        "key": ours.key,
        "source": ours.source,
        "target": ours.target,
        "amount": TRANSFER_AMOUNT,
    }
    return {
        "create": (base + CREATE_PATH, _INTENT_SCRIPT % {"key": ours.key, "account": ours.account}),
        "read": (f"{base}{CREATE_PATH}?{query}", get),
        "transfer": (base + TRANSFER_PATH, transfer),
        "balance": (f"{base}/api/v1/wallet/{ours.source}/balance", get),
    }


class _Localstripe:
    """A localstripe server's base URL, and the one intent its read workload fetches."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.intent_id = ""

    def reset(self) -> None:
        """Empty its store (its own endpoint), then create the intent to read."""
        request = urllib.request.Request(self.base + "/_config/data", method="DELETE")
        with urllib.request.urlopen(request, timeout=10):
            pass
        intent = _call(
            "POST",
            self.base + LS_INTENTS_PATH,
            LS_KEY,
            {"amount": 1000, "currency": "usd"},
            form=True,
        )
        _expect(intent, "localstripe create", amount=1000, currency="usd")
        self.intent_id = str(intent["id"])
        read = _call("GET", self.read_url(), LS_KEY)
        _expect(read, "localstripe get", id=self.intent_id)

    def read_url(self) -> str:
        """The URL of the intent to read."""
        return f"{self.base}{LS_INTENTS_PATH}/{self.intent_id}"


def _company(cli: list[str], db: str) -> tuple[str, int]:
    created = subprocess.run(
        [*cli, "companies", "create", "Bench Co", "--database", db],
        check=True,
        capture_output=True,
        text=True,
    )
    company = json.loads(created.stdout.strip().splitlines()[-1])
    return str(company["secret_key"]), int(company["account_id"])


def bench_http(
    seconds: float = SECONDS,
    reps: int = 3,
    warmup: float = WARMUP_SECONDS,
    *,
    localstripe: bool = True,
) -> dict[str, Runs]:
    """Interleaved ``wrk`` runs of every workload; keys as in the module docstring.

    ``ours_create``, ``ours_read``, ``ours_transfer``, ``ours_balance``, ``bare_create``,
    ``bare_read``, and, unless ``localstripe`` is false or its install fails, ``ls_create``,
    ``ls_create_mem`` and ``ls_read``. Each workload gets one untimed ``warmup`` run first.
    """
    ls_python = None
    if localstripe and localstripe_problem() is None:
        ls_python = str(peers.ensure(peers.LOCALSTRIPE))
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        db = str(root / "treasury.db")
        cli = _treasury_cli()
        key, account = _company(cli, db)
        ports = {name: free_port() for name in ("ours", "bare", "ls", "ls_mem")}
        base = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
        commands = {
            "ours": [*cli, "serve", "--port", str(ports["ours"]), "--database", db],
            "bare": [sys.executable, "-m", "bench.http_intents", "bare", str(ports["bare"])],
        }
        if ls_python is not None:
            server = str(Path(__file__).with_name("localstripe_server.py"))
            for name, extra in (("ls", []), ("ls_mem", ["--no-dump"])):
                store = str(root / f"{name}.pickle")
                commands[name] = [
                    ls_python,
                    server,
                    "--port",
                    str(ports[name]),
                    "--store",
                    store,
                    *extra,
                ]
        # Start them all, then wait for each: the start-ups overlap.
        procs = [
            stack.enter_context(run_server(args, ports[name], root / f"{name}.log"))
            for name, args in commands.items()
        ]
        pids = [p.pid for p in procs]
        ours = _set_up_ours(base["ours"], key, account)
        requests = our_requests(base["ours"], ours)
        scripts = {name: text for name, (_, text) in requests.items()}
        scripts |= {
            "ls_create": _LS_CREATE_SCRIPT % {"key": LS_KEY},
            "ls_get": _GET_SCRIPT % {"key": LS_KEY},
        }
        paths = {}
        for name, text in scripts.items():
            paths[name] = root / f"{name}.lua"
            paths[name].write_text(text)
        query = "?" + urllib.parse.urlencode({"payment_intent_lookup_id": ours.lookup_id})
        _expect(
            _call("POST", base["bare"] + CREATE_PATH, key, {"merchant_reference": "x"}),
            "bare create",
            merchant_reference="x",
        )
        _expect(_call("GET", base["bare"] + CREATE_PATH + query, key), "bare get", id=1)
        workloads: dict[str, Callable[[], Workload]] = {
            "ours_create": lambda: Workload(requests["create"][0], paths["create"]),
            "bare_create": lambda: Workload(base["bare"] + CREATE_PATH, paths["create"]),
            "ours_read": lambda: Workload(requests["read"][0], paths["read"]),
            "bare_read": lambda: Workload(base["bare"] + CREATE_PATH + query, paths["read"]),
            "ours_transfer": lambda: Workload(requests["transfer"][0], paths["transfer"]),
            "ours_balance": lambda: Workload(requests["balance"][0], paths["balance"]),
        }
        if ls_python is not None:
            ls, ls_mem = _Localstripe(base["ls"]), _Localstripe(base["ls_mem"])
            ls.reset()
            ls_mem.reset()
            # The store is emptied before each create run; the read runs right after it, on
            # the intent made by that reset.
            workloads["ls_create"] = lambda: Workload(
                ls.base + LS_INTENTS_PATH, paths["ls_create"], ls.reset
            )
            workloads["ls_read"] = lambda: Workload(ls.read_url(), paths["ls_get"])
            workloads["ls_create_mem"] = lambda: Workload(
                ls_mem.base + LS_INTENTS_PATH, paths["ls_create"], ls_mem.reset
            )

        def run(name: str, duration: float) -> Run:
            workload = workloads[name]()
            if workload.before is not None:
                workload.before()
                workload = workloads[name]()  # its URL may name what ``before`` made
            _quiet(pids)
            return _wrk(workload.url, workload.script, duration)

        for name in workloads:
            warm = run(name, warmup)
            if warm.errors:
                logs = ", ".join(str(root / f"{n}.log") for n in commands)
                raise RuntimeError(f"{name}: {warm.errors} errors in the warm-up (logs: {logs})")
        runs: dict[str, list[Run]] = {name: [] for name in workloads}
        for _ in range(reps):
            for name in workloads:
                runs[name].append(run(name, seconds))
    return {name: Runs(tuple(values)) for name, values in runs.items()}


def _figure(runs: Runs) -> str:
    rates = [r.rps for r in runs.runs]
    return f"{runs.rps:,.0f} req/s ({min(rates):,.0f}-{max(rates):,.0f})"


def _latency(runs: Runs) -> str:
    errors = f", {runs.errors} errors" if runs.errors else ""
    return f"p50 {runs.p50_ms:.1f} ms, p99 {runs.p99_ms:.1f} ms{errors}"


def http_rows(samples: dict[str, Runs]) -> list[Row]:
    """Every HTTP row, with ratios, targets and verdicts; localstripe rows only if measured.

    The figure column is the median rate (min-max over repetitions); the next column holds the
    median p50 and p99 latencies instead of client CPU.
    """
    conns = f"{CONNECTIONS} conn"
    bare_post, bare_get = samples["bare_create"], samples["bare_read"]
    create, read = samples["ours_create"], samples["ours_read"]
    transfer, balance = samples["ours_transfer"], samples["ours_balance"]
    ls_create, ls_mem, ls_read = (
        samples.get("ls_create"),
        samples.get("ls_create_mem"),
        samples.get("ls_read"),
    )
    rows = [
        Row(f"HTTP: bare aiohttp JSON POST ({conns})", _figure(bare_post), _latency(bare_post)),
        Row(f"HTTP: bare aiohttp JSON GET ({conns})", _figure(bare_get), _latency(bare_get)),
    ]
    if ls_create is not None and ls_mem is not None and ls_read is not None:
        rows += [
            Row(
                f"HTTP: localstripe POST /v1/payment_intents, store emptied per run ({conns})",
                _figure(ls_create),
                _latency(ls_create),
                f"{ls_create.ratio(bare_post):.3f} of bare",
            ),
            Row(
                f"HTTP: localstripe POST /v1/payment_intents, no store pickling ({conns})",
                _figure(ls_mem),
                _latency(ls_mem),
                f"{ls_mem.ratio(bare_post):.3f} of bare",
            ),
            Row(
                f"HTTP: localstripe GET /v1/payment_intents/{{id}} ({conns})",
                _figure(ls_read),
                _latency(ls_read),
                f"{ls_read.ratio(bare_get):.3f} of bare",
            ),
        ]
    share = create.ratio(bare_post)
    met = (
        create.rps >= CREATE_RATE_TARGET
        and share >= CREATE_SHARE_TARGET
        and create.p99_ms <= CREATE_P99_TARGET_MS
        and create.errors == 0
    )
    create_ratio = f"{share:.3f} of bare"
    create_target = (
        f">= {CREATE_RATE_TARGET:,.0f}/s, >= {CREATE_SHARE_TARGET:.2f} of bare,"
        f" p99 <= {CREATE_P99_TARGET_MS:.0f} ms"
    )
    if ls_create is not None and ls_mem is not None:
        over_ls = create.ratio(ls_create)
        met = met and over_ls >= CREATE_LOCALSTRIPE_TARGET
        create_ratio += f", {over_ls:.1f}x localstripe ({create.ratio(ls_mem):.1f}x unpickled)"
        create_target += f", >= {CREATE_LOCALSTRIPE_TARGET:.0f}x localstripe"
    else:
        create_target += " (localstripe not measured)"
    rows.append(
        Row(
            f"HTTP: POST /api/v1/payments/intent, SQLite ({conns})",
            _figure(create),
            _latency(create),
            create_ratio,
            create_target,
            verdict(met),
        )
    )
    for label, runs in (
        ("GET /api/v1/payments/intent by lookup id", read),
        ("GET /api/v1/wallet/{id}/balance", balance),
    ):
        share = runs.ratio(bare_get)
        ratio = f"{share:.3f} of bare GET"
        if label.endswith("lookup id") and ls_read is not None:
            ratio += f", {runs.ratio(ls_read):.1f}x localstripe GET"
        rows.append(
            Row(
                f"HTTP: {label}, SQLite ({conns})",
                _figure(runs),
                _latency(runs),
                ratio,
                f">= {READ_SHARE_TARGET:.2f} of bare GET",
                verdict(share >= READ_SHARE_TARGET and runs.errors == 0),
            )
        )
    rows.append(
        Row(
            f"HTTP: POST /api/v1/transfer, USD to USD, SQLite ({conns})",
            _figure(transfer),
            _latency(transfer),
            f"{transfer.ratio(bare_post):.3f} of bare POST",
        )
    )
    return rows


def run_bare(port: int) -> None:
    """The bare aiohttp server: parse the JSON body or the query parameter, answer small JSON."""
    from aiohttp import web

    async def create(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response(
            {"id": 1, "status": "INITIALIZED", "merchant_reference": body["merchant_reference"]}
        )

    async def get(request: web.Request) -> web.Response:
        lookup_id = request.query["payment_intent_lookup_id"]
        return web.json_response({"id": 1, "payment_intent_lookup_id": lookup_id})

    app = web.Application()
    app.router.add_post(CREATE_PATH, create)
    app.router.add_get(CREATE_PATH, get)
    web.run_app(app, host="127.0.0.1", port=port, print=None)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "bare":
        run_bare(int(sys.argv[2]))
    else:
        sys.exit(f"usage: {os.path.basename(sys.executable)} -m bench.http_intents bare PORT")
