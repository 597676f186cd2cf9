"""A synchronous web backend (plain WSGI, as Django or Flask would be) calling treasury-core.

The services are async; :class:`treasury_core.BlockingTreasury` runs them on one event loop in
a background thread and lets any thread call them and wait. Here a threaded ``wsgiref`` server
(one thread per request, like a sync worker pool) exposes two routes over one wallet:

- ``POST /deposits?amount=N``: deposit N minor units and settle it (sandbox),
- ``GET /wallets/<wallet_id>/balance``: the wallet's balance record,

and the library's typed errors become JSON error bodies with their HTTP status.

``python examples/sync_backend.py`` starts it on a free loopback port, sends eight deposits at
once plus one bad request from client threads, prints what came back, and exits. With
``--serve`` it keeps serving on http://127.0.0.1:8000 until interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from treasury_core import (
    BlockingTreasury,
    CreateDepositRequest,
    CreateWalletRequest,
    TreasuryConfig,
    TreasuryError,
    bootstrap,
)
from treasury_core.interface.errors import error_body, http_status
from treasury_core.interface.projections import record_dict

_BALANCE = re.compile(r"^/wallets/(?P<wallet_id>[^/]+)/balance$")


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """One thread per request, so requests really call the treasury concurrently."""

    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    """No access log on stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        """Drop the line."""


def make_app(treasury: BlockingTreasury, company_id: int, wallet_id: str) -> WSGIApplication:
    """A WSGI application over ``treasury``: plain blocking code, as in any sync framework."""

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"]
        try:
            if method == "POST" and path == "/deposits":
                amount = int(parse_qs(environ["QUERY_STRING"])["amount"][0])
                # Each line blocks this request's thread while the call runs on the treasury's
                # loop; other request threads are served meanwhile.
                deposit = treasury.deposits.create(
                    company_id,
                    CreateDepositRequest(
                        wallet_id=wallet_id, from_amount=amount, from_currency_id="USD"
                    ),
                )
                deposit = treasury.deposits.complete(company_id, deposit.id)
                return _json(start_response, 201, record_dict(deposit))
            found = _BALANCE.match(path)
            if method == "GET" and found:
                balance = treasury.wallets.balance(company_id, found["wallet_id"])
                return _json(start_response, 200, balance.model_dump(mode="json"))
            return _json(start_response, 404, {"error": {"message": "no such route"}})
        except TreasuryError as exc:
            # The library's errors carry the interface's body, and the core knows its status.
            return _json(start_response, http_status(exc), error_body(exc))

    return app


def _json(start_response: StartResponse, status: int, body: object) -> list[bytes]:
    data = json.dumps(body).encode()
    reason = {200: "OK", 201: "Created"}.get(status, "Error")
    start_response(f"{status} {reason}", [("Content-Type", "application/json")])
    return [data]


def _request(method: str, url: str) -> tuple[int, Any]:
    """A blocking HTTP call; the status and decoded JSON body, errors included."""
    # S310: the URL is always our own http://127.0.0.1 server, never user input.
    data = b"" if method == "POST" else None
    request = urllib.request.Request(url, method=method, data=data)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def main(argv: list[str]) -> None:
    """Start the treasury and the WSGI server; exercise it, or serve with ``--serve``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help="keep serving on port 8000")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        config = TreasuryConfig(database_url=f"sqlite:///{Path(tmp) / 'treasury.db'}")
        # bootstrap runs on the treasury's own loop thread, so all it builds belongs there.
        with BlockingTreasury(partial(bootstrap, config)) as treasury:
            company = treasury.companies.create_company("Acme Ltd").company
            wallet = treasury.wallets.create(
                company.id, CreateWalletRequest(name="Operating", currency_id="USD")
            )
            app = make_app(treasury, company.id, wallet.id)
            port = 8000 if args.serve else 0  # 0: any free port
            with make_server(
                "127.0.0.1", port, app, server_class=ThreadingWSGIServer, handler_class=QuietHandler
            ) as server:
                base = f"http://127.0.0.1:{server.server_port}"
                if args.serve:
                    print(f"serving on {base} (wallet {wallet.id}); Ctrl-C stops")
                    with contextlib.suppress(KeyboardInterrupt):
                        server.serve_forever()
                    return
                serving = threading.Thread(target=server.serve_forever, daemon=True)
                serving.start()
                try:
                    exercise(base, wallet.id)
                finally:
                    server.shutdown()
                    serving.join()


def exercise(base: str, wallet_id: str) -> None:
    """Eight deposits from eight client threads at once, one bad request, the final balance."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(
            pool.map(
                lambda amount: _request("POST", f"{base}/deposits?amount={amount}")[0],
                range(1_000, 9_000, 1_000),
            )
        )
    print(f"deposits: {len(statuses)} answered, statuses {sorted(set(statuses))}")
    status, body = _request("GET", f"{base}/wallets/wal_doesnotexist/balance")
    print(f"unknown wallet: {status} {body['error']['type']}")
    status, body = _request("GET", f"{base}/wallets/{wallet_id}/balance")
    print(f"balance: {status} {body['currency_code']} {body['balance']}")


if __name__ == "__main__":
    main(sys.argv[1:])
