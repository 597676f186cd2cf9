"""Requests no well-behaved client sends, written byte by byte to a real socket."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from treasury_core import Treasury

Client = TestClient[Any, Any]


async def raw_request(client: Client, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(head + b"\r\n" + body)
    await writer.drain()
    response = await reader.read()
    writer.close()
    status_line, _, rest = response.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


async def test_authorization_with_invalid_utf8_is_401(client: Client) -> None:
    head = (
        b"GET /api/v1/wallets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Authorization: Bearer sk_\xff\xfe\xfdaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"
    )
    status, body = await raw_request(client, head)
    assert status == 401
    assert json.loads(body)["error"]["type"] == "authentication_error"


@pytest.mark.parametrize("encoding", [b"gzip", b"deflate"])
async def test_body_that_is_not_what_its_encoding_says_is_400(
    client: Client, tenant: Tenant, treasury: Treasury, encoding: bytes
) -> None:
    body = b'{"name": "a", "currency_id": "USD"}'
    head = (
        b"POST /api/v1/wallet HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Authorization: Bearer " + tenant.secret_key.encode() + b"\r\n"
        b"Content-Type: application/json\r\nContent-Encoding: " + encoding + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n"
    )
    status, response = await raw_request(client, head, body)
    assert status == 400
    assert json.loads(response)["error"]["code"] == "body_invalid"
    assert (await treasury.wallets.list(tenant.company_id)).items == []


async def test_a_body_that_never_arrives_is_408(tmp_path: Any, clock: Any) -> None:
    from aiohttp.test_utils import TestServer

    from treasury_aiohttp import create_app
    from treasury_core import TreasuryConfig, bootstrap

    treasury = bootstrap(
        TreasuryConfig(database_url=f"sqlite:///{tmp_path / 'slow.db'}", body_timeout_seconds=0.5),
        clock=clock,
        wall_clock=clock,
    )
    created = await treasury.companies.create_company("Acme")
    server = TestServer(create_app(treasury, close_treasury=True), host="127.0.0.1")
    await server.start_server()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(
            b"POST /api/v1/wallet HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Bearer {created.secret_key}\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            + b'{"name": "slow'  # and then nothing more
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 408")
        writer.close()
        page = await treasury.wallets.list(created.company.id)
        assert page.items == []  # nothing was created
    finally:
        await server.close()
