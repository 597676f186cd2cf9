"""Schemathesis over the served OpenAPI document, every check on: the document and the server agree.

A sandbox treasury on an SQLite file is served over real HTTP on 127.0.0.1 (port 0) by a
background thread with its own event loop, so nothing here touches pytest-asyncio's loop. The
schemathesis CLI then runs in a subprocess against ``/api/v1/openapi.json`` as one company (its
secret key given for the document's ``bearerAuth`` scheme) and the operator (an operator key for
``operatorAuth``, the bank-statement route's) with ``--checks all``, among them:

- ``not_a_server_error``: no 5xx;
- ``status_code_conformance``, ``content_type_conformance``, ``response_schema_conformance``,
  ``response_headers_conformance``: every answer is one the operation documents;
- ``positive_data_acceptance``: a request the schema calls valid is not refused with 400;
- ``negative_data_rejection``: a request the schema calls invalid is refused;
- ``missing_required_header``, ``ignored_auth``: no key is 401;
- ``unsupported_method``, ``allow_header_conformance``: other methods are 405 with the
  documented methods in ``Allow``; the stateful checks (``use_after_free``, …) too.

``tests/fuzz/hooks.py`` gives each distinct request its own ``Idempotency-Key`` and lets
through only the positive-data refusals no JSON Schema can state (an intent's state, a checksum,
two fields that must differ); its docstrings list them.

Every operation is tested, the sandbox controls and the hosted pages included (advancing the
sandbox clock is cheap here: no jobs run in this server). Generation is bounded and seeded (a
fixed ``--seed`` and ``--max-examples``), so a run is reproducible and takes about a minute on
two cores.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from treasury_aiohttp import create_app
from treasury_core import TreasuryConfig, bootstrap
from treasury_core.testing.fakes.clock import FakeClock

#: Every check schemathesis has.
CHECKS = "all"
ROOT = str(Path(__file__).resolve().parents[2])
MAX_EXAMPLES = 20
SEED = 7
# The whole run, all phases and operations, must end well inside this.
RUN_TIMEOUT_SECONDS = 300


@dataclass(frozen=True)
class Served:
    base_url: str
    secret_key: str
    operator_key: str


async def _start(directory: Path) -> tuple[web.AppRunner, Served]:
    treasury = bootstrap(
        TreasuryConfig(
            database_url=f"sqlite:///{directory / 'fuzz.db'}",
            pool_size=4,
            withdrawal_fees={"*": (25, 100)},
            # The fuzzer sends hundreds of requests a second with one key; the limiter would
            # answer most of them 429 (documented, but then the operations go untested).
            rate_limit_per_second=0,
            # It also sends hundreds of wrong keys from one address (its authentication
            # checks); throttled, the right key's requests from that address would be 429 too.
            auth_failure_limit_per_second=0,
            # The files rail, so POST /api/v1/bank-statements reads what it is sent (on another
            # rail it refuses every statement); no operation here waits for a settlement.
            bank_rail="files",
            bank_debtor_name="Acme Treasury BV",
            bank_debtor_iban="NL91ABNA0417164300",
        ),
        clock=FakeClock(),
        wall_clock=FakeClock(),
    )
    created = await treasury.companies.create_company("Acme")
    _, operator_key = await treasury.companies.create_operator_key("fuzz")
    runner = web.AppRunner(create_app(treasury, close_treasury=True))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    return runner, Served(f"http://{host}:{port}", created.secret_key, operator_key)


@contextmanager
def serve(directory: Path) -> Iterator[Served]:
    """The sandbox server on a free loopback port, run by a thread with its own event loop."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fuzz-server", daemon=True)
    thread.start()
    try:
        runner, served = asyncio.run_coroutine_threadsafe(_start(directory), loop).result(30)
        try:
            yield served
        finally:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def test_every_operation_answers_as_documented(tmp_path: Path) -> None:
    with serve(tmp_path) as served:
        # The key as the document's bearerAuth scheme, not a fixed header: schemathesis then
        # also sends requests without it (missing_required_header, ignored_auth).
        config = tmp_path / "schemathesis.toml"
        config.write_text(
            f'[auth.openapi.bearerAuth]\nbearer = "{served.secret_key}"\n'
            f'[auth.openapi.operatorAuth]\nbearer = "{served.operator_key}"\n'
        )
        command = [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(config),
            "run",
            f"{served.base_url}/api/v1/openapi.json",
            "--checks",
            CHECKS,
            # Report every failure of an operation, not only its first.
            "--continue-on-failure",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--seed",
            str(SEED),
            # One worker: hypothesis describes lambdas with ast.parse, which CPython 3.11 before
            # 3.11.8 cannot run in two threads at once ("AST constructor recursion depth
            # mismatch", python/cpython#106905), and the server needs the other core anyway.
            "--workers",
            "1",
            "--generation-database",
            "none",
            "--no-color",
        ]
        result = subprocess.run(  # the command is fixed above; no shell
            command,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_SECONDS,
            cwd=tmp_path,
            check=False,
            env={
                **os.environ,
                "SCHEMATHESIS_HOOKS": "tests.fuzz.hooks",
                "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p),
            },
        )
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
