"""What keeps the hosted pages safe in a browser: headers, CSRF tokens, same-origin posts.

The pages are addressed by bearer secrets in their URLs (the lookup id, the PMTI form secret),
so they must not leak them (``Referrer-Policy: same-origin``, ``Cache-Control: no-store``) and
must only accept forms posted from themselves:

- every form carries a CSRF token: an HMAC over the page it was served for and when, checked on
  post (valid for :data:`CSRF_TOKEN_SECONDS`);
- a browser post must come from this origin: ``Origin`` (sent by browsers on every cross-origin
  POST) must name this host, and ``Sec-Fetch-Site``, when sent, must say ``same-origin``.

Cookies are not used: the forms work in a third-party iframe, where browsers drop them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import time
from urllib.parse import urlsplit

from aiohttp import web

from treasury_aiohttp.settings import app_settings
from treasury_core.config import TreasuryConfig
from treasury_core.errors import PermissionDenied, TreasuryError

logger = logging.getLogger("treasury.hosted")

#: How long a served form may be posted.
CSRF_TOKEN_SECONDS = 3600

FORM_REFUSED = "This form could not be accepted; reload the page and try again"
CROSS_SITE_REFUSED = "Cross-site submissions are not accepted"


#: The shortest form key accepted outside sandbox mode (an empty one would sign for anyone).
FORM_KEY_MIN_LENGTH = 16

MSG_FORM_KEY_MISSING = (
    "A form key is required outside sandbox mode: set TREASURY_FORM_KEY to the same random "
    f"value (at least {FORM_KEY_MIN_LENGTH} characters; `treasury vault-key` prints one) "
    "in every server process"
)
MSG_FORM_KEY_RANDOM = (
    "no form key configured (TREASURY_FORM_KEY): this process signs hosted forms with a "
    "random key, so another server process refuses them"
)


class FormKeyMissing(TreasuryError):
    """No usable form key outside sandbox mode: a deployment error, found at start."""

    default_code = "form_key_missing"


def require_form_key(config: TreasuryConfig) -> None:
    """Raise :class:`FormKeyMissing` outside sandbox mode unless a usable form key is set.

    Every process behind one address must sign forms alike, or a form served by one fails its
    CSRF check on another; a random key per process is only good enough for the sandbox.
    """
    missing = missing_form_key(config)
    if missing:
        raise FormKeyMissing(missing[0])


def missing_form_key(config: TreasuryConfig) -> list[str]:
    """``[MSG_FORM_KEY_MISSING]`` when :func:`require_form_key` would refuse ``config``, else
    ``[]`` (for ``treasury serve``, which names every missing setting at once)."""
    if config.sandbox:
        return []
    form_key = app_settings(config).form_key
    secret = form_key.get_secret_value() if form_key else ""
    return [MSG_FORM_KEY_MISSING] if len(secret.strip()) < FORM_KEY_MIN_LENGTH else []


class FormKey:
    """Signs and checks CSRF tokens (the ``form_key`` setting, or a random per-process key).

    Raises :class:`FormKeyMissing` outside sandbox mode without a form key; in sandbox mode a
    missing one is a warning and a random key.
    """

    def __init__(self, config: TreasuryConfig) -> None:
        require_form_key(config)
        form_key = app_settings(config).form_key
        secret = form_key.get_secret_value().encode() if form_key else None
        if secret is None:
            logger.warning(MSG_FORM_KEY_RANDOM)
        self._key = hashlib.sha256(b"treasury hosted forms\0" + (secret or secrets.token_bytes(32)))

    def token(self, scope: str, now: float | None = None) -> str:
        """A token for a form served for ``scope`` (the page's path)."""
        issued = str(int(time.time() if now is None else now))
        return f"{issued}.{self._mac(scope, issued)}"

    def check(self, scope: str, token: str | None, now: float | None = None) -> None:
        """Raise :class:`PermissionDenied` unless ``token`` was issued for ``scope`` lately."""
        issued, _, mac = (token or "").partition(".")
        current = time.time() if now is None else now
        well_formed = issued.isascii() and issued.isdigit() and len(issued) <= 12
        fresh = well_formed and 0 <= current - int(issued) <= CSRF_TOKEN_SECONDS
        if not (fresh and hmac.compare_digest(mac, self._mac(scope, issued))):
            raise PermissionDenied(FORM_REFUSED, code="csrf_token_invalid")

    def _mac(self, scope: str, issued: str) -> str:
        digest = hmac.new(self._key.digest(), f"{scope}\0{issued}".encode(), "sha256").digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def check_same_origin(request: web.Request) -> None:
    """Refuse a post a browser sent from another site (no-op for server-to-server calls,
    which send neither header).

    ``Sec-Fetch-Site`` decides when present (every current browser sends it); otherwise
    ``Origin`` must name this host. (``Origin`` alone is not enough: a page with a strict
    referrer policy posts ``Origin: null`` even to itself.)
    """
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None:
        if fetch_site not in ("same-origin", "none"):
            raise PermissionDenied(CROSS_SITE_REFUSED, code="cross_site_request")
        return
    origin = request.headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc != request.host:
        raise PermissionDenied(CROSS_SITE_REFUSED, code="cross_site_request")


def page_headers(config: TreasuryConfig) -> dict[str, str]:
    """Headers of every hosted page: a strict CSP, and nothing that leaks the URL's secret."""
    frame_ancestors = app_settings(config).frame_ancestors
    ancestors = " ".join(("'self'", *frame_ancestors))
    csp = (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        f"base-uri 'none'; frame-ancestors {ancestors}"
    )
    headers = {
        "Content-Security-Policy": csp,
        # Same-origin only: the URL's secret never goes to another site in a Referer.
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "Cross-Origin-Resource-Policy": "same-origin",
        "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
    }
    if not frame_ancestors:
        # Older browsers ignore frame-ancestors; with no embedding allowed, say it twice.
        headers["X-Frame-Options"] = "SAMEORIGIN"
    return headers
