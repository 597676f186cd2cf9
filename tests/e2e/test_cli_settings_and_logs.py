"""The ``treasury`` command's settings and logs as an operator meets them: a misspelt
variable, a production start with settings missing, JSON logs that a pipeline parses line by
line. Real processes, a real SQLite file, real HTTP on loopback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from tests.e2e.test_cli import TREASURY, Server, call, clean_env, free_port, run_cli

VAULT_NOTICE = "no vault key configured; using the public sandbox key"


def json_lines(output: str) -> list[dict[str, Any]]:
    """Every line of ``output`` as a JSON object (a line that is not one fails the test)."""
    entries = []
    for line in output.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            raise AssertionError(f"not a JSON line: {line!r}\nin:\n{output}") from None
        assert isinstance(entry, dict), line
        assert {"time", "level", "logger", "message"} <= set(entry), line
        entries.append(entry)
    return entries


# --- unknown variables --------------------------------------------------------------------


def test_a_misspelt_variable_is_warned_about_with_the_closest_known_name(tmp_path: Path) -> None:
    env = clean_env(
        TREASURY_SANDBOXX="0",  # a typo of a setting
        TREASURY_ECB_URLL="https://example.test/rates.xml",  # of a plugin's own variable
        TREASURY_ECB_MARKUP_BPS="5",  # the ecb adapter's, so known
        TREASURY_LOG_FORMAT="text",  # the command line's, so known
        TREASURY_TEST_SOMETHING="x",  # the tests' own
        TREASURY_ZZZZZZZZZZZZ="1",  # like nothing known
    )
    result = run_cli("companies", "create", "Acme", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    warnings = result.stderr.strip().splitlines()
    assert warnings == [
        "TREASURY_ECB_URLL is not a treasury setting and is ignored; "
        "did you mean TREASURY_ECB_URL?",
        "TREASURY_SANDBOXX is not a treasury setting and is ignored; "
        "did you mean TREASURY_SANDBOX?",
        "TREASURY_ZZZZZZZZZZZZ is not a treasury setting and is ignored",
    ]
    assert json.loads(result.stdout)["secret_key"].startswith("sk_")


def test_the_unknown_variable_warning_is_a_json_line_with_json_logs(tmp_path: Path) -> None:
    env = clean_env(TREASURY_POOL_SIZ="4", TREASURY_LOG_FORMAT="json")
    result = run_cli("migrate", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    [entry] = json_lines(result.stderr)
    assert entry["level"] == "WARNING"
    assert entry["logger"] == "treasury.settings"
    assert "did you mean TREASURY_POOL_SIZE?" in entry["message"]


# --- missing settings outside sandbox mode ------------------------------------------------


def test_outside_sandbox_every_missing_setting_is_named_at_once(tmp_path: Path) -> None:
    env = clean_env(
        TREASURY_SANDBOX="false", TREASURY_CARD_PROVIDER="stripe", TREASURY_BANK_RAIL="files"
    )
    result = run_cli("serve", "--port", str(free_port()), cwd=tmp_path, env=env)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "Error: The settings are not valid: 4 required settings are missing:"
    listed = lines[1:]
    assert len(listed) == 4
    assert all(line.startswith("- ") for line in listed)
    for variable in (
        "TREASURY_STRIPE_API_KEY",
        "TREASURY_BANK_DEBTOR_NAME",
        "TREASURY_VAULT_KEY",
        "TREASURY_FORM_KEY",
    ):
        assert sum(variable in line for line in listed) == 1, (variable, listed)
    assert not (tmp_path / "treasury.db").exists()  # refused before anything was opened


def test_the_worker_names_what_it_needs_and_not_the_form_key(tmp_path: Path) -> None:
    # The form key signs hosted forms, which only `treasury serve` serves.
    env = clean_env(TREASURY_SANDBOX="false", TREASURY_CARD_PROVIDER="stripe")
    result = run_cli("worker", cwd=tmp_path, env=env)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "Error: The settings are not valid: 2 required settings are missing:"
    assert "TREASURY_STRIPE_API_KEY" in lines[1]
    assert "TREASURY_VAULT_KEY" in lines[2]
    assert len(lines) == 3
    assert not (tmp_path / "treasury.db").exists()


def test_a_refusal_is_one_json_line_with_json_logs(tmp_path: Path) -> None:
    env = clean_env(TREASURY_SANDBOX="false")
    result = run_cli(
        "serve", "--port", str(free_port()), "--log-format", "json", cwd=tmp_path, env=env
    )
    assert result.returncode == 1
    assert result.stdout == ""
    [entry] = json_lines(result.stderr)
    assert entry["level"] == "ERROR"
    assert entry["logger"] == "treasury.cli"
    assert "TREASURY_VAULT_KEY" in entry["message"]
    assert "TREASURY_FORM_KEY" in entry["message"]


# --- JSON logs ----------------------------------------------------------------------------


def test_with_json_logs_every_line_of_serve_is_json_with_access_fields(tmp_path: Path) -> None:
    database = str(tmp_path / "logs.db")
    created = run_cli("companies", "create", "Acme", "--database", database, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    company = json.loads(created.stdout)
    [listed] = [
        json.loads(line)
        for line in run_cli("companies", "list", "--database", database, cwd=tmp_path)
        .stdout.strip()
        .splitlines()
    ]
    [secret_key_id] = [k["id"] for k in listed["keys"] if k["kind"] == "secret"]
    env = clean_env(TREASURY_SANDBOXX="1")  # its warning must be JSON too
    server = Server(tmp_path, "--database", database, "--log-format", "json", env=env)
    try:
        status, _ = call(server.port, "GET", "/api/v1/wallet/123456", company["secret_key"])
        assert status == 404
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.port}/api/v1/openapi.json",
            headers={"X-Request-Id": "lb-7f3a.1"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        status, _ = call(server.port, "GET", "/api/v1/wallet/1", "sk_not_a_real_key")
        assert status == 401
    finally:
        output = server.stop()
    entries = json_lines(output)  # stdout and stderr together: every line parses
    messages = [(e["logger"], e["level"], e["message"]) for e in entries]
    assert any(
        logger == "treasury.cli" and level == "WARNING" and message.startswith("SANDBOX MODE")
        for logger, level, message in messages
    ), messages
    assert any(m.startswith("treasury-core serving on http://") for _, _, m in messages)
    assert any("did you mean TREASURY_SANDBOX?" in m for _, _, m in messages)
    assert [m for _, _, m in messages].count(VAULT_NOTICE) == 1  # where it matters, once
    access = [e for e in entries if e["logger"] == "aiohttp.access"]
    assert len(access) == 3
    fields = {"method", "path", "status", "duration_ms", "key_id", "request_id"}
    assert all(fields <= set(e) for e in access)
    authenticated, traced, refused = access
    assert (authenticated["method"], authenticated["path"], authenticated["status"]) == (
        "GET",
        "/api/v1/wallet/123456",
        404,
    )
    assert authenticated["key_id"] == secret_key_id
    assert isinstance(authenticated["duration_ms"], float)
    assert authenticated["duration_ms"] >= 0
    assert (traced["path"], traced["status"], traced["key_id"]) == (
        "/api/v1/openapi.json",
        200,
        None,
    )
    assert traced["request_id"] == "lb-7f3a.1"
    assert refused["status"] == 401
    assert refused["key_id"] is None
    ids = [e["request_id"] for e in access]
    assert all(isinstance(i, str) and i for i in ids)
    assert len(set(ids)) == 3
    assert company["secret_key"] not in output


def test_with_json_logs_every_line_of_the_worker_is_json(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [*TREASURY, "worker", "--log-format", "json"],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # written once the worker runs
    finally:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    [started] = json_lines(first + stdout)
    assert started["message"].startswith("treasury-core worker on ")
    assert VAULT_NOTICE in [e["message"] for e in json_lines(stderr)]


def test_one_shot_commands_do_not_print_the_vault_notice(tmp_path: Path) -> None:
    for args in (("companies", "create", "Acme"), ("ledger", "verify"), ("migrate",)):
        result = run_cli(*args, cwd=tmp_path)
        assert result.returncode == 0, (args, result.stderr)
        assert VAULT_NOTICE not in result.stderr, args
        assert result.stderr == "", (args, result.stderr)


def test_with_json_logs_a_crash_is_one_json_entry_with_its_traceback(tmp_path: Path) -> None:
    # A command that fails unexpectedly (a bug): the command line's own handling, in a real
    # process, with one command added that raises (and carries a secret in its message).
    script = (
        "import sys, click\n"
        "from treasury_aiohttp.cli import commands as cli\n"
        "@cli.main.command()\n"
        "def boom() -> None:\n"
        "    '''Fail.'''\n"
        "    raise RuntimeError('boom with sk_live_abcdefghijklmnopqrstuvwx')\n"
        "cli.main(['--log-format', 'json', 'boom'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    [entry] = json_lines(result.stderr)
    assert (entry["level"], entry["logger"], entry["message"]) == (
        "ERROR",
        "treasury.cli",
        "the command failed",
    )
    assert "Traceback" in entry["exception"]
    assert "RuntimeError: boom with" in entry["exception"]
    assert "sk_live_abcdefghijklmnopqrstuvwx" not in result.stderr  # scrubbed
