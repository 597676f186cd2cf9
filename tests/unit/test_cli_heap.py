"""``treasury serve`` and ``treasury worker`` freeze their start-up heap and set the garbage
collector's thresholds before they run."""

from __future__ import annotations

import gc
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from click.testing import CliRunner

from treasury_aiohttp import server, worker
from treasury_aiohttp.cli.commands import GC_THRESHOLDS, main
from treasury_aiohttp.keys import TREASURY_KEY
from treasury_core import Treasury

#: Python's own defaults up to 3.12; the commands change them only there.
DEFAULTS = (700, 10, 10)
EXPECTED = GC_THRESHOLDS if sys.version_info < (3, 13) else DEFAULTS


@pytest.fixture(autouse=True)
def collector(logging_state: None) -> Iterator[None]:
    # Each test starts from nothing frozen and known thresholds, and puts both back; the
    # commands also configure logging, which ``logging_state`` puts back.
    saved = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(*DEFAULTS)
    yield
    gc.unfreeze()
    gc.set_threshold(*saved)


def test_serve_freezes_the_heap_once_the_app_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    async def serve(app: web.Application, sockets: list[socket.socket], **options: Any) -> None:
        seen["frozen"] = gc.get_freeze_count()
        # Frozen objects are out of the collector's sight: the app was built before the freeze.
        seen["app_tracked"] = any(o is app for o in gc.get_objects())
        seen["thresholds"] = gc.get_threshold()
        # The command bound its sockets before it built anything; serving only listens.
        seen["port"] = sockets[0].getsockname()[1]
        for sock in sockets:
            sock.close()
        app[TREASURY_KEY].close()  # what the app's cleanup would have done

    monkeypatch.setattr(server, "serve", serve)
    database = tmp_path / "t.db"
    result = CliRunner().invoke(main, ["serve", "--port", "0", "--database", str(database)])
    assert result.exit_code == 0, result.output
    assert f"serving on http://127.0.0.1:{seen['port']} " in result.output
    assert seen["frozen"] > 10_000
    assert seen["app_tracked"] is False
    assert seen["thresholds"] == EXPECTED


def test_worker_freezes_the_heap_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    async def run_worker(treasury: Treasury, **options: Any) -> None:
        seen["frozen"] = gc.get_freeze_count()
        seen["thresholds"] = gc.get_threshold()

    monkeypatch.setattr(worker, "run_worker", run_worker)
    result = CliRunner().invoke(main, ["worker", "--database", str(tmp_path / "t.db")])
    assert result.exit_code == 0, result.output
    assert seen["frozen"] > 10_000
    assert seen["thresholds"] == EXPECTED
