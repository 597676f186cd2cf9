"""A client generated from the served OpenAPI document walks the README's walk-through.

openapi-python-client (pinned in ``bench/peers.py``) lives in a venv of its own under
``build/``: it brings its own pins of pydantic, httpx and ruff. It generates a client of the
document a real server on loopback serves, and ``openapi_client_walkthrough.py`` runs the
README's steps through that client, with that venv's interpreter, against the same server.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant

WALKTHROUGH = Path(__file__).with_name("openapi_client_walkthrough.py")
#: Generation and the walk-through together take seconds; a hung server must not stall CI.
TIMEOUT = 120


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """SQLite only: this test checks the document and its client, not the storage."""
    return f"sqlite:///{tmp_path / 'api.db'}"


@pytest.fixture
def generator() -> Path:
    """openapi-python-client's venv (built on first use), or a skip outside CI."""
    from bench import peers

    problem = peers.problem(peers.OPENAPI_CLIENT)
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"openapi-python-client could not be installed: {problem}")
        pytest.skip(f"openapi-python-client could not be installed into its own venv ({problem})")
    return peers.OPENAPI_CLIENT.home / "bin"


async def _run(*command: str | Path, env: dict[str, str] | None = None) -> str:
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, f"{command[0]} failed:\n{out.decode()}\n{err.decode()}"
    return out.decode()


async def test_a_generated_client_walks_the_readme(
    client: TestClient[Any, Any], tenant: Tenant, generator: Path, tmp_path: Path
) -> None:
    document = tmp_path / "openapi.json"
    document.write_bytes(await (await client.get("/api/v1/openapi.json")).read())
    # The formatting hooks only restyle the generated code; without them generation needs
    # nothing on the PATH.
    config = tmp_path / "config.yml"
    # The generator reads a raw body of these media types only: the documented override maps
    # the statement's XML to one, so POST /api/v1/bank-statements is generated too.
    config.write_text(
        "post_hooks: []\ncontent_type_overrides:\n  application/xml: application/octet-stream\n"
    )
    out = tmp_path / "client"
    await _run(
        generator / "openapi-python-client",
        "generate",
        "--path",
        document,
        "--output-path",
        out,
        "--config",
        config,
    )
    # One type per shared schema, not one per field or parameter (CreateWalletRequestCurrencyId,
    # ListDepositsStatus, WalletRecordMetadata, ...).
    generated = out / "treasury_core_client" / "api" / "bank_files" / "import_statement.py"
    assert generated.is_file(), "POST /api/v1/bank-statements was not generated"
    # Its body is the file's bytes: typed ``str``, the generated call could not send one.
    assert "body: File," in generated.read_text(), "the statement body is not typed as a file"
    models = {path.stem for path in (out / "treasury_core_client" / "models").glob("*.py")}
    assert {"currency", "virtual_account_currency", "metadata", "metadata_input"} <= models
    per_field = {
        model
        for model in models - {"virtual_account_currency"}
        if model.startswith(("list_", "count_intents_", "bank_names_currency"))
        or model.endswith(("_currency", "_currency_id", "_metadata", "_type_0", "_type_0_item"))
    }
    assert not per_field
    env = {**os.environ, "PYTHONPATH": str(out)}
    summary = await _run(
        generator / "python",
        WALKTHROUGH,
        str(client.make_url("")).rstrip("/"),
        tenant.secret_key,
        str(tenant.account_id),
        env=env,
    )
    figures = json.loads(summary.strip().splitlines()[-1])
    available = figures["available_after_transfer"]
    assert available["EUR"] == 100000 - 10000
    assert available["USD"] > 0
    assert figures["intent_status"] == "PROCESSED"
    assert figures["amount_refunded"] == 500
    assert figures["processed"] == 1
    assert figures["statement_with_a_company_key"] == [403, "operator_key_required"]
    # The payout of the captured 25.00 less the 5.00 refunded lands in the EUR wallet.
    assert figures["eur_balance_after_payout"] > 100000 - 10000
