"""Create-payment-intent requests per second over HTTP, against a bare aiohttp JSON handler.

Two server processes on loopback, each driven by ``wrk`` (32 connections, one client thread,
fixed duration) in turn within every repetition:

- **ours**: ``treasury serve`` as shipped (SQLite file in a temp dir, WAL + ``synchronous=FULL``,
  background jobs on), a company made by ``treasury companies create``;
  ``POST /api/v1/payments/intent`` with the secret key, and
  ``GET /api/v1/payments/intent?payment_intent_lookup_id=…`` of one intent for reference;
- **bare**: ``web.run_app`` with one handler per route that parses the same JSON body (or reads
  the same query parameter) and answers a small JSON object.

``python -m bench.http_intents bare PORT`` runs the bare server on its own.
"""

from __future__ import annotations

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
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CONNECTIONS = 32
CREATE_PATH = "/api/v1/payments/intent"
#: ``wrk``'s request builder: one new merchant reference per request (a counter per thread).
_POST_SCRIPT = """\
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
_GET_SCRIPT = """\
wrk.headers["Authorization"] = "Bearer %(key)s"
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


def wrk_problem() -> str | None:
    """Why the HTTP rows cannot run, or ``None``."""
    return None if shutil.which("wrk") else "wrk is not installed (apt-get install wrk)"


def _free_port() -> int:
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
def _server(args: list[str], port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        # One API key drives thousands of requests a second here: the per-key rate limit
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


def _ms(value: str, unit: str) -> float:
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def _wrk(url: str, script: Path, seconds: float) -> Run:
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{CONNECTIONS}",
            f"-d{seconds:g}s",
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


def _http(method: str, url: str, key: str, body: dict[str, object] | None = None) -> object:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {key}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def bench_http(seconds: float, reps: int, warmup: float = 2.0) -> dict[str, Runs]:
    """``ours_create``, ``bare_create``, ``ours_read``, ``bare_read``: interleaved ``wrk`` runs.

    Each workload gets one untimed warm-up run of ``warmup`` seconds first.
    """
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp:
        root = Path(tmp)
        db = str(root / "treasury.db")
        cli = _treasury_cli()
        created = subprocess.run(
            [*cli, "companies", "create", "Bench Co", "--database", db],
            check=True,
            capture_output=True,
            text=True,
        )
        company = json.loads(created.stdout.strip().splitlines()[-1])
        key, account = str(company["secret_key"]), int(company["account_id"])
        ours_port, bare_port = _free_port(), _free_port()
        ours_args = [*cli, "serve", "--port", str(ours_port), "--database", db]
        bare_args = [sys.executable, "-m", "bench.http_intents", "bare", str(bare_port)]
        post = root / "post.lua"
        post.write_text(_POST_SCRIPT % {"key": key, "account": account})
        get = root / "get.lua"
        get.write_text(_GET_SCRIPT % {"key": key})
        with (
            _server(ours_args, ours_port, root / "ours.log"),
            _server(bare_args, bare_port, root / "bare.log"),
        ):
            ours, bare = f"http://127.0.0.1:{ours_port}", f"http://127.0.0.1:{bare_port}"
            intent = _http(
                "POST",
                ours + CREATE_PATH,
                key,
                {
                    "account_id": account,
                    "billing_amount": 1000,
                    "billing_currency": "USD",
                    "payment_type": "Card Payment",
                    "merchant_reference": "bench-read",
                },
            )
            if not isinstance(intent, dict) or intent.get("status") != "INITIALIZED":
                raise RuntimeError(f"unexpected create answer: {intent}")
            query = f"?payment_intent_lookup_id={intent['payment_intent_lookup_id']}"
            read = _http("GET", ours + CREATE_PATH + query, key)
            if not isinstance(read, dict) or read.get("id") != intent["id"]:
                raise RuntimeError(f"unexpected read answer: {read}")
            workloads = {
                "ours_create": (ours + CREATE_PATH, post),
                "bare_create": (bare + CREATE_PATH, post),
                "ours_read": (ours + CREATE_PATH + query, get),
                "bare_read": (bare + CREATE_PATH + query, get),
            }
            for url, script in workloads.values():
                _wrk(url, script, warmup)
            runs: dict[str, list[Run]] = {name: [] for name in workloads}
            for _ in range(reps):
                for name, (url, script) in workloads.items():
                    runs[name].append(_wrk(url, script, seconds))
    return {name: Runs(tuple(values)) for name, values in runs.items()}


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
