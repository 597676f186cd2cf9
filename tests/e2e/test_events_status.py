"""``treasury events status`` as operators run it: a real process over a real SQLite file whose
events went to a real loopback receiver that answers 500."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.e2e.test_cli import one_line_error, run_cli
from tests.integration.test_dispatcher import create_intents, make_events
from treasury_aiohttp.notifier import HttpSender
from treasury_core import TreasuryConfig, bootstrap
from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest


@pytest.fixture
async def failing_receiver() -> AsyncIterator[tuple[int, list[str]]]:
    """A receiver on loopback that answers every post 500; its port and the ids it was sent."""
    received: list[str] = []

    async def refuse(request: web.Request) -> web.Response:
        received.append(request.headers["webhook-id"])
        return web.Response(status=500, text="down")

    app = web.Application()
    app.router.add_post("/hooks", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield port, received
    finally:
        await runner.cleanup()


def status_of(database: Path, *options: str) -> str:
    result = run_cli("events", "status", "--database", str(database), *options, cwd=database.parent)
    assert result.returncode == 0, result.stderr
    return result.stdout


async def test_status_shows_the_backlog_and_the_failing_endpoint(
    tmp_path: Path, failing_receiver: tuple[int, list[str]]
) -> None:
    port, received = failing_receiver
    database = tmp_path / "treasury.db"
    treasury = bootstrap(TreasuryConfig(database_url=f"sqlite:///{database}"))
    try:
        company, _ = await make_events(treasury, 0, endpoint=False)
        endpoint = await treasury.notifications.create_endpoint(
            company, CreateWebhookEndpointRequest(url=f"http://127.0.0.1:{port}/hooks?token=t0p")
        )
        account = (await treasury.companies.merchant_accounts(company))[0].id
        await create_intents(
            treasury, company, account, 3
        )  # sent to the receiver, which refuses them
        async with HttpSender(allow_private=True, timeout_seconds=5) as sender:
            treasury.notifications.sender = sender
            await treasury.notifications.run_due()
        assert len(received) == 3
        await create_intents(treasury, company, account, 2)  # not fanned out yet
        first = (await treasury.storage.run(lambda uow: uow.outbox.list(), write=False))[0]
    finally:
        treasury.close()

    status = json.loads(await asyncio.to_thread(status_of, database, "--json"))
    assert status["undispatched_events"] == 2
    # Retried 5 s after the refusal: not due yet, unless starting the command took longer
    # (a loaded machine); either way the count agrees with the endpoint's next attempt.
    retry_due = status["failing_endpoints"][0]["next_attempt_at"] <= status["as_of"]
    assert status["pending_deliveries"] == 3
    assert status["due_deliveries"] == (3 if retry_due else 0)
    assert status["oldest_undelivered_at"] == first.created_at.isoformat()
    assert status["oldest_undelivered_age_seconds"] >= 0
    assert (status["deliveries_per_second"], status["rate_window_seconds"]) == (3 / 60, 60)
    [failing] = status["failing_endpoints"]
    assert failing["endpoint_id"] == endpoint.endpoint.id
    assert failing["company_id"] == company
    assert failing["kind"] == "webhook"
    assert failing["host"] == f"127.0.0.1:{port}"  # never the path or its token
    assert (failing["failing_deliveries"], failing["consecutive_failures"]) == (3, 1)

    text = await asyncio.to_thread(status_of, database)
    assert "events not fanned out:   2" in text
    assert re.search(r"deliveries pending:      3 \((0|3) due\)", text)
    assert f"oldest undelivered:      {first.created_at.isoformat()} (" in text
    assert "deliveries per second:   0.05 (last 60 s)" in text
    assert (
        f"{endpoint.endpoint.id} of company {company} at 127.0.0.1:{port}:"
        " 1 consecutive failures, 3 deliveries failing, next attempt" in text
    )
    assert "t0p" not in text


def test_status_of_an_empty_database(tmp_path: Path) -> None:
    database = tmp_path / "treasury.db"
    assert run_cli("migrate", "--database", str(database), cwd=tmp_path).returncode == 0
    status = json.loads(status_of(database, "--json"))
    assert {k: v for k, v in status.items() if k != "as_of"} == {
        "undispatched_events": 0,
        "pending_deliveries": 0,
        "due_deliveries": 0,
        "oldest_undelivered_at": None,
        "oldest_undelivered_age_seconds": None,
        "deliveries_per_second": 0.0,
        "rate_window_seconds": 60,
        "failing_endpoints": [],
    }
    text = status_of(database)
    assert "oldest undelivered:      none" in text
    assert "failing endpoints:       none" in text


def test_status_refuses_a_database_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    for options in ((), ("--json",)):
        result = run_cli("events", "status", "--database", str(missing), *options, cwd=tmp_path)
        assert one_line_error(result).endswith(f"no database at {missing}")
        assert result.stdout == ""
        assert not missing.exists()
