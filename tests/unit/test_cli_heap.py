"""``treasury serve`` and ``treasury worker`` freeze their start-up heap and set the garbage
collector's thresholds before they run."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from click.testing import CliRunner

from treasury_aiohttp import worker
from treasury_aiohttp.cli import GC_THRESHOLDS, main
from treasury_aiohttp.keys import TREASURY_KEY
from treasury_core import Treasury


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    # Each test starts and ends with nothing frozen; the commands also configure logging,
    # which is put back.
    gc.unfreeze()
    thresholds = gc.get_threshold()
    loggers = [logging.getLogger(), logging.getLogger("aiohttp.access")]
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    for lg, handlers, level, propagate in saved:
        lg.handlers[:], lg.level, lg.propagate = handlers, level, propagate


def test_serve_freezes_the_heap_once_the_app_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def run_app(app: web.Application, **options: Any) -> None:
        seen["frozen"] = gc.get_freeze_count()
        seen["thresholds"] = gc.get_threshold()
        seen["port"] = options["port"]
        app[TREASURY_KEY].close()  # what the app's cleanup would have done

    monkeypatch.setattr(web, "run_app", run_app)
    database = tmp_path / "t.db"
    result = CliRunner().invoke(main, ["serve", "--port", "8123", "--database", str(database)])
    assert result.exit_code == 0, result.output
    assert seen["port"] == 8123
    # The app (built before) is among what the collector no longer traverses.
    assert seen["frozen"] > 10_000
    assert seen["thresholds"] == GC_THRESHOLDS != (700, 10, 10)


def test_worker_freezes_the_heap_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    async def run_worker(treasury: Treasury) -> None:
        seen["frozen"] = gc.get_freeze_count()
        seen["thresholds"] = gc.get_threshold()

    monkeypatch.setattr(worker, "run_worker", run_worker)
    result = CliRunner().invoke(main, ["worker", "--database", str(tmp_path / "t.db")])
    assert result.exit_code == 0, result.output
    assert seen["frozen"] > 10_000
    assert seen["thresholds"] == GC_THRESHOLDS
