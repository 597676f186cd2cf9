"""The ``treasury`` command's settings as an operator meets them: a misspelt variable, a
production start with settings missing. Real processes, a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_cli import clean_env, free_port, run_cli

VAULT_NOTICE = "no vault key configured; using the public sandbox key"


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
    warnings = [line for line in result.stderr.strip().splitlines() if VAULT_NOTICE not in line]
    assert warnings == [
        "TREASURY_ECB_URLL is not a treasury setting and is ignored; "
        "did you mean TREASURY_ECB_URL?",
        "TREASURY_SANDBOXX is not a treasury setting and is ignored; "
        "did you mean TREASURY_SANDBOX?",
        "TREASURY_ZZZZZZZZZZZZ is not a treasury setting and is ignored",
    ]
    assert json.loads(result.stdout)["secret_key"].startswith("sk_")


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
