"""The shell commands the README and the docs pages show, read out of their Markdown.

A page's ``sh``, ``bash``, ``shell`` and ``console`` fences are its commands. In ``sh``/``bash``
/``shell`` blocks a command is a line and the lines its trailing backslashes join to it; a
comment directly after a command whose text starts with ``{`` or ``[`` is the command's sample
output (JSON), every other comment is prose. In ``console`` blocks a command is a line after
``$ `` (plus its continuations) and the lines up to the next ``$ `` are its sample output.

A block that cannot run in a test says so right before it, in a comment invisible on the site
and on GitHub: ``<!-- not-run: the reason -->``. Nothing else is ever left out.

A sample is compared with the real output by shape: the same keys in every object, recursively;
values (ids, timestamps, amounts) may differ. A bare ``…`` in a sample, outside a string, says
that the sample leaves keys out: then its keys need only be among the real ones.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

SHELL = frozenset({"sh", "bash", "shell", "console"})
# The colon is optional here so that a marker without one is found, and refused for its
# missing reason, instead of being read as an ordinary comment.
NOT_RUN = re.compile(r"<!--\s*not-run\b:?(?P<reason>.*?)-->", re.DOTALL)
PROMPT = "$ "


@dataclass(frozen=True)
class Command:
    """One command as written, where it starts (1-based line of the page) and its sample."""

    text: str
    line: int
    sample: str | None = None


@dataclass(frozen=True)
class Block:
    """One shell fence of a page: its commands, or why it does not run."""

    page: Path
    line: int
    language: str
    commands: tuple[Command, ...]
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


@dataclass(frozen=True)
class Marker:
    """A ``not-run`` comment: where it is, its reason, and whether a shell block follows it."""

    line: int
    reason: str
    before_a_shell_block: bool


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark")


def read_page(page: Path) -> tuple[list[Block], list[Marker]]:
    """The page's shell blocks, in order, and its ``not-run`` markers."""
    tokens = _parser().parse(page.read_text(encoding="utf-8"))
    blocks: list[Block] = []
    markers: list[Marker] = []
    for index, token in enumerate(tokens):
        if token.type == "html_block":
            following = tokens[index + 1] if index + 1 < len(tokens) else None
            shell_next = following is not None and _is_shell(following.type, following.info)
            for found in NOT_RUN.finditer(token.content):
                line = _first_line(token.map) + token.content[: found.start()].count("\n")
                markers.append(Marker(line, found["reason"].strip(), shell_next))
        if not _is_shell(token.type, token.info):
            continue
        previous = tokens[index - 1] if index > 0 else None
        reason = None
        if previous is not None and previous.type == "html_block":
            found = NOT_RUN.search(previous.content)
            reason = found["reason"].strip() if found else None
        language = token.info.split()[0]
        # The fence's first content line is the line after the opening fence.
        start = _first_line(token.map) + 1
        split = _console if language == "console" else _script
        blocks.append(Block(page, start - 1, language, tuple(split(token.content, start)), reason))
    return blocks, markers


def _is_shell(kind: str, info: str) -> bool:
    return kind == "fence" and info.split()[:1] != [] and info.split()[0] in SHELL


def _first_line(lines: list[int] | None) -> int:
    assert lines is not None, "markdown-it gives every block token its lines"
    return lines[0] + 1


def _joined(lines: list[str], index: int) -> int:
    """The index after the last line that backslash continuations join to ``lines[index]``."""
    while lines[index].rstrip().endswith("\\") and index + 1 < len(lines):
        index += 1
    return index + 1


def _script(content: str, start: int) -> list[Command]:
    lines = content.splitlines()
    commands: list[Command] = []
    index = 0
    while index < len(lines):
        stripped = lines[index].strip()
        if not stripped:
            index += 1
        elif stripped.startswith("#"):
            end = index
            while end < len(lines) and lines[end].strip().startswith("#"):
                end += 1
            comment = "\n".join(line.strip()[1:].strip() for line in lines[index:end])
            follows = bool(commands) and _touching(commands[-1], start + index)
            if follows and commands[-1].sample is None and comment[:1] in "{[":
                last = commands.pop()
                commands.append(Command(last.text, last.line, comment))
            index = end
        else:
            end = _joined(lines, index)
            commands.append(Command("\n".join(lines[index:end]), start + index))
            index = end
    return commands


def _touching(command: Command, line: int) -> bool:
    """Whether ``line`` comes straight after ``command``'s last line (no blank line between)."""
    return command.line + command.text.count("\n") + 1 == line


def _console(content: str, start: int) -> list[Command]:
    lines = content.splitlines()
    commands: list[Command] = []
    index = 0
    while index < len(lines):
        if not lines[index].startswith(PROMPT):
            index += 1
            continue
        end = _joined(lines, index)
        text = "\n".join([lines[index][len(PROMPT) :], *lines[index + 1 : end]])
        output_end = end
        while output_end < len(lines) and not lines[output_end].startswith(PROMPT):
            output_end += 1
        output = "\n".join(lines[end:output_end]).strip()
        sample = output if output[:1] in ("{", "[") else None
        commands.append(Command(text, start + index, sample))
        index = output_end
    return commands


def parse_sample(sample: str) -> tuple[Any, bool]:
    """The sample as JSON, and whether a bare ``…`` says it leaves keys out."""
    kept: list[str] = []
    in_string = escaped = elided = drop_comma = False
    for char in sample:
        if in_string:
            kept.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == "…":
            elided = True
            # The comma that joined the elided keys to the shown ones goes with them.
            text = "".join(kept).rstrip()
            if text.endswith(","):
                kept = list(text[:-1])
            else:
                drop_comma = True
        elif drop_comma and char == ",":
            drop_comma = False
        else:
            if not char.isspace():
                drop_comma = False
            if char == '"':
                in_string = True
            kept.append(char)
    return json.loads("".join(kept)), elided


def shape_differences(sample: Any, real: Any, *, elided: bool, path: str = "$") -> list[str]:
    """Where ``real`` has another shape than ``sample``: missing or extra keys, other kinds."""
    if isinstance(sample, dict):
        if not isinstance(real, dict):
            return [f"{path}: the sample is an object, the output {type(real).__name__}"]
        differences = []
        missing = sorted(set(sample) - set(real))
        extra = sorted(set(real) - set(sample))
        if missing:
            differences.append(f"{path}: the output lacks {missing}")
        if extra and not elided:
            differences.append(f"{path}: the sample lacks {extra}")
        for key in sorted(set(sample) & set(real)):
            differences += shape_differences(
                sample[key], real[key], elided=elided, path=f"{path}.{key}"
            )
        return differences
    if isinstance(sample, list):
        if not isinstance(real, list):
            return [f"{path}: the sample is an array, the output {type(real).__name__}"]
        if sample and real:
            return shape_differences(sample[0], real[0], elided=elided, path=f"{path}[0]")
    return []
