"""The docs site builds with ``mkdocs build --strict`` and shows what the code says.

The build runs once per module as a subprocess, exactly as CI runs it, into a temporary
directory. The checks then read the built HTML: every OpenAPI operation has its section in the
HTTP reference, every row of the payment intent table is on the states page, and the published
``openapi.json`` is the document the server builds.
"""

from __future__ import annotations

import html
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

# The docs extra is part of dev: a missing mkdocs is a broken setup, not a reason to skip.
from mkdocs.exceptions import PluginError

from treasury_core.ledger import PendingStatus
from treasury_core.movements.states import MOVEMENT_TRANSITIONS
from treasury_core.payments import TRANSITIONS, state_diagram
from treasury_core.services.movements.settlement import KINDS

ROOT = Path(__file__).resolve().parents[2]


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "tools" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    # The Material banner about MkDocs 2.0 is advice, not a warning of this build.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(target)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    return target


def _text(site: Path, page: str) -> str:
    return (site / page / "index.html").read_text(encoding="utf-8")


def _rows(page_html: str) -> list[list[str]]:
    """Every table row of a page as its cells' text."""
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", page_html, re.DOTALL):
        cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.DOTALL)
        rows.append([html.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in cells])
    return rows


def _openapi() -> dict[str, Any]:
    document: dict[str, Any] = _hooks().openapi_document()
    return document


def test_every_page_is_built_and_no_marker_is_left(site: Path) -> None:
    pages = list(site.rglob("*.html"))
    assert len(pages) > 10
    for page in pages:
        assert "<!-- generated:" not in page.read_text(encoding="utf-8"), page


def test_the_published_openapi_document_is_the_servers(site: Path) -> None:
    published = json.loads((site / "openapi.json").read_text(encoding="utf-8"))
    assert published == _openapi()


def test_every_operation_is_in_the_http_reference(site: Path) -> None:
    page = html.unescape(_text(site, "reference/http"))
    document = _openapi()
    operations = [
        (path, method, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]
    assert len(operations) >= 40
    for path, method, operation in operations:
        anchor = f'id="op-{operation["operationId"]}"'
        assert anchor in page, (method, path)
        section = page[page.index(anchor) :]
        assert f"{method.upper()} {path}" in section[:400], (method, path)
        assert operation["summary"] in section
    for name in document["components"]["schemas"]:
        assert f'id="schema-{name.lower().replace("_", "-").strip("-")}"' in page, name


def test_the_reference_shows_request_fields_and_statuses(site: Path) -> None:
    page = _text(site, "reference/http")
    rows = _rows(page)
    # The create-intent body is a table of its fields, the required ones marked.
    required = set(_openapi()["components"]["schemas"]["CreateIntentRequest"]["required"])
    fields = {row[0]: row[2] for row in rows if len(row) == 4}
    for name in ("account_id", "billing_amount", "billing_currency", "payment_type"):
        assert fields[name] == ("yes" if name in required else "no")
    assert ["429", "Too many requests with this API key (headers: Retry-After)", "Error"] in rows


def test_every_payment_transition_is_on_the_states_page(site: Path) -> None:
    page = _text(site, "concepts/states")
    assert html.escape(state_diagram().rstrip("\n"), quote=False) in page
    table = [row for row in _rows(page) if len(row) == 7]
    assert table[0][0] == "Capture method"  # the header
    rows = {tuple(row[:5]) for row in table[1:]}
    for (method, source, trigger), rule in TRANSITIONS.items():
        start = source.value if source else "(none)"
        condition = "" if rule.guard.name == "NONE" else f"now {rule.guard.value}"
        assert (method.value, start, trigger.value, condition, rule.target.value) in rows
    assert len(rows) == len(TRANSITIONS)


def test_movement_and_pending_states_are_drawn_from_the_code(site: Path) -> None:
    states = html.unescape(_text(site, "concepts/states"))
    for (source, trigger), target in MOVEMENT_TRANSITIONS.items():
        assert f"{source.value if source else '[*]'} --> {target.value}: {trigger.value}" in states
    for kind in KINDS.values():
        assert kind.completed.value in states and kind.failed.value in states
    holds = html.unescape(_text(site, "concepts/holds"))
    for status in PendingStatus:
        assert f"--> {status.value}" in holds
    assert "pending --> posted: PostPending [before the deadline]" in holds
    assert "pending --> expired: ExpirePending [at or after the deadline]" in holds


def test_an_unknown_marker_fails_the_build() -> None:
    hooks = _hooks()
    page = SimpleNamespace(file=SimpleNamespace(src_uri="x.md"))
    with pytest.raises(PluginError, match="no-such-block"):
        hooks.on_page_markdown("a\n<!-- generated: no-such-block -->\n", page, None, None)


def test_the_hook_builds_the_document_quietly(caplog: pytest.LogCaptureFixture) -> None:
    hooks = _hooks()
    with caplog.at_level(logging.WARNING):
        hooks.openapi_document()
    assert not caplog.records
