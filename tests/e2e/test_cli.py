"""The ``treasury`` command as users run it: real processes, a real SQLite file, real HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

TREASURY = [sys.executable, "-m", "treasury_aiohttp.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(**variables: str) -> dict[str, str]:
    """This process's environment without its TREASURY_* variables, plus ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")}
    return {**env, **variables}


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TREASURY, *args],
        cwd=cwd,
        env=clean_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def call(
    port: int, method: str, path: str, key: str | None = None, body: Any = None
) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


class Server:
    def __init__(self, cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        env = clean_env() if env is None else env
        self.process = subprocess.Popen(
            [*TREASURY, "serve", "--port", str(self.port), *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._wait_until_listening()

    def _wait_until_listening(self) -> None:
        # Readiness, not a race fix: the port accepts connections once the app is serving.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"server exited: {self.process.stdout.read() if self.process.stdout else ''}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError("server did not start")

    def stop(self) -> str:
        self.process.send_signal(signal.SIGINT)
        output, _ = self.process.communicate(timeout=30)
        return output


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def test_companies_create_prints_one_json_line(workdir: Path) -> None:
    result = run_cli("companies", "create", "Acme", cwd=workdir)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1
    created = json.loads(lines[0])
    assert set(created) == {"company_id", "account_id", "secret_key", "publishable_key"}
    assert isinstance(created["company_id"], int)
    assert isinstance(created["account_id"], int)
    assert created["secret_key"].startswith("sk_")
    assert created["publishable_key"].startswith("pk_")
    assert (workdir / "treasury.db").exists()  # the default database is ./treasury.db
    # The database holds the key's digest, never the key.
    assert created["secret_key"].encode() not in (workdir / "treasury.db").read_bytes()


def test_serve_then_restart_keeps_everything(workdir: Path) -> None:
    (workdir / "data").mkdir()
    database = str(workdir / "data" / "t.db")
    assert run_cli("migrate", "--database", database, cwd=workdir).returncode == 0
    created = json.loads(
        run_cli("companies", "create", "Acme", "--database", database, cwd=workdir).stdout
    )
    key = created["secret_key"]

    server = Server(workdir, "--database", database)
    try:
        status, wallet = call(
            server.port, "POST", "/api/v1/wallet", key, {"name": "Main", "currency_id": "GBP"}
        )
        assert status == 200
        assert call(server.port, "GET", "/api/v1/wallets", key)[1][0]["id"] == wallet["id"]
        status, error = call(server.port, "GET", "/api/v1/wallets", "sk_notarealkeynotarealkey")
        assert status == 401
        assert error["error"]["type"] == "authentication_error"
    finally:
        server.stop()

    server = Server(workdir, "--database", database)
    try:
        status, again = call(server.port, "GET", f"/api/v1/wallet/{wallet['id']}", key)
        assert status == 200
        assert again == wallet
        status, balance = call(server.port, "GET", f"/api/v1/wallet/{wallet['id']}/balance", key)
        assert balance["currency_code"] == "GBP"
    finally:
        server.stop()


def test_the_sandbox_clock_survives_a_restart(workdir: Path) -> None:
    """Business time advanced through one server is not set back by the next one."""
    database = str(workdir / "clock.db")
    created = json.loads(
        run_cli("companies", "create", "Acme", "--database", database, cwd=workdir).stdout
    )
    key = created["secret_key"]
    server = Server(workdir, "--database", database)
    try:
        status, advanced = call(
            server.port, "POST", "/api/v1/sandbox/clock/advance", key, {"seconds": 30 * 86400}
        )
        assert status == 200, advanced
    finally:
        server.stop()

    server = Server(workdir, "--database", database)
    try:
        status, wallet = call(
            server.port, "POST", "/api/v1/wallet", key, {"name": "Main", "currency_id": "GBP"}
        )
        assert status == 200, wallet
        assert datetime.fromisoformat(wallet["created_at"]) >= datetime.fromisoformat(
            advanced["now"]
        )
    finally:
        server.stop()


def test_database_url_from_the_environment(workdir: Path) -> None:
    url = f"sqlite:///{workdir / 'env.db'}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")},
        "TREASURY_DATABASE_URL": url,
    }
    result = subprocess.run(
        [*TREASURY, "companies", "create", "Env"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert (workdir / "env.db").exists()
    assert not (workdir / "treasury.db").exists()


def test_help_lists_every_command(workdir: Path) -> None:
    result = run_cli("--help", cwd=workdir)
    assert result.returncode == 0
    for command in ("serve", "worker", "migrate", "companies", "vault-key"):
        assert command in result.stdout
    serve_help = run_cli("serve", "--help", cwd=workdir).stdout
    for option in ("--host", "--port", "--database"):
        assert option in serve_help


def test_bad_company_name_is_a_clear_error(workdir: Path) -> None:
    result = run_cli("companies", "create", "   ", cwd=workdir)
    assert result.returncode != 0
    assert "company name" in result.stderr


def test_vault_key_prints_a_usable_key(workdir: Path) -> None:
    from treasury_vault.aesgcm import parse_key

    first = run_cli("vault-key", cwd=workdir)
    second = run_cli("vault-key", cwd=workdir)
    assert first.returncode == 0, first.stderr
    assert len(parse_key(first.stdout.strip())) == 32
    assert first.stdout != second.stdout


def test_outside_sandbox_the_server_refuses_to_start_without_a_vault_key(workdir: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")},
        "TREASURY_SANDBOX": "0",
        "TREASURY_FORM_KEY": "k" * 32,  # checked first
    }
    result = subprocess.run(
        [*TREASURY, "serve", "--port", str(free_port())],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "A vault key is required outside sandbox mode" in result.stderr
    assert "Traceback" not in result.stderr


def test_json_logs_are_scrubbed(workdir: Path) -> None:
    database = str(workdir / "logs.db")
    created = json.loads(
        run_cli("companies", "create", "Acme", "--database", database, cwd=workdir).stdout
    )
    server = Server(workdir, "--database", database, "--log-format", "json")
    try:
        status, intent = call(
            server.port,
            "POST",
            "/api/v1/payments/intent",
            created["secret_key"],
            {
                "account_id": created["account_id"],
                "billing_amount": 100,
                "billing_currency": "USD",
                "payment_type": "Card Payment",
            },
        )
        assert status == 200
        lookup = intent["payment_intent_lookup_id"]
        status, _ = call(
            server.port,
            "GET",
            f"/api/v1/payments/intent?payment_intent_lookup_id={lookup}",
            created["secret_key"],
        )
        assert status == 200
    finally:
        output = server.stop()
    lines = [line for line in output.splitlines() if line.startswith("{")]
    entries = [json.loads(line) for line in lines]
    assert any(e["logger"] == "aiohttp.access" for e in entries)
    assert all({"time", "level", "logger", "message"} <= set(e) for e in entries)
    assert lookup not in output
    assert created["secret_key"] not in output


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The single line a refused command printed on stderr (asserted to be one)."""
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("value", ["False ", "flase", "disabled"])
def test_a_sandbox_flag_that_is_not_a_boolean_stops_the_server(workdir: Path, value: str) -> None:
    # Each of these turned sandbox mode on, where any secret key credits money from nowhere.
    result = run_cli(
        "serve", "--port", str(free_port()), cwd=workdir, env=clean_env(TREASURY_SANDBOX=value)
    )
    line = one_line_error(result)
    assert f"TREASURY_SANDBOX={value!r}" in line
    assert not (workdir / "treasury.db").exists()  # refused before anything was opened


def test_the_stripe_provider_without_a_key_stops_the_server(workdir: Path) -> None:
    result = run_cli(
        "serve",
        "--port",
        str(free_port()),
        cwd=workdir,
        env=clean_env(TREASURY_CARD_PROVIDER="stripe"),
    )
    line = one_line_error(result)
    assert "TREASURY_STRIPE_API_KEY is required when TREASURY_CARD_PROVIDER=stripe" in line
    assert not (workdir / "treasury.db").exists()  # refused before anything was opened


def test_an_adapter_no_plugin_registers_is_refused_at_start(workdir: Path) -> None:
    # The bank rail is built on first use: this used to start, then answer the first deposit 500.
    result = run_cli(
        "serve", "--port", str(free_port()), cwd=workdir, env=clean_env(TREASURY_BANK_RAIL="nope")
    )
    line = one_line_error(result)
    assert "No bank_rail adapter named 'nope'" in line
    assert not (workdir / "treasury.db").exists()


# --- treasury serve's start (issue 20, items 8, 9 and 12) -------------------------------------


def test_serve_on_a_busy_port_says_so_in_one_line(workdir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", "--port", str(port), cwd=workdir)
    line = one_line_error(result)
    assert f"127.0.0.1:{port}" in line
    assert "in use" in line
    assert "serving on" not in result.stdout  # it never served


def test_serve_says_loudly_that_sandbox_mode_is_on(workdir: Path) -> None:
    server = Server(workdir)
    output = server.stop()
    loud = [line for line in output.splitlines() if "SANDBOX MODE" in line]
    assert len(loud) == 1
    assert "any secret key can credit money" in loud[0]
    # Without a form key each process signs its own forms; sandbox mode only warns.
    assert "TREASURY_FORM_KEY" in output


def _production_env(**variables: str) -> dict[str, str]:
    from treasury_vault.aesgcm import generate_key

    return clean_env(TREASURY_SANDBOX="false", TREASURY_VAULT_KEY=generate_key(), **variables)


def test_outside_sandbox_the_server_refuses_to_start_without_a_form_key(workdir: Path) -> None:
    # Behind one address, a form served by one process would fail its CSRF check on another.
    result = run_cli("serve", "--port", str(free_port()), cwd=workdir, env=_production_env())
    line = one_line_error(result)
    assert "TREASURY_FORM_KEY" in line
    assert not (workdir / "treasury.db").exists()

    server = Server(workdir, env=_production_env(TREASURY_FORM_KEY="k" * 32))
    output = server.stop()
    assert "SANDBOX MODE" not in output
    assert "serving on" in output


def test_version(workdir: Path) -> None:
    from importlib.metadata import version

    result = run_cli("--version", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"treasury-core {version('treasury-core')}"


NO_PSYCOPG = """
import importlib.abc, sys

class _NotInstalled(importlib.abc.MetaPathFinder):
    # As if the postgres extra were not installed: psycopg cannot be found.
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg_binary", "psycopg_c"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
"""


def test_a_postgres_url_without_psycopg_names_the_extra(workdir: Path) -> None:
    hooks = workdir / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(NO_PSYCOPG)
    env = clean_env(PYTHONPATH=str(hooks))
    result = run_cli(
        "migrate", "--database", "postgresql://u:p@127.0.0.1:1/db", cwd=workdir, env=env
    )
    line = one_line_error(result)
    assert "pip install 'treasury-core[postgres]'" in line


def test_migrate_refuses_a_directory_that_does_not_exist(workdir: Path) -> None:
    result = run_cli("migrate", "--database", str(workdir / "typo" / "t.db"), cwd=workdir)
    line = one_line_error(result)
    assert "typo" in line
    assert "does not exist" in line
    assert not (workdir / "typo").exists()


# --- treasury companies list / rotate-key / revoke-key (issue 20, item 12) --------------------


def test_companies_list_rotate_key_and_revoke_key(workdir: Path) -> None:
    database = str(workdir / "t.db")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("companies", *args, "--database", database, cwd=workdir)

    acme = json.loads(cli("create", "Acme").stdout)
    beta = json.loads(cli("create", "Beta").stdout)

    listed = cli("list")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["company_id"], r["name"]) for r in rows] == [
        (acme["company_id"], "Acme"),
        (beta["company_id"], "Beta"),
    ]
    assert rows[0]["account_ids"] == [acme["account_id"]]
    keys = {k["kind"]: k for k in rows[0]["keys"]}
    assert set(keys) == {"secret", "publishable"}
    assert keys["secret"]["prefix"] == acme["secret_key"][:7]
    assert keys["secret"]["revoked_at"] is None
    # Keys are shown once, when made: a listing has their ids and prefixes only.
    assert acme["secret_key"] not in listed.stdout
    assert acme["publishable_key"] not in listed.stdout

    rotated = cli("rotate-key", str(acme["company_id"]))
    assert rotated.returncode == 0, rotated.stderr
    assert len(rotated.stdout.splitlines()) == 1
    new = json.loads(rotated.stdout)
    assert new["company_id"] == acme["company_id"]
    assert new["kind"] == "secret"
    assert new["key"].startswith("sk_")
    assert new["revoked_key_ids"] == [keys["secret"]["id"]]

    kept = json.loads(
        cli("rotate-key", str(acme["company_id"]), "--kind", "publishable", "--keep-old").stdout
    )
    assert kept["key"].startswith("pk_")
    assert kept["revoked_key_ids"] == []

    # No key cache in the server, so a revocation by another process counts at once.
    server = Server(
        workdir, "--database", database, env=clean_env(TREASURY_API_KEY_CACHE_SECONDS="0")
    )
    try:
        assert call(server.port, "GET", "/api/v1/wallets", acme["secret_key"])[0] == 401
        assert call(server.port, "GET", "/api/v1/wallets", new["key"])[0] == 200
        assert call(server.port, "GET", "/api/v1/wallets", beta["secret_key"])[0] == 200
        revoked = cli("revoke-key", beta_secret_id(cli, beta["company_id"]))
        assert revoked.returncode == 0, revoked.stderr
        assert json.loads(revoked.stdout)["revoked_at"]
        assert call(server.port, "GET", "/api/v1/wallets", beta["secret_key"])[0] == 401
    finally:
        server.stop()


def beta_secret_id(cli: Any, company_id: int) -> str:
    rows = [json.loads(line) for line in cli("list").stdout.splitlines()]
    row = next(r for r in rows if r["company_id"] == company_id)
    return str(next(k["id"] for k in row["keys"] if k["kind"] == "secret"))


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The error a refused command printed last (after any warnings of the start-up)."""
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    return result.stderr.strip().splitlines()[-1]


def test_companies_key_commands_refuse_what_does_not_exist(workdir: Path) -> None:
    database = str(workdir / "t.db")
    acme = json.loads(
        run_cli("companies", "create", "Acme", "--database", database, cwd=workdir).stdout
    )
    line = error_line(
        run_cli("companies", "rotate-key", "999", "--database", database, cwd=workdir)
    )
    assert "No such company: 999" in line
    line = error_line(
        run_cli("companies", "revoke-key", "key_nope", "--database", database, cwd=workdir)
    )
    assert "No such API key: key_nope" in line
    # Nothing changed: Acme's two keys are as they were.
    listed = run_cli("companies", "list", "--database", database, cwd=workdir).stdout
    (row,) = [json.loads(line) for line in listed.splitlines()]
    assert row["company_id"] == acme["company_id"]
    assert [k["revoked_at"] for k in row["keys"]] == [None, None]


# --- treasury operator-keys create / list / revoke ------------------------------------------


def test_operator_keys_create_list_revoke(workdir: Path) -> None:
    database = str(workdir / "t.db")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("operator-keys", *args, "--database", database, cwd=workdir)

    created = cli("create", "ops")
    assert created.returncode == 0, created.stderr
    assert len(created.stdout.splitlines()) == 1
    ops = json.loads(created.stdout)
    assert ops["key"].startswith("ok_") and ops["prefix"] == ops["key"][:7]
    assert (ops["name"], ops["revoked_at"]) == ("ops", None)
    backup = json.loads(cli("create", "backup").stdout)
    assert "already exists" in error_line(cli("create", "ops"))

    listed = cli("list")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["id"], r["name"], r["revoked_at"]) for r in rows] == [
        (ops["id"], "ops", None),
        (backup["id"], "backup", None),
    ]
    assert set(rows[0]) == {"id", "name", "prefix", "created_at", "revoked_at"}
    # The keys are shown once, when made; a listing has their ids and prefixes only.
    assert ops["key"] not in listed.stdout and backup["key"] not in listed.stdout
    acme = json.loads(
        run_cli("companies", "create", "Acme", "--database", database, cwd=workdir).stdout
    )

    # No key cache in the server, so a revocation by another process counts at once. The
    # sandbox rail exchanges no files: an accepted operator key gets 400, not 401 or 403.
    server = Server(
        workdir, "--database", database, env=clean_env(TREASURY_API_KEY_CACHE_SECONDS="0")
    )
    try:
        assert statement_status(server.port, ops["key"]) == 400
        assert statement_status(server.port, backup["key"]) == 400
        assert statement_status(server.port, acme["secret_key"]) == 403
        assert call(server.port, "GET", "/api/v1/wallets", ops["key"])[0] == 401
        by_name = cli("revoke", "ops")
        assert by_name.returncode == 0, by_name.stderr
        assert json.loads(by_name.stdout)["id"] == ops["id"]
        assert statement_status(server.port, ops["key"]) == 401
        by_id = json.loads(cli("revoke", backup["id"]).stdout)
        assert by_id["name"] == "backup" and by_id["revoked_at"]
        assert statement_status(server.port, backup["key"]) == 401
    finally:
        server.stop()
    assert "No such operator key: ops" in error_line(cli("revoke", "ops"))
    # A revoked key's name may be used again.
    again = json.loads(cli("create", "ops").stdout)
    rows = [json.loads(line) for line in cli("list").stdout.splitlines()]
    assert [r["revoked_at"] is None for r in rows] == [False, False, True]
    assert rows[-1]["id"] == again["id"]


def statement_status(port: int, key: str) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/bank-statements",
        data=b"<Document/>",
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/xml"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


@pytest.mark.parametrize(
    "command",
    [
        ("companies", "list"),
        ("companies", "rotate-key", "1"),
        ("companies", "revoke-key", "key_1"),
        ("operator-keys", "list"),
        ("operator-keys", "revoke", "auditor"),
        ("bank", "unmatched"),
        ("bank", "breaks"),
    ],
)
def test_a_command_about_a_database_refuses_one_that_does_not_exist(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    # Opened, the file would be made with every table, and the command would answer from it
    # (an empty list, "no such company") as if it were the real database.
    missing = tmp_path / "missing.db"
    result = run_cli(*command, "--database", str(missing), cwd=tmp_path)
    assert one_line_error(result).endswith(f"no database at {missing}")
    assert result.stdout == ""
    assert not missing.exists()


def test_the_first_operator_key_of_a_new_install_makes_its_database(tmp_path: Path) -> None:
    new = tmp_path / "new.db"
    result = run_cli("operator-keys", "create", "auditor", "--database", str(new), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["name"] == "auditor"
    assert new.exists()


def test_a_malformed_sqlite_url_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    result = run_cli(
        "companies", "list", cwd=tmp_path, env=clean_env(TREASURY_DATABASE_URL="sqlite:foo")
    )
    assert one_line_error(result).startswith("Error: cannot open the treasury: ")
