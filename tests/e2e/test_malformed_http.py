"""Requests the HTTP parser refuses, sent byte by byte to ``treasury serve``: the JSON error
body, nothing of the request echoed, one WARNING line each and no traceback, no version banner."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from tests.e2e.test_cli import Server

MARKER = b"EchoMarker7f3a"
CLOSE = b"Connection: close\r\n\r\n"

MALFORMED = {
    "header over 8 KiB": (
        b"GET /api/v1/wallets HTTP/1.1\r\nHost: x\r\nX-Big: " + MARKER + b"a" * 9000 + b"\r\n\r\n"
    ),
    "NUL in a header": b"GET /api/v1/wallets HTTP/1.1\r\nHost: x\r\nX-Bad: a\x00"
    + MARKER
    + b"\r\n\r\n",
    "invalid method": b"G<" + MARKER + b"> /api/v1/wallets HTTP/1.1\r\nHost: x\r\n\r\n",
    "raw non-ASCII in the URL": b"GET /api/v1/\xff" + MARKER + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    "two Content-Lengths": b"POST /api/v1/wallet HTTP/1.1\r\nHost: x\r\nX-M: "
    + MARKER
    + b"\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
}


def exchange(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` on a new connection; the status, headers and body the server answered
    before it closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def test_malformed_requests_get_the_json_error_and_one_warning(tmp_path: Path) -> None:
    server = Server(tmp_path, "--database", str(tmp_path / "t.db"), "--log-format", "json")
    answers: dict[str, Any] = {}
    try:
        for name, request in MALFORMED.items():
            answers[name] = exchange(server.port, request)
        # A request that reaches the app: no version banner either.
        good = exchange(server.port, b"GET /api/v1/openapi.json HTTP/1.1\r\nHost: x\r\n" + CLOSE)
    finally:
        output = server.stop()
    for name, (status, headers, body) in answers.items():
        assert status == 400, name
        assert headers["content-type"] == "application/json; charset=utf-8", name
        assert json.loads(body) == {
            "error": {
                "type": "invalid_request_error",
                "code": "invalid_request",
                "message": "The request could not be understood",
            }
        }, name
        assert MARKER not in body, name
        assert headers["server"] == "treasury-core", name
    assert good[0] == 200
    assert good[1]["server"] == "treasury-core"

    entries = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    warnings = [e for e in entries if e["level"] == "WARNING" and e["logger"] == "treasury.http"]
    assert len(warnings) == len(MALFORMED), entries
    assert all("exception" not in e for e in warnings), warnings
    assert not [e for e in entries if e["level"] in ("ERROR", "CRITICAL")], entries
    assert "Traceback" not in output
    assert MARKER.decode() not in output
