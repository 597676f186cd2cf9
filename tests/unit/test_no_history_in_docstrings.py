"""Docstrings and comments say what the code is and why, never when or in which issue it came.

The history lives in git and in CHANGELOG.md; a sentence such as "added after issue 24" or "for
providers written before" ages the moment it is written and tells a reader nothing about the
code in front of them. This test reads every docstring and comment under ``src/`` and
``contrib/`` (Alembic's migration scripts excepted: each one is a dated change by nature) and
refuses the phrases in :data:`HISTORY`.

:data:`STILL_TO_CLEAN` lists the files that still hold such a sentence while their owners
rewrite them; the test fails too when one of them is clean, so that its entry is deleted.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The folders read, from the repository's root.
FOLDERS = ("src", "contrib")

#: Phrases that tell history. Each is narrow enough that a sentence about what the code does
#: does not match it ("a key no longer live" is a state; "issued" is not an issue).
HISTORY = re.compile(
    r"\bissues? #?\d+\b"
    r"|\badded after\b"
    r"|\bwritten before\b"
    r"|\bfor providers written\b"
    r"|\bsince issue\b"
    r"|\bbefore issue\b"
    r"|\bin issue\b"
    r"|\bused to (?:be|read|write|hold|live|call|have)\b",
    re.IGNORECASE,
)

#: Files that still tell history, by path from the root: their owners are rewriting them.
STILL_TO_CLEAN: frozenset[str] = frozenset()


def _sources() -> Iterator[Path]:
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "migrations" not in path.relative_to(ROOT).parts:
                yield path


def _prose(source: str) -> Iterator[tuple[int, str]]:
    """Each comment and docstring of a module, with the line it starts on."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                yield body[0].lineno, body[0].value.value


@cache
def _history() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in _sources():
        for line, text in _prose(path.read_text()):
            for match in HISTORY.finditer(" ".join(text.split())):
                relative = path.relative_to(ROOT).as_posix()
                found.setdefault(relative, []).append(f"{line}: {match.group(0)!r}")
    return found


def test_no_docstring_or_comment_tells_history() -> None:
    found = _history()
    new = {path: hits for path, hits in found.items() if path not in STILL_TO_CLEAN}
    assert new == {}, "say what is and why; the history belongs in git and CHANGELOG.md"


def test_every_file_still_to_clean_still_tells_history() -> None:
    clean = sorted(STILL_TO_CLEAN - set(_history()))
    assert clean == [], "clean now: delete from STILL_TO_CLEAN"


def test_the_phrases_match_what_they_are_for() -> None:
    for history in (
        "the field was added after issue 24",
        "for providers written before the capability flag",
        "see issue #37",
        "(issue 24, item 2)",
        "where the record used to read each row",
    ):
        assert HISTORY.search(history), history
    for present in ("a key no longer live", "issued.isdigit()", "old keys are used to open"):
        assert not HISTORY.search(present), present
