"""The fields of an MT940 file, each with the file line it starts on.

A file is one or more SWIFT messages, each one statement: with or without the FIN envelope
(``{1:…}{2:…}{4:`` before the fields, ``-}`` after them), or in a bank's own wrapping (header
lines such as ``ABNANL2A`` / ``940`` before ``:20:``, a line ``-`` after the statement). Blocks
are cut here, and only here, because mt-940 reads a field's value but forgets where in the file
it was, and a refused line must name its line. A field starts with ``:TAG:`` at the start of a
line; the lines after it that are not a field, an envelope or a terminator continue it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: ``:20:``, ``:60F:``, ``:NS:``: two digits and an optional letter, or ``NS`` (mt-940's tags).
_FIELD = re.compile(r":(?P<tag>[0-9]{2}[A-Z]?|NS):(?P<value>.*)")
#: Transmission control characters some banks leave around a message (SOH, ETX).
_CONTROL = "\x01\x03"


@dataclass(frozen=True, slots=True)
class Field:
    """One field: its tag (``61``, ``60F``), the file line it starts on, its value lines."""

    tag: str
    line: int
    lines: tuple[str, ...]

    @property
    def value(self) -> str:
        """The value, its lines joined by ``\\n`` (how mt-940's patterns expect them)."""
        return "\n".join(self.lines)


@dataclass(frozen=True, slots=True)
class Block:
    """The fields of one statement, from its ``:20:`` on, and the statement's place (from 1)."""

    number: int
    fields: tuple[Field, ...]


def _is_terminator(line: str) -> bool:
    # "-" ends a SWIFT message body, "-}" the FIN envelope's text block; a line such as
    # "-info" is a detail that happens to start with a dash.
    return line == "-" or line.startswith("-}")


def fields_of(text: str) -> list[Field]:
    """Every field of ``text`` in file order; envelopes, headers and terminators dropped."""
    found: list[Field] = []
    tag: str | None = None
    start = 0
    lines: list[str] = []

    def close() -> None:
        nonlocal tag
        if tag is not None:
            while lines and not lines[-1].strip():
                lines.pop()
            found.append(Field(tag, start, tuple(lines)))
        tag = None

    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip(_CONTROL).rstrip()
        if line.startswith("{"):
            # An envelope header: "{1:…}{2:…}{4:" or "{5:…}"; a field may follow "{4:".
            close()
            _, opened, rest = line.partition("{4:")
            line = rest if opened else ""
            if not line:
                continue
        if _is_terminator(line):
            close()
            continue
        field = _FIELD.match(line)
        if field is not None:
            close()
            tag, start, lines = field["tag"], number, [field["value"]]
        elif tag is not None and line.strip():
            lines.append(line)
        # Anything else is a header line before a statement or between two: not a field.
    close()
    return found


def blocks_of(fields: list[Field]) -> tuple[list[Field], list[Block]]:
    """The statements of ``fields``: from each ``:20:`` to the next, in file order.

    Also the fields before the first ``:20:``, which belong to no statement.
    """
    before: list[Field] = []
    blocks: list[list[Field]] = []
    for field in fields:
        if field.tag == "20":
            blocks.append([])
        (blocks[-1] if blocks else before).append(field)
    return before, [Block(number, tuple(block)) for number, block in enumerate(blocks, 1)]
