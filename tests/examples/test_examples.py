"""Every program in examples/ runs as a user would run it, exits 0 quickly, and says what it did."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TIMEOUT_SECONDS = 60


def run_example(name: str) -> list[str]:
    """Run ``examples/<name>`` in a fresh interpreter; its stdout lines."""
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        cwd=EXAMPLES.parent,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout.splitlines()


def test_every_example_program_is_tested_here() -> None:
    tested = {"async_services.py", "mount_in_aiohttp_app.py", "sync_backend.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


def test_async_services() -> None:
    lines = run_example("async_services.py")
    assert lines[0] == "company 1 created"
    assert lines[1] == "deposit pending: USD pending_in=100000"
    moved = re.fullmatch(
        r"transfer pending: 25000 USD -> (?P<eur>\d+) EUR at (?P<rate>[0-9.]+)", lines[2]
    )
    assert moved is not None, lines[2]
    eur, rate = int(moved["eur"]), float(moved["rate"])
    assert eur == pytest.approx(25000 * rate, abs=1)
    assert lines[3] == "transfer completed"
    assert lines[4] == "refused: insufficient_funds (invalid_request)"
    assert lines[5] == "USD wallet: balance=75000 available=75000"
    assert lines[6] == f"EUR wallet: balance={eur} available={eur}"
    assert len(lines) == 7


def test_mount_in_aiohttp_app() -> None:
    assert run_example("mount_in_aiohttp_app.py") == [
        "GET /: 200 {'shop': 'open'}",
        "POST /treasury/api/v1/wallet: 200 EUR",
        "GET balance without a key: 401 authentication_error",
        "GET balance: 200 0 EUR",
        "GET /wallet-count: 200 {'wallets': 1}",
        "OpenAPI server URL: /treasury",
    ]


def test_sync_backend() -> None:
    assert run_example("sync_backend.py") == [
        "deposits: 8 answered, statuses [201]",
        "unknown wallet: 404 not_found",
        # 1,000 + 2,000 + … + 8,000 from eight concurrent requests: none lost, none doubled.
        "balance: 200 USD 36000",
    ]
