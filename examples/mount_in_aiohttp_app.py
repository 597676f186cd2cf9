"""Mount treasury-core's HTTP interface inside an existing aiohttp application.

The "shop" below is an aiohttp app with routes of its own; the treasury's app is added as a
sub-application under ``/treasury`` (``parent.add_subapp``), so the interface's paths become
``/treasury/api/v1/...``, the hosted pages ``/treasury/pay/...``, and the OpenAPI document's
server URL says ``/treasury``. The shop's own handlers call the same treasury's services
directly, on the same event loop.

``python examples/mount_in_aiohttp_app.py`` starts on a free loopback port, calls a shop route
and a few treasury routes over HTTP, prints what came back and exits. With ``--serve`` it keeps
serving on http://127.0.0.1:8080 and prints a secret key to try with curl.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from pathlib import Path

import aiohttp
from aiohttp import web

from treasury_aiohttp import create_app
from treasury_core import Treasury, TreasuryConfig, bootstrap

TREASURY = web.AppKey("treasury", Treasury)
COMPANY_ID = web.AppKey("company_id", int)


async def shop_home(request: web.Request) -> web.Response:
    """The shop's own page, beside the mounted treasury."""
    return web.json_response({"shop": "open"})


async def shop_wallet_count(request: web.Request) -> web.Response:
    """A shop route that calls the treasury's services in-process (no HTTP hop)."""
    treasury = request.app[TREASURY]
    page = await treasury.wallets.list(request.app[COMPANY_ID])
    return web.json_response({"wallets": len(page.items)})


def make_shop(treasury: Treasury, company_id: int) -> web.Application:
    """The existing application, with the treasury mounted under ``/treasury``."""
    shop = web.Application()
    shop[TREASURY] = treasury
    shop[COMPANY_ID] = company_id
    shop.router.add_get("/", shop_home)
    shop.router.add_get("/wallet-count", shop_wallet_count)
    # run_jobs: the sub-app settles due movements in the background while the shop runs;
    # close_treasury: the treasury's storage closes when the shop shuts down.
    shop.add_subapp("/treasury", create_app(treasury, close_treasury=True, run_jobs=True))
    return shop


async def exercise(base: str, secret_key: str) -> None:
    """Call the shop and the mounted treasury over HTTP and print the answers."""
    auth = {"Authorization": f"Bearer {secret_key}"}
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/") as response:
            print(f"GET /: {response.status} {await response.json()}")
        wallet_body = {"name": "Operating", "currency_id": "EUR"}
        async with http.post(
            f"{base}/treasury/api/v1/wallet", json=wallet_body, headers=auth
        ) as response:
            wallet = await response.json()
            print(f"POST /treasury/api/v1/wallet: {response.status} {wallet['currency']['code']}")
        async with http.get(f"{base}/treasury/api/v1/wallet/{wallet['id']}/balance") as response:
            error = (await response.json())["error"]
            print(f"GET balance without a key: {response.status} {error['type']}")
        async with http.get(
            f"{base}/treasury/api/v1/wallet/{wallet['id']}/balance", headers=auth
        ) as response:
            balance = await response.json()
            print(f"GET balance: {response.status} {balance['balance']} {balance['currency_code']}")
        async with http.get(f"{base}/wallet-count") as response:
            print(f"GET /wallet-count: {response.status} {await response.json()}")
        async with http.get(f"{base}/treasury/api/v1/openapi.json") as response:
            document = await response.json()
            print(f"OpenAPI server URL: {document['servers'][0]['url']}")


async def main(argv: list[str]) -> None:
    """Bootstrap, mount, start on a loopback port; exercise it or serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help="keep serving on port 8080")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        treasury = bootstrap(TreasuryConfig(database_url=f"sqlite:///{Path(tmp) / 'shop.db'}"))
        created = await treasury.companies.create_company("Acme Ltd")
        runner = web.AppRunner(make_shop(treasury, created.company.id))
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 8080 if args.serve else 0)
            await site.start()
            host, port = runner.addresses[0][:2]
            base = f"http://{host}:{port}"
            if args.serve:
                print(f"serving on {base}; try:")
                print(f"  KEY={created.secret_key}")
                print(f'  curl -H "Authorization: Bearer $KEY" {base}/treasury/api/v1/wallets')
                await asyncio.Event().wait()  # until Ctrl-C
            await exercise(base, created.secret_key)
        finally:
            await runner.cleanup()  # closes the treasury too (close_treasury=True)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends --serve
        asyncio.run(main(sys.argv[1:]))
