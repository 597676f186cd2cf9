"""The fixtures as users meet them: their test files, run by pytest through ``pytester``.

Most runs are in-process (``runpytest``, quick); the ones about loading the plugin through its
entry point, and about missing extras, run pytest in a subprocess, as a user's would.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

# pytest-asyncio warns in every run without it; users set it in their own configuration.
INI = """
[pytest]
asyncio_default_fixture_loop_scope = function
"""

# Requests from sync tests go through urllib: a user's suite may have no HTTP client.
HTTP_HELPERS = """
import json
import urllib.error
import urllib.request


def call(server, method, path, body=None, headers=None):
    request = urllib.request.Request(
        server.url(path),
        data=None if body is None else json.dumps(body).encode(),
        headers={**server.auth_headers, "Content-Type": "application/json", **(headers or {})},
        method=method,
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def intent_body(server):
    return {
        "account_id": server.account_id,
        "billing_amount": 1500,
        "billing_currency": "EUR",
        "payment_type": "Card Payment",
        "merchant_reference": "order-1",
    }
"""


@pytest.fixture
def users(pytester: pytest.Pytester, warm_imports: None) -> pytest.Pytester:
    """A user's project: an ini file and the HTTP helpers module."""
    pytester.makeini(INI)
    pytester.makepyfile(helpers=HTTP_HELPERS)
    pytester.syspathinsert()
    return pytester


def test_memory_and_sqlite_treasuries_run_on_the_shared_fake_clock(users: pytest.Pytester) -> None:
    users.makepyfile(
        """
        import asyncio

        from treasury_core import Treasury
        from treasury_core.testing import FakeClock, check_invariants


        def test_memory(treasury_memory, treasury_clock):
            assert isinstance(treasury_memory, Treasury)
            assert treasury_memory.config.database_url == "memory://"
            assert treasury_memory.clock is treasury_clock
            created = asyncio.run(treasury_memory.companies.create_company("Acme"))
            assert created.secret_key.startswith("sk_")
            before = treasury_memory.clock.now()
            treasury_clock.advance(3600)
            assert (treasury_memory.clock.now() - before).total_seconds() == 3600


        def test_memory_is_fresh_each_test(treasury_memory):
            created = asyncio.run(treasury_memory.companies.create_company("Acme"))
            assert created.company.id == 1


        def test_sqlite(treasury_sqlite, treasury_clock, tmp_path):
            assert treasury_sqlite.config.database_url == f"sqlite:///{tmp_path / 'treasury.db'}"
            assert (tmp_path / "treasury.db").exists()
            assert treasury_sqlite.clock is treasury_clock
            created = asyncio.run(treasury_sqlite.companies.create_company("Acme"))
            accounts = asyncio.run(treasury_sqlite.companies.merchant_accounts(created.company.id))
            assert [a.id for a in accounts] == [created.merchant_account.id]
            check_invariants(treasury_sqlite.storage)


        def test_sqlite_is_fresh_each_test(treasury_sqlite):
            created = asyncio.run(treasury_sqlite.companies.create_company("Acme"))
            assert created.company.id == 1


        def test_clock(treasury_clock):
            assert isinstance(treasury_clock, FakeClock)
            assert treasury_clock.now().isoformat() == "2026-01-01T00:00:00+00:00"
        """
    )
    users.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=5)


def test_a_users_treasury_config_applies_to_every_treasury(users: pytest.Pytester) -> None:
    users.makeconftest(
        """
        import pytest
        from treasury_core import TreasuryConfig


        @pytest.fixture
        def treasury_config():
            return TreasuryConfig(currencies=("USD",), job_poll_seconds=0.5)
        """
    )
    users.makepyfile(
        """
        def test_memory(treasury_memory):
            assert treasury_memory.config.currencies == ("USD",)


        def test_sqlite(treasury_sqlite):
            assert treasury_sqlite.config.currencies == ("USD",)
            assert treasury_sqlite.config.database_url.startswith("sqlite:///")


        def test_server(treasury_server):
            assert treasury_server.treasury.config.currencies == ("USD",)
            assert treasury_server.treasury.config.job_poll_seconds == 0.5  # the user's, kept
        """
    )
    users.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=3)


def test_the_default_config_is_the_sandbox_with_a_key_of_its_own(users: pytest.Pytester) -> None:
    users.makepyfile(
        """
        def test_config(treasury_config, treasury_server):
            assert treasury_config.sandbox
            assert treasury_config.adapters.get("vault_key") is not None
            assert treasury_server.treasury.config.job_poll_seconds == 0.05
        """
    )
    users.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_the_server_serves_a_company_over_http_and_shares_the_clock(
    users: pytest.Pytester,
) -> None:
    users.makepyfile(
        r"""
        import json
        import socket
        from datetime import timedelta

        from helpers import call, intent_body


        def test_keys_work(treasury_server):
            assert treasury_server.base_url.startswith("http://127.0.0.1:")
            assert treasury_server.secret_key.startswith("sk_")
            assert treasury_server.publishable_key.startswith("pk_")
            status, intent = call(treasury_server, "POST", "/api/v1/payments/intent",
                                  intent_body(treasury_server))
            assert status == 200, intent
            assert intent["company_id"] == treasury_server.company_id
            status, _ = call(treasury_server, "GET", "/api/v1/webhook-endpoints",
                             headers={"Authorization": "Bearer sk_wrong"})
            assert status == 401


        def test_the_sandbox_clock_is_treasury_clock(treasury_server, treasury_clock):
            start = treasury_clock.now()
            status, body = call(treasury_server, "POST", "/api/v1/sandbox/clock/advance",
                                {"seconds": 600})
            assert status == 200, body
            assert treasury_clock.now() - start == timedelta(seconds=600)
            assert treasury_server.advance(60) - start == timedelta(seconds=660)


        def test_call_runs_services_on_the_server(treasury_server):
            accounts = treasury_server.call(
                treasury_server.treasury.companies.merchant_accounts(treasury_server.company_id)
            )
            assert [a.id for a in accounts] == [treasury_server.account_id]


        def test_a_malformed_request_gets_the_servers_json_answer(treasury_server):
            # treasury serve's runner, not aiohttp's: the parser's refusal is the JSON error
            # body, nothing echoed.
            host, port = treasury_server.base_url.removeprefix("http://").split(":")
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Secret: ab\x00cd\r\n\r\n")
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.split(b" ")[1] == b"400", head
            assert b"application/json" in head
            assert json.loads(body)["error"]["type"] == "invalid_request_error"
            assert b"ab" not in body
        """
    )
    users.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=4)


def test_a_webhook_reaches_the_receiver_signed_and_is_retried_on_the_clock(
    users: pytest.Pytester,
) -> None:
    users.makepyfile(
        """
        from helpers import call, intent_body

        CREATED = "merchant_of_record.payment_intent.created"


        def test_webhook_arrives(treasury_server, treasury_webhook_receiver):
            treasury_server.subscribe(treasury_webhook_receiver, events=[CREATED])
            status, intent = call(treasury_server, "POST", "/api/v1/payments/intent",
                                  intent_body(treasury_server))
            assert status == 200, intent
            # Delivered by the server's background worker: no run_due, no sleep.
            delivery = treasury_webhook_receiver.wait_for(CREATED)
            assert delivery.object["id"] == str(intent["id"])
            assert treasury_webhook_receiver.rejected == []


        def test_endpoint_created_over_http(treasury_server, treasury_webhook_receiver):
            status, endpoint = call(treasury_server, "POST", "/api/v1/webhook-endpoints",
                                    {"url": treasury_webhook_receiver.url})
            assert status == 200, endpoint
            treasury_webhook_receiver.trust(endpoint["secret"])
            call(treasury_server, "POST", "/api/v1/payments/intent", intent_body(treasury_server))
            treasury_server.run_due()
            assert treasury_webhook_receiver.wait_for(CREATED, timeout=0).status == 200


        def test_failed_delivery_is_retried(treasury_server, treasury_webhook_receiver):
            treasury_server.subscribe(treasury_webhook_receiver)
            treasury_webhook_receiver.fail_next(1)
            call(treasury_server, "POST", "/api/v1/payments/intent", intent_body(treasury_server))
            first = treasury_webhook_receiver.wait_for(CREATED)
            assert first.status == 500
            treasury_server.advance(5)  # the first retry is 5 s later, in business time
            second = treasury_webhook_receiver.wait_for(CREATED, count=2)
            assert (second.id, second.status) == (first.id, 200)


        def test_a_wrong_secret_is_refused(treasury_server, treasury_webhook_receiver):
            status, _ = call(treasury_server, "POST", "/api/v1/webhook-endpoints",
                             {"url": treasury_webhook_receiver.url, "events": [CREATED]})
            assert status == 200
            # The receiver trusts another endpoint's secret only.
            status, elsewhere = call(treasury_server, "POST", "/api/v1/webhook-endpoints",
                                     {"url": "https://merchant.invalid/hooks",
                                      "events": ["treasury.deposit.completed"]})
            assert status == 200
            treasury_webhook_receiver.trust(elsewhere["secret"])
            call(treasury_server, "POST", "/api/v1/payments/intent", intent_body(treasury_server))
            treasury_server.run_due()  # returns once the attempt is recorded, whoever made it
            assert treasury_webhook_receiver.deliveries == []
            assert [r.reason for r in treasury_webhook_receiver.rejected] == [
                "No matching signature found"
            ]
        """
    )
    users.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=4)


def test_run_due_delivers_when_the_worker_is_asleep(users: pytest.Pytester) -> None:
    # The worker polls once an hour, and the fixture is ready only once its first look is over;
    # the API's writes wake it, so the webhook may already be on its way: run_due (or an
    # advance) still returns only once it has been sent.
    users.makeconftest(
        """
        import pytest
        from treasury_core import TreasuryConfig


        @pytest.fixture
        def treasury_config():
            return TreasuryConfig(job_poll_seconds=3600)
        """
    )
    users.makepyfile(
        """
        from helpers import call, intent_body

        CREATED = "merchant_of_record.payment_intent.created"


        def test_run_due(treasury_server, treasury_webhook_receiver):
            treasury_server.subscribe(treasury_webhook_receiver)
            call(treasury_server, "POST", "/api/v1/payments/intent", intent_body(treasury_server))
            treasury_server.run_due()
            assert treasury_webhook_receiver.wait_for(CREATED, timeout=0).status == 200


        def test_advance_over_http_runs_due_deliveries(treasury_server, treasury_webhook_receiver):
            treasury_server.subscribe(treasury_webhook_receiver)
            call(treasury_server, "POST", "/api/v1/payments/intent", intent_body(treasury_server))
            call(treasury_server, "POST", "/api/v1/sandbox/clock/advance", {"seconds": 1})
            assert treasury_webhook_receiver.wait_for(CREATED, timeout=0).status == 200
        """
    )
    users.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_async_tests_under_pytest_asyncio_and_anyio(users: pytest.Pytester) -> None:
    users.makepyfile(
        """
        import aiohttp
        import pytest

        CREATED = "merchant_of_record.payment_intent.created"


        async def flow(server, receiver):
            await server.subscribe_async(receiver, events=[CREATED])
            async with aiohttp.ClientSession(headers=server.auth_headers) as session:
                async with session.post(server.url("/api/v1/payments/intent"), json={
                    "account_id": server.account_id,
                    "billing_amount": 700,
                    "billing_currency": "EUR",
                    "payment_type": "Card Payment",
                    "merchant_reference": "async",
                }) as response:
                    assert response.status == 200
                    intent = await response.json()
            # A service call, run on the server's loop while this loop awaits it.
            accounts = await server.call_async(
                server.treasury.companies.merchant_accounts(server.company_id)
            )
            assert [a.id for a in accounts] == [server.account_id]
            await server.run_due_async()
            # Any pass over deliveries, too: serialized with the worker's on the server's loop.
            await server.call_async(server.treasury.notifications.run_due())
            delivery = await receiver.wait_for_async(CREATED)
            assert delivery.object["id"] == str(intent["id"])
            assert (await server.advance_async(10)) == server.clock.now()


        @pytest.mark.asyncio
        async def test_with_pytest_asyncio(treasury_server, treasury_webhook_receiver):
            await flow(treasury_server, treasury_webhook_receiver)


        @pytest.mark.anyio
        async def test_with_anyio(treasury_server, treasury_webhook_receiver):
            await flow(treasury_server, treasury_webhook_receiver)


        @pytest.mark.asyncio
        async def test_memory_from_async(treasury_memory):
            created = await treasury_memory.companies.create_company("Acme")
            assert created.company.id == 1
        """
    )
    users.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=3)


def test_servers_and_receivers_are_gone_after_their_test(users: pytest.Pytester) -> None:
    users.makepyfile(
        """
        import socket
        import threading
        from urllib.parse import urlsplit

        import pytest

        seen = {}


        def test_use(treasury_server, treasury_webhook_receiver):
            seen["server"] = urlsplit(treasury_server.base_url)
            seen["receiver"] = urlsplit(treasury_webhook_receiver.url)
            seen["sqlite"] = treasury_server.treasury.storage


        @pytest.mark.parametrize("name", ["server", "receiver"])
        def test_port_is_closed(name):
            url = seen[name]
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((url.hostname, url.port), timeout=5)


        def test_threads_are_gone():
            names = [t.name for t in threading.enumerate()]
            assert "treasury-test-server" not in names
            assert "treasury-webhook-receiver" not in names
        """
    )
    users.runpytest("-p", "no:cacheprovider", "-p", "no:randomly").assert_outcomes(passed=4)


def test_the_plugin_loads_through_its_entry_point(users: pytest.Pytester) -> None:
    users.makepyfile(
        """
        def test_memory(treasury_memory, treasury_webhook_receiver):
            assert treasury_memory.config.database_url == "memory://"
        """
    )
    # A separate interpreter: nothing registers the plugin but the installed entry point.
    loaded = users.runpytest_subprocess("-p", "no:cacheprovider")
    loaded.assert_outcomes(passed=1)
    disabled = users.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:treasury")
    disabled.assert_outcomes(errors=1)
    disabled.stdout.fnmatch_lines(["*fixture 'treasury_memory' not found*"])


def test_fixtures_without_their_extra_say_what_to_install(users: pytest.Pytester) -> None:
    # As if installed without extras: the modules are unimportable from conftest on (the
    # plugin itself loaded before, without them).
    users.makeconftest(
        """
        import sys

        for name in ("aiohttp", "sqlalchemy", "alembic", "treasury_aiohttp"):
            for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
                del sys.modules[loaded]
        # The extras' packages are missing; the treasury_* packages ship in every install.
        for name in ("aiohttp", "sqlalchemy", "alembic"):
            sys.modules[name] = None
        """
    )
    users.makepyfile(
        """
        def test_memory_needs_nothing(treasury_memory, treasury_webhook_receiver):
            assert treasury_memory.config.database_url == "memory://"


        def test_sqlite(treasury_sqlite):
            pass


        def test_server(treasury_server):
            pass
        """
    )
    result = users.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:aiohttp")
    result.assert_outcomes(passed=1, errors=2)
    output = result.stdout.str()
    assert (
        "treasury_sqlite needs treasury-core's 'sql' extra (import of sqlalchemy halted; None in "
        "sys.modules); install it with pip install 'treasury-core[sql]'" in output
    )
    assert (
        "treasury_server needs treasury-core's 'server' extra (import of aiohttp halted; None in "
        "sys.modules); install it with pip install 'treasury-core[server]'" in output
    )
    assert "During handling" not in output  # one line each, no chained traceback


def test_importing_the_plugin_loads_no_io_framework_and_not_the_core() -> None:
    # pytest imports the plugin in every run of every project that installs treasury-core:
    # it must load without the extras, and cheaply (treasury_core is imported by fixtures).
    script = (
        "import sys, treasury_pytest.plugin;"
        "io = ('aiohttp', 'sqlalchemy', 'psycopg', 'alembic', 'click', 'treasury_core');"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in io)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
