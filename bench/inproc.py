"""CPU per request through the HTTP app's own handler chain, in process, without sockets.

``python -m bench.inproc [get] [balance] [create] [transfer] [access] [fanout]`` builds the app of
:func:`treasury_aiohttp.app.create_app` on an SQLite file in a temp dir, then hands it
requests made with aiohttp's ``make_mocked_request`` (router, the four middlewares, the
handler and the storage all run; HTTP parsing and socket writes do not) and prints the
process's CPU time per request (all threads: the group writer's work counts), the best of five
repetitions. Writes are sent 32 at a time, as 32 connections would, so group commit works as
it does in the server.

It is what most in-process rows of CHANGELOG.md's "Performance history" were measured with:
CPU time moves far less with the machine's other load than throughput does. Profile a workload
with ``py-spy record --threads -- python -m bench.inproc create``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

from aiohttp import web
from aiohttp.streams import StreamReader
from aiohttp.test_utils import make_mocked_request

from treasury_aiohttp.app import create_app
from treasury_aiohttp.settings import AppSettings
from treasury_core import (
    CreateIntentRequest,
    CreateWalletRequest,
    PaymentType,
    Treasury,
    TreasuryConfig,
    bootstrap,
)
from treasury_core.movements.requests import CreateDepositRequest

#: Requests per repetition: reads, and writes (slower, and they grow the database).
READS, WRITES = 3_000, 1_000
#: Writes in flight at once.
CONCURRENCY = 32
REPETITIONS = 5


async def measure(workloads: list[str]) -> dict[str, float]:
    """Microseconds of process CPU per request, per workload."""
    with tempfile.TemporaryDirectory(prefix="bench-inproc-") as tmp:
        database = Path(tmp) / "inproc.db"
        treasury = bootstrap(
            TreasuryConfig(
                database_url=f"sqlite:///{database}",
                adapters=[AppSettings(rate_limit_per_second=0)],
            )
        )
        app = create_app(treasury, close_treasury=True)
        app.freeze()
        await app.startup()
        try:
            return await _measure(app, treasury, workloads)
        finally:
            await app.cleanup()


async def _measure(
    app: web.Application, treasury: object, workloads: list[str]
) -> dict[str, float]:

    assert isinstance(treasury, Treasury)
    loop = asyncio.get_running_loop()
    created = await treasury.companies.create_company("Bench")
    company, key = created.company.id, created.secret_key
    protocol = mock.Mock()  # the payload reader only asks a protocol to pause and resume
    protocol._reading_paused = False

    def request(method: str, path: str, body: dict[str, object] | None = None) -> web.Request:
        headers = {"Authorization": f"Bearer {key}", "Host": "bench"}
        if body is None:
            return make_mocked_request(method, path, headers=headers, app=app, loop=loop)
        data = json.dumps(body).encode()
        headers |= {"Content-Type": "application/json", "Content-Length": str(len(data))}
        payload = StreamReader(protocol, 2**16, loop=loop)
        payload.feed_data(data)
        payload.feed_eof()
        return make_mocked_request(
            method, path, headers=headers, app=app, loop=loop, payload=payload
        )

    counter = iter(range(10**9))

    def create() -> web.Request:
        return request(
            "POST",
            "/api/v1/payments/intent",
            {
                "account_id": created.merchant_account.id,
                "billing_amount": 1000,
                "billing_currency": "USD",
                "payment_type": "Card Payment",
                "merchant_reference": f"bench-{next(counter)}",
            },
        )

    first = await app._handle(create())
    assert isinstance(first, web.Response)
    assert isinstance(first.body, bytes)
    lookup_id = json.loads(first.body)["payment_intent_lookup_id"]
    source, target = [
        (await treasury.wallets.create(company, CreateWalletRequest(name=n, currency_id="USD"))).id
        for n in ("source", "target")
    ]
    deposit = await treasury.deposits.create(
        company,
        CreateDepositRequest(wallet_id=source, from_amount=99_999_999_999, from_currency_id="USD"),
    )
    await treasury.deposits.complete(None, deposit.id)
    makers: dict[str, Callable[[], web.Request]] = {
        "get": lambda: request(
            "GET", f"/api/v1/payments/intent?payment_intent_lookup_id={lookup_id}"
        ),
        "balance": lambda: request("GET", f"/api/v1/wallet/{source}/balance"),
        "create": create,
        "transfer": lambda: request(
            "POST",
            "/api/v1/transfer",
            {"from_wallet_id": source, "to_wallet_id": target, "from_amount": 1},
        ),
    }
    results: dict[str, float] = {}
    for name in workloads:
        make = makers[name]
        response = await app._handle(make())
        if response.status != 200:
            raise RuntimeError(f"{name}: {response.status}")
        writes = name in ("create", "transfer")
        count = WRITES if writes else READS
        best = float("inf")
        for _ in range(REPETITIONS):
            requests = [make() for _ in range(count)]
            started = time.process_time()
            step = CONCURRENCY if writes else 1
            for start in range(0, count, step):
                await asyncio.gather(*(app._handle(r) for r in requests[start : start + step]))
            best = min(best, (time.process_time() - started) / count * 1e6)
        results[name] = best
    return results


def access_line() -> float:
    """Microseconds per access-log line as ``treasury serve`` configures the log (to memory)."""
    import io
    import logging

    from treasury_aiohttp import logs
    from treasury_aiohttp.access_log import RedactingAccessLogger

    logger = logging.getLogger("aiohttp.access")
    saved = logger.handlers[:], logger.propagate, logging.getLogger().handlers[:]
    logs.configure()
    try:
        [handler] = logger.handlers
        assert isinstance(handler, logs.BufferedLineHandler)
        handler.setStream(io.StringIO())
        request = make_mocked_request("POST", "/api/v1/payments/intent")
        response = web.Response(status=200, body=b"x" * 300)
        access = RedactingAccessLogger(logger, "")
        best = float("inf")
        for _ in range(REPETITIONS):
            started = time.process_time()
            for _ in range(READS * 5):
                access.log(request, response, 0.001)
            best = min(best, (time.process_time() - started) / (READS * 5) * 1e6)
        handler.close()
        return best
    finally:
        logger.handlers[:], logger.propagate, logging.getLogger().handlers[:] = saved


async def fan_out() -> float:
    """CPU microseconds per event fanned out by the dispatcher (a company with no endpoints:
    every create-intent request leaves one such event to the worker)."""
    with tempfile.TemporaryDirectory(prefix="bench-inproc-") as tmp:
        treasury = bootstrap(TreasuryConfig(database_url=f"sqlite:///{Path(tmp) / 'f.db'}"))
        try:
            created = await treasury.companies.create_company("Bench")
            request = CreateIntentRequest(
                account_id=created.merchant_account.id,
                billing_amount=1000,
                billing_currency="USD",
                payment_type=PaymentType.CARD_PAYMENT,
            )
            best = float("inf")
            for _ in range(REPETITIONS):
                for _ in range(WRITES):
                    await treasury.payments.create(created.company.id, request)
                started, events = time.process_time(), 0
                while batch := await treasury.notifications.dispatch(500):
                    events += batch
                best = min(best, (time.process_time() - started) / events * 1e6)
            return best
        finally:
            treasury.close()


def main() -> None:
    """Print CPU microseconds per request for the workloads named (default: all four), and
    per access line (``access``) and per event fanned out (``fanout``) when named."""
    workloads = sys.argv[1:] or ["get", "balance", "create", "transfer"]
    requests = [w for w in workloads if w not in ("access", "fanout")]
    if requests:
        for name, micros in asyncio.run(measure(requests)).items():
            print(f"{name:9s} {micros:7.1f} us CPU per request (process, all threads)")
    if "access" in workloads:
        print(f"access    {access_line():7.1f} us CPU per access-log line")
    if "fanout" in workloads:
        print(f"fanout    {asyncio.run(fan_out()):7.1f} us CPU per event fanned out")


if __name__ == "__main__":
    main()
