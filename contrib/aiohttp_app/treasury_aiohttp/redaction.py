"""What must never reach a log line: bearer secrets in URLs, API and operator keys, webhook
secrets and card numbers, and the two functions that blank them.

Several URLs are credentials: a payment intent's lookup id (``/pay/pil_…`` and the polling
query), the hosted tokenization form (``/tokenize/{pmti_id}/{secret}``) and the confirm
endpoint (``…/confirm/{secret}``), and the client secret Stripe appends to the 3-D Secure return
URL (``payment_intent_client_secret=…``). Logs are read by more people than the API keys are.
"""

from __future__ import annotations

import re
from typing import Final

from treasury_core.cards.numbers import luhn_valid

#: Each URL secret, in one pattern: the group names what precedes the secret and stays.
_URL_SECRETS: Final = re.compile(
    r"(?P<pay>/pay/)pil_[^/?#]*"
    r"|(?P<tokenize>/tokenize/[^/?#]+/)[^/?#]*"
    r"|(?P<confirm>/confirm/)[^/?#]*"
    r"|(?P<lookup>payment_intent_lookup_id=|payment_intent_client_secret=)[^&#]*"
)
#: API keys, operator keys, webhook secrets and payment-intent lookup ids (bearer secrets, all
#: of them).
_TOKENS: Final = re.compile(r"\b(sk|pk|ok|whsec|pil)_[A-Za-z0-9_+/=-]{8,}")
#: 13–19 digits, possibly grouped by spaces or dashes, as card numbers are written (a space
#: also as a URL writes it: ``+`` or ``%20``).
_DIGIT_RUNS: Final = re.compile(r"(?<![0-9])(?:[0-9](?:[ +-]|%20)?){12,18}[0-9](?![0-9])")
_SEPARATORS: Final = re.compile(r"[ +-]|%20")


def _blank_url_secret(match: re.Match[str]) -> str:
    if match.group("pay") is not None:
        return match.group("pay") + "pil_…"
    kept = match.group("tokenize") or match.group("confirm") or match.group("lookup")
    return f"{kept}…"


def redact(path_qs: str) -> str:
    """``path_qs`` with every bearer secret replaced by ``…`` (one scan of the string)."""
    return _URL_SECRETS.sub(_blank_url_secret, path_qs)


def _mask_card(match: re.Match[str]) -> str:
    digits = _SEPARATORS.sub("", match.group(0))
    # Luhn-valid runs only: ids, amounts and timestamps are long digit runs too.
    return "[card number]" if luhn_valid(digits) else match.group(0)


def scrub(text: str) -> str:
    """``text`` with card numbers, keys, webhook secrets and URL secrets replaced."""
    text = _TOKENS.sub(lambda m: f"{m.group(1)}_[redacted]", text)
    text = _DIGIT_RUNS.sub(_mask_card, text)
    return redact(text)
