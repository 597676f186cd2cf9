"""pytest fixtures for code that embeds treasury-core (``docs/guides/pytest-plugin.md``).

Registered through the ``pytest11`` entry point ``treasury``, so they are available in every
test suite of a project that installs treasury-core (``-p no:treasury`` turns them off):

========================================  ====================================================
``treasury_config``                       the :class:`~treasury_core.TreasuryConfig` the
                                          treasuries below start from; override it
``treasury_clock``                        a :class:`~treasury_core.testing.FakeClock`
``treasury_memory``                       a :class:`~treasury_core.Treasury` in memory
``treasury_sqlite``                       a :class:`~treasury_core.Treasury` on an SQLite file
``treasury_server``                       a :class:`~treasury_pytest.TreasuryServer` on
                                          loopback, with a company and its keys
``treasury_server_database_url``          the database the server uses; override it
``treasury_webhook_receiver``             a :class:`~treasury_pytest.WebhookReceiver`
========================================  ====================================================

Every name starts with ``treasury_`` so that none shadows a fixture of the project using them.
All fixtures are sync and function-scoped, so they work the same under pytest-asyncio, anyio
and pytest-aiohttp; the ones that own a server run it on threads of their own.

At import this module loads only pytest, the standard library and the plugin's own stdlib
modules: pytest starts fast in suites that never use the fixtures, and a project without the
``sql`` or ``server`` extra loads it fine. Fixtures import what they need when they run, and
say which extra to install when it is missing.
"""

from __future__ import annotations

import base64
import importlib
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from treasury_pytest.receiver import WebhookReceiver

# The storage and card provider contracts (treasury_core.testing.contracts.storage, the modules of
# its
# parts, and .card_provider_contract) are test modules that live in the package: registered
# here, before anything imports them, their failures show the compared values in every install
# (pytest rewrites a wheel's pytest11 packages, but not an editable checkout's other modules).
pytest.register_assert_rewrite(
    "treasury_core.testing.contracts.storage",
    "treasury_core.testing.contracts.intents",
    "treasury_core.testing.contracts.ledger",
    "treasury_core.testing.contracts.outbox",
    "treasury_core.testing.contracts.card_provider",
)

if TYPE_CHECKING:
    from treasury_core import Treasury, TreasuryConfig
    from treasury_core.testing import FakeClock
    from treasury_pytest.server import TreasuryServer

#: The server fixture's background worker looks for due work this often unless the
#: configuration says otherwise: ``treasury serve``'s one second would make every webhook test
#: wait about half a second for its delivery.
SERVER_POLL_SECONDS = 0.05


def _require(module: str, extra: str, fixture: str) -> None:
    """Fail the test (not error deep inside) when ``module`` cannot be imported."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        missing = str(exc)
    else:
        return
    # Outside the except block: the report is this one line, not the ImportError chained to it.
    pytest.fail(
        f"{fixture} needs treasury-core's {extra!r} extra ({missing}); install it with "
        f"pip install 'treasury-core[{extra}]'",
        pytrace=False,
    )


def _copy_sqlite(source: Path, target: Path) -> None:
    # SQLite's backup API copies a consistent database whatever state its WAL is in.
    with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


@pytest.fixture
def treasury_config() -> TreasuryConfig:
    """The configuration every treasury fixture starts from; each replaces ``database_url``
    with its own.

    Sandbox mode (sandbox controls, webhooks to loopback allowed) with a random vault key per
    test. Override it in a ``conftest.py`` to change currencies, fees, limits::

        @pytest.fixture
        def treasury_config() -> TreasuryConfig:
            return TreasuryConfig(currencies=("USD", "EUR"), withdrawal_fees={"*": (25, 100)})
    """
    from pydantic import SecretStr

    from treasury_core import TreasuryConfig

    # Keys of this test's own rather than the public sandbox vault key and a random form key
    # (and their warnings in every test's log).
    key = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    return TreasuryConfig(
        sandbox=True,
        # The aesgcm vault's setting (its VaultSettings.key) and the HTTP app's (its
        # AppSettings.form_key), by name: this module imports only pytest and treasury_core.
        adapters={"vault_key": SecretStr(key), "form_key": SecretStr(secrets.token_urlsafe(32))},
    )


@pytest.fixture
def treasury_clock() -> FakeClock:
    """Business time that moves only when the test says so: ``treasury_clock.advance(60)``.

    Starts at 2026-01-01T00:00Z. The treasury fixtures use it as their business clock (webhook
    signatures and leases still use real time).
    """
    from treasury_core.testing import FakeClock

    return FakeClock()


@pytest.fixture
def treasury_memory(
    treasury_config: TreasuryConfig, treasury_clock: FakeClock
) -> Iterator[Treasury]:
    """A :class:`~treasury_core.Treasury` on in-memory storage, on ``treasury_clock``.

    Needs no extra. Its services are async: ``await treasury_memory.companies.create_company``.
    """
    from treasury_core import bootstrap

    treasury = bootstrap(
        treasury_config.model_copy(update={"database_url": "memory://"}), clock=treasury_clock
    )
    try:
        yield treasury
    finally:
        treasury.close()


@pytest.fixture(scope="session")
def treasury_sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty SQLite database with every migration applied, made once per session; the
    SQLite fixtures start from copies of it (a copy takes milliseconds, migrating a second)."""
    _require("sqlalchemy", "sql", "treasury_sqlite_template")
    from treasury_sqlalchemy.storage import SqlStorage

    path = tmp_path_factory.mktemp("treasury-template") / "template.db"
    storage = SqlStorage(f"sqlite:///{path}", pool_size=2)
    try:
        storage.migrate()
    finally:
        storage.close()
    return path


def _fresh_sqlite(request: pytest.FixtureRequest, tmp_path: Path, fixture: str, name: str) -> str:
    _require("sqlalchemy", "sql", fixture)
    template: Path = request.getfixturevalue("treasury_sqlite_template")
    path = tmp_path / name
    _copy_sqlite(template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def treasury_sqlite(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    treasury_config: TreasuryConfig,
    treasury_clock: FakeClock,
) -> Iterator[Treasury]:
    """A :class:`~treasury_core.Treasury` on an SQLite file in ``tmp_path`` (``treasury.db``),
    on ``treasury_clock``; closed after the test.

    Needs the ``sql`` extra (``pip install 'treasury-core[sql]'``).
    """
    # Looked up here rather than requested, so that the missing extra is reported as this
    # fixture's, with the install command.
    url = _fresh_sqlite(request, tmp_path, "treasury_sqlite", "treasury.db")
    from treasury_core import bootstrap

    treasury = bootstrap(
        treasury_config.model_copy(update={"database_url": url}), clock=treasury_clock
    )
    try:
        yield treasury
    finally:
        treasury.close()


@pytest.fixture
def treasury_server_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The database ``treasury_server`` serves: a fresh SQLite file in ``tmp_path``
    (``server.db``). Override it to serve ``memory://`` or a PostgreSQL URL (migrated on
    start)."""
    # The server's extra is the one to name when it is missing (it includes ``sql``).
    _require("aiohttp", "server", "treasury_server")
    return _fresh_sqlite(request, tmp_path, "treasury_server", "server.db")


@pytest.fixture
def treasury_server(
    treasury_config: TreasuryConfig,
    treasury_clock: FakeClock,
    treasury_server_database_url: str,
) -> Iterator[TreasuryServer]:
    """A real treasury server on ``127.0.0.1`` (a free port), with one company and its keys.

    The library's own app and background worker, on an event loop in a thread of its own, so
    sync and async tests alike can use it; see :class:`~treasury_pytest.TreasuryServer`.
    Business time is ``treasury_clock``. Due webhooks go out within ``job_poll_seconds``
    (0.05 s unless ``treasury_config`` sets it). Needs the ``server`` extra
    (``pip install 'treasury-core[server]'``).
    """
    _require("aiohttp", "server", "treasury_server")
    _require("treasury_aiohttp", "server", "treasury_server")
    from treasury_core import bootstrap
    from treasury_pytest.server import TreasuryServer

    config = treasury_config.model_copy(update={"database_url": treasury_server_database_url})
    if "job_poll_seconds" not in treasury_config.model_fields_set:
        config = config.model_copy(update={"job_poll_seconds": SERVER_POLL_SECONDS})
    treasury = bootstrap(config, clock=treasury_clock)
    try:
        server = TreasuryServer.start(treasury, treasury_clock)
        try:
            yield server
        finally:
            server.close()
    finally:
        treasury.close()


@pytest.fixture
def treasury_webhook_receiver() -> Iterator[WebhookReceiver]:
    """A webhook receiver on ``127.0.0.1`` (a free port) that verifies Standard Webhooks
    signatures; see :class:`~treasury_pytest.WebhookReceiver`. Needs no extra.

    ``treasury_server.subscribe(treasury_webhook_receiver)`` points the server's company at it;
    then ``treasury_webhook_receiver.wait_for("treasury.deposit.completed")``.
    """
    with WebhookReceiver() as receiver:
        yield receiver
