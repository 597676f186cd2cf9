"""Every documented install runs every documented call: the CI step that checks it for real.

Builds the wheel once, then for each install the docs give (``pip install treasury-core``,
``[sql]``, ``[postgres]``, ``[server]``, ``[ecb]``, ``[bank-files]``, ``[server,redis]``)
makes a fresh virtual environment, installs the wheel with those extras (dependencies from the
configured indexes) and runs there, from a temporary directory, what the docs say that install runs:

- ``tools/install_checks/core_calls.py``: the core's calls on ``memory://``, every install;
- ``tools/install_checks/test_pytest_fixtures.py`` under pytest: the plugin's fixtures that the
  pytest guide says the install covers pass, and the others fail with the command that installs
  their extra, as the guide says (pytest itself is the user's, installed beside);
- with the postgres extra, the same calls on PostgreSQL when ``TREASURY_TEST_POSTGRES_URL`` is
  set (``.ci/run`` sets it), in a schema of their own;
- without extras, ``examples/property_testing`` (its passing tests) with Hypothesis beside;
- the examples of docs/guides/embedding.md (``examples/*.py``) that the install covers;
- the Python blocks of docs/guides/embedding.md, each as a program of its own, except those
  marked ``<!-- fragment: why -->`` on the line before (they continue the surrounding prose and
  are covered by the example named there);
- with the server extra, ``treasury serve`` (README, quickstart) until it answers;
- with the bank-files extra, ``tools/install_checks/bank_files.py``: a withdrawal exported as
  pain.001 and settled from a camt.053 statement (docs/guides/banking.md);
- with the ecb extra, ``tools/install_checks/ecb_rates.py``: a transfer at the ECB's rate from
  the history the extra ships (docs/providers.md);
- with the redis extra, ``tools/install_checks/redis_limit.py``: two apps share one rate limit
  through the Redis at ``TREASURY_TEST_REDIS_URL`` (``.ci/run`` sets it; skipped, saying so,
  when unset), as docs/guides/operations.md says.

Run it with the project's environment: ``.venv/bin/python tools/check_installs.py``. Any
failure stops it with a non-zero exit and the failing program's output. ``tests/unit/
test_documented_installs.py`` is the quick in-suite version of the same idea.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKS = ROOT / "tools" / "install_checks"
EXAMPLES = ROOT / "examples"
GUIDE = ROOT / "docs" / "guides" / "embedding.md"

POSTGRES_ENV = "TREASURY_TEST_POSTGRES_URL"
REDIS_ENV = "TREASURY_TEST_REDIS_URL"

#: A program gets this long; the slowest (the threaded WSGI example) takes about 2 s.
TIMEOUT_SECONDS = 120

_BLOCK = re.compile(r"^```python\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Install:
    """One documented ``pip install`` and what the docs say it runs."""

    extras: tuple[str, ...]
    examples: tuple[str, ...] = ()
    guide_snippets: bool = False
    serve: bool = False
    #: docs/guides/property-testing.md: the kit needs no extra, Hypothesis beside it.
    property_example: bool = False
    #: docs/providers.md: the ecb extra quotes offline from the history it ships.
    ecb_rates: bool = False
    #: docs/guides/banking.md: the bank-files extra exports pain.001 and reads camt.053.
    bank_files: bool = False
    #: docs/guides/operations.md: the redis extra shares the rate limit between processes.
    redis_limit: bool = False

    @property
    def name(self) -> str:
        return f"treasury-core[{','.join(self.extras)}]" if self.extras else "treasury-core"


INSTALLS = (
    # The pytest guide's "needs no extra" fixtures and the core on memory://.
    Install((), property_example=True),
    # docs/guides/embedding.md: "the core and SQLite/PostgreSQL storage".
    Install(("sql",), ("async_services.py", "sync_backend.py"), guide_snippets=True),
    # README and embedding.md: a postgresql:// URL needs the postgres extra (sql and psycopg).
    # Its SQLite programs are the sql install's; its own check is the calls on PostgreSQL.
    Install(("postgres",)),
    # embedding.md: "plus the aiohttp app"; README and quickstart: `treasury serve`.
    Install(
        ("server",),
        ("async_services.py", "mount_in_aiohttp_app.py", "sync_backend.py"),
        guide_snippets=True,
        serve=True,
    ),
    # docs/providers.md: `pip install 'treasury-core[ecb]'` and TREASURY_FX_RATES=ecb.
    Install(("ecb",), ecb_rates=True),
    # docs/guides/banking.md: `pip install 'treasury-core[bank-files]'`, TREASURY_BANK_RAIL=files.
    Install(("bank-files",), bank_files=True),
    # docs/guides/operations.md: `pip install 'treasury-core[server,postgres,redis]'` and
    # TREASURY_RATE_LIMIT_REDIS_URL (postgres is the postgres install's own check).
    Install(("server", "redis"), redis_limit=True),
)


def guide_snippets(text: str) -> tuple[list[str], list[str]]:
    """The guide's Python blocks: (the ones to run, the fragments marked as not runnable)."""
    runnable: list[str] = []
    fragments: list[str] = []
    for match in _BLOCK.finditer(text):
        before = text[: match.start()].rstrip().rsplit("\n", 1)[-1]
        (fragments if before.startswith("<!-- fragment:") else runnable).append(match["code"])
    return runnable, fragments


def run(args: list[str], cwd: Path, what: str) -> str:
    """Run a program to its end; exit with its output if it fails. Its stdout."""
    # The arguments are this script's own: interpreters, pip and files of this repository.
    result = subprocess.run(  # noqa: S603
        args, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False
    )
    if result.returncode != 0 or "Traceback" in result.stderr:
        sys.exit(f"FAILED: {what}\n{result.stdout}\n{result.stderr}")
    return result.stdout


def build_wheel(into: Path) -> Path:
    """The wheel, built from this tree by the environment's hatchling (no network)."""
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    run(
        [*pip_wheel, "--wheel-dir", str(into), str(ROOT)],
        ROOT,
        "building the wheel",
    )
    (wheel,) = into.glob("treasury_core-*.whl")
    return wheel


def free_port() -> int:
    """A port nothing listens on now (the server binds it a moment later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def check_serve(venv: Path, cwd: Path) -> None:
    """``treasury serve`` starts on SQLite and answers; then it is stopped."""
    port = free_port()
    server = subprocess.Popen(  # noqa: S603 (the installed entry point, fixed arguments)
        [str(venv / "bin" / "treasury"), "serve", "--port", str(port)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/api/v1/openapi.json"
    try:
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                sys.exit(f"FAILED: treasury serve exited\n{server.communicate()[0]}")
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit(f"FAILED: treasury serve did not answer {url} within 60 s")
            time.sleep(0.2)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()


def check_postgres(python: str, cwd: Path, name: str) -> None:
    """The core calls on PostgreSQL, in a private schema of CI's test database (dropped after)."""
    base_url = os.environ.get(POSTGRES_ENV)
    if not base_url:
        print(f"     {name}: PostgreSQL calls skipped, {POSTGRES_ENV} is not set (.ci/run sets it)")
        return
    schema = f"installs_{os.getpid()}"
    # psycopg from the fresh environment itself: what the extra installed.
    admin = (
        "import sys, psycopg; psycopg.connect(sys.argv[1], autocommit=True).execute(sys.argv[2])"
    )
    run([python, "-c", admin, base_url, f"CREATE SCHEMA {schema}"], cwd, f"{name}: schema")
    try:
        separator = "&" if "?" in base_url else "?"
        url = f"{base_url}{separator}options=-csearch_path%3D{schema}"
        run(
            [python, str(CHECKS / "core_calls.py"), url],
            cwd,
            f"{name}: core_calls.py on PostgreSQL",
        )
    finally:
        drop = f"DROP SCHEMA IF EXISTS {schema} CASCADE"
        run([python, "-c", admin, base_url, drop], cwd, f"{name}: drop schema")


def check_redis_limit(python: str, cwd: Path, name: str) -> None:
    """Two apps of the fresh environment share one rate limit through CI's Redis."""
    url = os.environ.get(REDIS_ENV)
    if not url:
        print(f"     {name}: the shared limit skipped, {REDIS_ENV} is not set (.ci/run sets it)")
        return
    run([python, str(CHECKS / "redis_limit.py"), url], cwd, f"{name}: redis_limit.py")


def check_property_example(python: str, cwd: Path, name: str) -> None:
    """The property-testing guide's tests that pass: the program test and the fixed storage.

    The machine on the shop's first storage fails by design (the guide's bug), so it is left
    out here; tests/examples_property checks that it fails as the guide says.
    """
    example = cwd / "property_testing"
    example.mkdir()
    for source in (EXAMPLES / "property_testing").glob("*.py"):
        (example / source.name).write_text(source.read_text())
    output = run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "not TestShopLedger", "."],
        example,
        f"{name}: examples/property_testing",
    )
    if "2 passed" not in output:
        sys.exit(f"FAILED: {name}: examples/property_testing ran other tests\n{output}")


#: docs/guides/pytest-plugin.md's "Needs" column: fixture -> the extra (None: none needed).
FIXTURE_EXTRAS = {"memory": None, "sqlite": "sql", "server": "server"}
#: The extras that bring each of those (postgres and server include sql).
_COVERS = {"sql": {"sql", "postgres", "server"}, "server": {"server"}}


def check_pytest_fixtures(python: str, cwd: Path, install: Install) -> None:
    """Each fixture the install covers passes; each other fails naming the extra to install."""
    # Copied out of the tree, so that pytest reads no configuration of this project's.
    tests = cwd / "test_pytest_fixtures.py"
    tests.write_text((CHECKS / tests.name).read_text())
    pytest = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", tests.name, "-k"]
    for fixture, extra in FIXTURE_EXTRAS.items():
        what = f"{install.name}: treasury_{fixture}"
        if extra is None or _COVERS[extra] & set(install.extras):
            run([*pytest, fixture], cwd, what)
            continue
        # The plugin's promise for a missing extra: the test fails with the command to run.
        result = subprocess.run(  # noqa: S603 (this environment's pytest on our own file)
            [*pytest, fixture], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_SECONDS
        )
        hint = f"install it with pip install 'treasury-core[{extra}]'"
        if result.returncode != 1 or hint not in result.stdout:
            sys.exit(f"FAILED: {what} should fail with {hint!r}\n{result.stdout}{result.stderr}")


def check(install: Install, wheel: Path, work: Path) -> None:
    """Install ``install`` into a fresh environment under ``work`` and run what it documents."""
    started = time.monotonic()
    venv = work / "venv"
    run([sys.executable, "-m", "venv", str(venv)], work, f"{install.name}: venv")
    python = str(venv / "bin" / "python")
    # pytest (and Hypothesis for the property kit) are the user's own, as the guides say, not
    # requirements of the package.
    requirement = f"treasury-core[{','.join(install.extras)}] @ {wheel.as_uri()}"
    users = ["pytest", "hypothesis"] if install.property_example else ["pytest"]
    pip_install = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    run(
        [*pip_install, requirement, *users],
        work,
        f"{install.name}: pip install",
    )
    cwd = work / "run"
    cwd.mkdir()
    run([python, str(CHECKS / "core_calls.py")], cwd, f"{install.name}: core_calls.py")
    # Copied out of the tree, so that pytest reads no configuration of this project's.
    tests = cwd / "test_pytest_fixtures.py"
    tests.write_text((CHECKS / tests.name).read_text())
    check_pytest_fixtures(python, cwd, install)
    if "postgres" in install.extras:
        check_postgres(python, cwd, install.name)
    if install.property_example:
        check_property_example(python, cwd, install.name)
    for example in install.examples:
        run([python, str(EXAMPLES / example)], cwd, f"{install.name}: examples/{example}")
    if install.guide_snippets:
        runnable, _ = guide_snippets(GUIDE.read_text())
        for number, code in enumerate(runnable, 1):
            snippet_dir = cwd / f"snippet{number}"
            snippet_dir.mkdir()
            (snippet_dir / "snippet.py").write_text(code)
            run([python, "snippet.py"], snippet_dir, f"{install.name}: {GUIDE.name} #{number}")
    if install.ecb_rates:
        run([python, str(CHECKS / "ecb_rates.py")], cwd, f"{install.name}: ecb_rates.py")
    if install.bank_files:
        run([python, str(CHECKS / "bank_files.py")], cwd, f"{install.name}: bank_files.py")
    if install.redis_limit:
        check_redis_limit(python, cwd, install.name)
    if install.serve:
        check_serve(venv, cwd)
    print(f"ok   {install.name} ({time.monotonic() - started:.0f} s)", flush=True)


def main() -> None:
    """Build once, check every install in turn; exit non-zero on the first failure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", action="append", help="extras set to check, e.g. sql or ''")
    options = parser.parse_args()
    runnable, fragments = guide_snippets(GUIDE.read_text())
    if not runnable:
        sys.exit(f"FAILED: no runnable Python block found in {GUIDE}")
    print(f"{GUIDE.name}: {len(runnable)} blocks run, {len(fragments)} marked as fragments")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="treasury-installs-") as tmp:
        wheel = build_wheel(Path(tmp) / "dist")
        for install in INSTALLS:
            if options.only is not None and ",".join(install.extras) not in options.only:
                continue
            work = Path(tmp) / (install.name.replace("[", "-").replace("]", "") or "bare")
            work.mkdir()
            check(install, wheel, work)
    print(f"every documented install ran its calls ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    os.environ.pop("PYTHONPATH", None)  # the fresh environments must not see this tree's roots
    main()
