"""Every shell command of the README and the docs pages runs as written, against a real server.

For each page with commands to run, ``treasury serve`` starts as the README starts it: in a
fresh directory, on its SQLite default ``./treasury.db``, in sandbox mode. The page's blocks then
run in order as one bash script in that directory, so variables set in one block reach the next
(``set -o pipefail``; each command's exit status, output and errors are kept apart). The reader's
``.venv/bin/treasury`` and ``treasury`` are this checkout's command. Two things make the check
stricter than a reader's shell, never looser: ``curl`` fails on an HTTP error status
(``--fail-with-body``), and the docs' address ``127.0.0.1:8080`` is connected to the test's server
on its free port (``--connect-to``, so the URL and ``Host`` stay as written).

A command whose sample output the page shows must print JSON of the same shape
(tests/documented_commands.py says how a sample is read and compared). Blocks marked
``<!-- not-run: reason -->`` do not run, and every such marker must give its reason.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.documented_commands import Block, parse_sample, read_page, shape_differences
from tests.e2e.test_cli import Server, clean_env

ROOT = Path(__file__).resolve().parents[2]
PAGES = [Path("README.md"), *sorted(p.relative_to(ROOT) for p in (ROOT / "docs").rglob("*.md"))]
#: Where the docs say the server listens.
DOCUMENTED_ADDRESS = "127.0.0.1:8080"
#: curl's exit status under ``--fail-with-body`` for an answer of 400 or above.
CURL_HTTP_ERROR = 22


def _blocks(page: Path) -> list[Block]:
    return read_page(ROOT / page)[0]


RUNNABLE = [page for page in PAGES if any(b.not_run is None for b in _blocks(page))]


def _script(blocks: list[Block], out: Path) -> str:
    """One bash script running every command in turn; it stops at the first that fails."""
    lines = ["set -o pipefail"]
    number = 0
    for block in blocks:
        for command in block.commands:
            # Braces, not a subshell: assignments and exports stay for the next commands.
            # The command stands on lines of its own, so a trailing comment ends with it.
            target = shlex.quote(str(out / str(number)))
            lines += ["{", command.text, f"}} </dev/null >{target}.out 2>{target}.err"]
            # A name no page uses, so that no documented variable is overwritten.
            status = "documented_command_status"
            lines += [f"{status}=$?; echo ${status} >{target}.rc"]
            lines += [f"[ ${status} -eq 0 ] || exit ${status}"]
            number += 1
    return "\n".join(lines) + "\n"


def _tools(home: Path, port: int) -> Path:
    """A directory for the front of ``PATH``: the reader's ``treasury`` and a strict ``curl``."""
    curl = shutil.which("curl")
    assert curl is not None, "the docs' commands use curl: install it (apt-get install curl)"
    bin_dir = home / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    treasury = bin_dir / "treasury"
    python = shlex.quote(sys.executable)
    treasury.write_text(f'#!/bin/sh\nexec {python} -m treasury_aiohttp.cli "$@"\n')
    strict_curl = bin_dir / "curl"
    connect = f"{DOCUMENTED_ADDRESS}:127.0.0.1:{port}"
    strict_curl.write_text(
        f'#!/bin/sh\nexec {shlex.quote(curl)} --fail-with-body --connect-to {connect} "$@"\n'
    )
    for tool in (treasury, strict_curl):
        tool.chmod(0o755)
    return bin_dir


@pytest.fixture
def home(tmp_path: Path) -> Iterator[tuple[Path, Server]]:
    """The reader's directory with the README's server running in it."""
    server = Server(tmp_path)
    try:
        yield tmp_path, server
    finally:
        server.stop()


@pytest.mark.parametrize("page", RUNNABLE, ids=str)
def test_the_page_s_commands_run_as_written(page: Path, home: tuple[Path, Server]) -> None:
    directory, server = home
    blocks = [block for block in _blocks(page) if block.not_run is None]
    out = directory / ".commands"
    out.mkdir()
    bin_dir = _tools(directory, server.port)
    env = clean_env(PATH=f"{bin_dir}:{clean_env()['PATH']}")
    result = subprocess.run(
        ["bash", "-c", _script(blocks, out)],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    commands = [command for block in blocks for command in block.commands]
    for number, command in enumerate(commands):
        where = f"{page}:{command.line}"
        rc = out / f"{number}.rc"
        assert rc.exists(), f"{where} did not run: {result.stderr}"
        output = (out / f"{number}.out").read_text()
        errors = (out / f"{number}.err").read_text()
        status = int(rc.read_text())
        why = " (curl: the server answered an HTTP error)" if status == CURL_HTTP_ERROR else ""
        assert status == 0, f"{where} exited {status}{why}:\n{command.text}\n{output}\n{errors}"
        if command.sample is None:
            continue
        sample, elided = parse_sample(command.sample)
        differences = shape_differences(sample, json.loads(output), elided=elided)
        assert not differences, f"{where}: the sample is not the output's shape: {differences}"
    assert result.returncode == 0, result.stderr


def test_every_shell_block_runs_or_says_why_not() -> None:
    for page in PAGES:
        blocks, markers = read_page(ROOT / page)
        for marker in markers:
            assert marker.reason, f"{page}:{marker.line}: a not-run marker without a reason"
            assert marker.before_a_shell_block, (
                f"{page}:{marker.line}: a not-run marker that no shell block follows"
            )
        for block in blocks:
            assert block.not_run is not None or block.commands, (
                f"{page}:{block.line}: a shell block without a command"
            )
