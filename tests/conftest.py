"""Shared fixtures: storage backends (memory, SQLite file, PostgreSQL schema) and a fake clock."""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import logging
import os
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from treasury_core.memory.storage import MemoryStorage
from treasury_core.movements.requests import RegisterBankAccountRequest
from treasury_core.ports import Storage
from treasury_core.testing.fakes.clock import FakeClock

# pytester runs user-style test files against the installed pytest plugin (tests/pytest_plugin);
# pytest accepts pytest_plugins only in the top-level conftest.
pytest_plugins = ["pytester"]

# Hypothesis profiles ---------------------------------------------------------------------------
#: ``TREASURY_TEST_HYPOTHESIS_PROFILE=deep`` for long runs: ten times the examples, 2.5 times the
#: steps of every property and state machine test. The default keeps the suite inside CI's
#: budget; it draws new examples every run and keeps the failing ones in the example database
#: (``.hypothesis/`` at the top of the tree, whatever the working directory), which replays them
#: first on the next run. ``ci`` is the default's budget with a fixed seed: the same examples on
#: every machine and run, so a failure it shows is shown again until it is fixed. CI runs the
#: property tests under both (.ci/run).
HYPOTHESIS_PROFILE_ENV = "TREASURY_TEST_HYPOTHESIS_PROFILE"
_SCALE = {"default": (1, 1.0), "deep": (10, 2.5), "ci": (1, 1.0)}
ROOT = Path(__file__).resolve().parent.parent

# Machines run whole services per step; a slow example is expected, never a failure. A failure
# prints the blob that reproduces it (``@reproduce_failure``), for a run whose database is gone.
settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=DirectoryBasedExampleDatabase(ROOT / ".hypothesis" / "examples"),
    print_blob=True,
)
settings.register_profile("deep", settings.get_profile("default"))
# A fixed seed replays itself; a database would only add examples another run found.
settings.register_profile("ci", settings.get_profile("default"), derandomize=True, database=None)
HYPOTHESIS_PROFILE = os.environ.get(HYPOTHESIS_PROFILE_ENV, "default")
if HYPOTHESIS_PROFILE not in _SCALE:
    raise pytest.UsageError(
        f"{HYPOTHESIS_PROFILE_ENV}={HYPOTHESIS_PROFILE!r}: use one of {', '.join(_SCALE)}"
    )
settings.load_profile(HYPOTHESIS_PROFILE)


def examples(count: int) -> int:
    """``count`` examples, scaled by the profile (for ``@settings(max_examples=…)``)."""
    return count * _SCALE[HYPOTHESIS_PROFILE][0]


def machine_settings(*, examples: int, steps: int) -> settings:
    """A state machine's settings: its examples and steps per run, scaled by the profile."""
    factor, step_factor = _SCALE[HYPOTHESIS_PROFILE]
    return settings(max_examples=examples * factor, stateful_step_count=int(steps * step_factor))


# For the broken-on-purpose runs: find the bug, do not shrink it, do not replay it in other runs.
def bug_hunt(examples: int, *, steps: int = 40) -> settings:
    """Settings that must find a planted bug within ``examples`` runs (never scaled)."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        database=None,
        phases=[Phase.generate],
        report_multiple_bugs=False,
        print_blob=False,
    )


POSTGRES_ENV = "TREASURY_TEST_POSTGRES_URL"
#: The Redis the rate-limit tests use; .ci/run sets it (and starts redis-server if it is down).
REDIS_ENV = "TREASURY_TEST_REDIS_URL"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
#: The interpreter of a venv with localstripe installed (.ci/run prepares one and sets this).
LOCALSTRIPE_ENV = "TREASURY_TEST_LOCALSTRIPE_PYTHON"


def postgres_url_or_skip() -> str:
    """The PostgreSQL URL for tests, or skip the test saying how to enable it."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set; PostgreSQL tests need a server (.ci/run sets it)")
    return url


class PostgresSchema:
    """A private schema in the test database, dropped afterwards."""

    def __init__(self, base_url: str) -> None:
        from sqlalchemy import create_engine

        from treasury_sqlalchemy.storage import normalize_url

        self.name = f"t_{uuid.uuid4().hex[:12]}"
        self._admin = create_engine(normalize_url(base_url), isolation_level="AUTOCOMMIT")
        with self._admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {self.name}")
        separator = "&" if "?" in base_url else "?"
        self.url = f"{base_url}{separator}options=-csearch_path%3D{self.name}"

    def drop(self) -> None:
        with self._admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {self.name} CASCADE")
        self._admin.dispose()


def _localstripe_python() -> str:
    """localstripe's interpreter: the configured one, else bench's venv (installed once)."""
    configured = os.environ.get(LOCALSTRIPE_ENV)
    if configured:
        # Set by .ci/run: the Stripe tests must run there, so a broken path fails, never skips.
        if not Path(configured).is_file():
            pytest.fail(f"{LOCALSTRIPE_ENV}={configured} is not an interpreter")
        return configured
    # localstripe pins its own aiohttp: it lives in a venv of its own, the benchmark's.
    from bench import peers

    problem = peers.problem(peers.LOCALSTRIPE)
    if problem is not None:
        pytest.skip(f"localstripe could not be installed into its own venv ({problem})")
    return str(peers.LOCALSTRIPE.python)


@contextlib.contextmanager
def running_localstripe(home: Path) -> Iterator[str]:
    """A localstripe server of its own on a free loopback port, its output in
    ``home / "server.log"``; its base URL while the block runs.

    The socket is bound and listening here and handed to the server process, so a request made
    before the server is ready waits in the backlog: no readiness polling. localstripe keeps
    some state per process (its webhook registry): a test that changes it starts its own.
    """
    python = _localstripe_python()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    with open(home / "server.log", "wb") as log:
        server = subprocess.Popen(
            [
                python,
                str(ROOT / "bench" / "localstripe_server.py"),
                "--fd",
                str(listener.fileno()),
                "--store",
                str(home / "store.pickle"),
                "--no-dump",
                "--quiet",
            ],
            pass_fds=(listener.fileno(),),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    # The server has its own copy; if it dies, connections are refused instead of waiting.
    listener.close()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="session")
def localstripe_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a localstripe server on a free loopback port, for the whole session."""
    with running_localstripe(tmp_path_factory.mktemp("localstripe")) as url:
        yield url


def _redis_answers(url: str) -> bool:
    """Whether a Redis at ``url`` (host and port only) answers PING, within a second."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), 1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


@pytest.fixture
def redis_url() -> str:
    """The test Redis's URL. Without TREASURY_TEST_REDIS_URL, the local default, skipping when
    nothing answers there; a Redis the variable names must answer (CI sets it), or the test
    fails."""
    url = os.environ.get(REDIS_ENV)
    if url:
        assert _redis_answers(url), f"{REDIS_ENV}={url} does not answer PING"
        return url
    if not _redis_answers(DEFAULT_REDIS_URL):
        pytest.skip(
            f"no Redis answers at {DEFAULT_REDIS_URL} and {REDIS_ENV} is not set; the shared "
            "rate-limit tests need one (.ci/run starts it)"
        )
    return DEFAULT_REDIS_URL


@pytest.fixture
def clock() -> FakeClock:
    """Business time that moves only when a test says so."""
    return FakeClock()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite file URL."""
    return f"sqlite:///{tmp_path / 'treasury.db'}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A URL whose connections use a fresh, private PostgreSQL schema."""
    schema = PostgresSchema(postgres_url_or_skip())
    try:
        yield schema.url
    finally:
        schema.drop()


def sandbox_bank_account(account_name: str, currency: str = "USD") -> RegisterBankAccountRequest:
    """A bank account the sandbox rail accepts in ``currency``: its format's example fields."""
    from treasury_sandbox.bank_rail import SandboxBankRail

    fmt = next(f for f in SandboxBankRail().account_formats() if f.currency == currency)
    fields = {f.name: f.example for f in fmt.fields}
    return RegisterBankAccountRequest(
        bank_name="Example Bank",
        account_name=account_name,
        account_number=fields["account_number"],
        routing_number=fields["routing_number"],
        currency_id=currency,
    )


def make_storage(kind: str, request: pytest.FixtureRequest) -> Storage:
    """A migrated, empty storage of ``kind``."""
    if kind == "memory":
        return MemoryStorage()
    from treasury_sqlalchemy.storage import SqlStorage

    url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "postgres_url")
    storage = SqlStorage(url, pool_size=4)
    storage.migrate()
    return storage


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def storage(request: pytest.FixtureRequest) -> Iterator[Storage]:
    """Each storage backend in turn: the contract tests run against all three."""
    backend = make_storage(request.param, request)
    try:
        yield backend
    finally:
        backend.close()


def sqlite_storages(directory: Path, stem: str) -> Callable[[], Storage]:
    """A factory of fresh, migrated SQLite storages (a new file each call); callers close them."""
    from treasury_sqlalchemy.storage import SqlStorage

    files = itertools.count()

    def make() -> Storage:
        storage = SqlStorage(f"sqlite:///{directory / f'{stem}-{next(files)}.db'}", pool_size=2)
        storage.migrate()
        return storage

    return make


def postgres_storages(base_url: str) -> Callable[[], AbstractContextManager[Storage]]:
    """A factory of fresh, migrated PostgreSQL storages, each in a schema dropped afterwards."""
    from treasury_sqlalchemy.storage import SqlStorage

    @contextlib.contextmanager
    def make() -> Iterator[Storage]:
        schema = PostgresSchema(base_url)
        try:
            storage = SqlStorage(schema.url, pool_size=2)
            try:
                storage.migrate()
                yield storage
            finally:
                storage.close()
        finally:
            schema.drop()

    return make


@pytest.fixture
def logging_state() -> Iterator[None]:
    """Put back what ``treasury_aiohttp.logs.configure()`` changes (the serve and worker
    commands call it), closing the handlers it added."""
    root = logging.getLogger()
    access = logging.getLogger("aiohttp.access")
    alembic = logging.getLogger("alembic")
    saved = (
        root.handlers[:],
        root.level,
        access.handlers[:],
        access.propagate,
        alembic.level,
        logging.logThreads,
        logging.logProcesses,
        logging.logMultiprocessing,
    )
    yield
    for handler in access.handlers:
        if handler not in saved[2]:
            handler.close()
    root.handlers[:], access.handlers[:] = saved[0], saved[2]
    root.setLevel(saved[1])
    access.propagate = saved[3]
    alembic.setLevel(saved[4])
    logging.logThreads, logging.logProcesses, logging.logMultiprocessing = saved[5:]


#: The suite's longest files, longest first. pytest-xdist (``--dist loadfile``) hands files to
#: workers in collection order, so a long file collected last would run alone at the end while
#: the other workers idle: these start first and the short files fill in around them.
LONG_FILES = (
    "reliability/test_bank_postgres.py",
    "fuzz/test_openapi_fuzz.py",
    "reliability/test_bank.py",
    "integration/test_treasury_concurrency.py",
    "integration/test_payments_machine.py",
    "integration/test_ledger_machine.py",
    "integration/test_treasury_machine.py",
    "e2e/test_cli.py",
    "crash/test_kill_the_server.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Collect the :data:`LONG_FILES` first (in that order), the rest as they were."""
    here = Path(__file__).parent
    rank = {str(here / name): n for n, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(str(item.path), len(LONG_FILES)))


# Skips -----------------------------------------------------------------------------------------
#: The services a full run has; with all of them configured (as .ci/run does), or with ``CI``
#: set, a skip is a test that did not run where it should have, unless tests/allowed_skips.txt
#: lists its reason.
SERVICE_ENVS = (POSTGRES_ENV, REDIS_ENV, "TREASURY_TEST_CHROMIUM", LOCALSTRIPE_ENV)
ALLOWED_SKIPS = ROOT / "tests" / "allowed_skips.txt"
_skipped: list[tuple[str, str]] = []


def skips_are_checked() -> bool:
    """Whether a skip not on the allow-list fails the run."""
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    return ci or all(os.environ.get(name) for name in SERVICE_ENVS)


def allowed_skip_patterns(path: Path = ALLOWED_SKIPS) -> list[str]:
    """The allow-list's patterns (``fnmatch`` globs over a skip's reason), each of which must
    follow a comment saying why that skip is legitimate."""
    patterns: list[str] = []
    explained = False
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line:
            explained = False
        elif line.startswith("#"):
            explained = True
        elif not explained:
            raise pytest.UsageError(f"{path}:{number}: say why above the pattern {line!r}")
        else:
            patterns.append(line)
    return patterns


def disallowed_skips(skipped: list[tuple[str, str]], patterns: list[str]) -> list[tuple[str, str]]:
    """The ``(where, reason)`` pairs no pattern matches."""
    return [s for s in skipped if not any(fnmatch.fnmatchcase(s[1], p) for p in patterns)]


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    # A skip's longrepr is (path, line, "Skipped: reason"), also as xdist sends it back.
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def _note_skip(report: pytest.CollectReport | pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append((report.nodeid, _skip_reason(report)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _note_skip(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _note_skip(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail a run with every service configured when something skipped off the allow-list
    (under xdist, in the controller, which sees every worker's reports)."""
    if hasattr(session.config, "workerinput") or not skips_are_checked():
        return
    unexpected = disallowed_skips(_skipped, allowed_skip_patterns())
    if not unexpected:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.section("skips not on tests/allowed_skips.txt", sep="=", red=True)
        for where, reason in unexpected:
            reporter.line(f"{where}: {reason}")
        reporter.line(
            "every service is configured (or CI is set), so these tests should have run: fix "
            "what made them skip, or list the reason in tests/allowed_skips.txt with why"
        )
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
