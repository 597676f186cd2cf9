"""Logging for ``treasury serve`` and ``treasury worker``: one line per record, as text or JSON,
with secrets scrubbed from every message before it is written.

The code never logs card data or keys on purpose (tests search the logs for them); this is the
second line: whatever a library or a future change lets slip into a message, an exception or a
URL, a filter on the handler replaces before it reaches a file.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any, Final

from treasury_aiohttp.access_log import redact
from treasury_core.cards.numbers import luhn_valid

#: API keys, webhook secrets and payment-intent lookup ids (bearer secrets, all of them).
_TOKENS: Final = re.compile(r"\b(sk|pk|whsec|pil)_[A-Za-z0-9_+/=-]{8,}")
#: 13–19 digits, possibly grouped by spaces or dashes, as card numbers are written.
_DIGIT_RUNS: Final = re.compile(r"(?<![0-9])(?:[0-9][ -]?){12,18}[0-9](?![0-9])")


def _mask_card(match: re.Match[str]) -> str:
    digits = re.sub(r"[ -]", "", match.group(0))
    # Luhn-valid runs only: ids, amounts and timestamps are long digit runs too.
    return "[card number]" if luhn_valid(digits) else match.group(0)


def scrub(text: str) -> str:
    """``text`` with card numbers, keys, webhook secrets and URL secrets replaced."""
    text = _TOKENS.sub(lambda m: f"{m.group(1)}_[redacted]", text)
    text = _DIGIT_RUNS.sub(_mask_card, text)
    return redact(text)


class RedactingFilter(logging.Filter):
    """Renders each record's message (and exception) once, scrubbed."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Replace the record's message with its scrubbed rendering; never drops a record."""
        record.msg = scrub(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        record.exc_info = None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``message`` (+ ``exception``)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


def configure(*, json_lines: bool = False, level: int = logging.INFO) -> None:
    """Log to stderr through the redacting filter, as text or JSON lines."""
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter())
    handler.setFormatter(
        JsonFormatter()
        if json_lines
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("alembic").setLevel(logging.WARNING)
