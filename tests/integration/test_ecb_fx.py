"""The ECB adapter inside a treasury: chosen by name, refreshed over real HTTP on loopback.

The refresh URL points at a standard-library HTTP server on 127.0.0.1 serving the shipped
sample of the ECB's XML; nothing between the adapter and that server is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import socket
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

import treasury_ecb.fx
from treasury_aiohttp import create_app
from treasury_core import KeyKind, Treasury, TreasuryConfig, bootstrap
from treasury_core.errors import ValidationFailed
from treasury_core.interface.projections import record_dict
from treasury_core.movements.requests import CreateDepositRequest, CreateTransferRequest
from treasury_core.ports import FxQuote
from treasury_core.testing import check_invariants
from treasury_core.testing.fakes.clock import FakeClock
from treasury_core.wallets import CreateWalletRequest
from treasury_ecb import EcbFxRates, RateTable, parse_rates
from treasury_ecb.names import SETTINGS
from treasury_ecb.rates import MAX_UNZIPPED_BYTES
from treasury_ecb.source import RatesSourceError, download, packaged_history

SAMPLES = Path(__file__).parent.parent / "data" / "ecb"
XML = (SAMPLES / "eurofxref-hist-easter-2025.xml").read_bytes()


class RatesServer:
    """Serves ``files`` (or ``raw`` responses) by path on loopback and counts the requests."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        #: Whole responses written as they are, status line and headers included.
        self.raw: dict[str, bytes] = {}
        self.hits: list[str] = []
        #: While set and not yet released, each request is held before it is answered.
        self.hold: threading.Event | None = None
        self.held: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits.append(self.path)
                if outer.hold is not None:
                    outer.held.append(self.path)
                    outer.hold.wait(10)
                if self.path in outer.raw:
                    self.wfile.write(outer.raw[self.path])
                    self.close_connection = True
                    return
                body = outer.files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{path}"

    def __enter__(self) -> RatesServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def server() -> Iterator[RatesServer]:
    with RatesServer() as running:
        running.files["/eurofxref-hist-90d.xml"] = XML
        yield running


def snapshot_until(tmp_path: Path, last: date) -> Path:
    """A snapshot file of the sample's days up to ``last``, as the ECB's CSV."""
    table = parse_rates(XML)
    days = sorted(d for d in table.days if d <= last)
    codes = sorted({c for d in days for c in table.days[d]})
    lines = ["Date," + ",".join(codes) + ","]
    for d in reversed(days):
        lines.append(
            d.isoformat() + "," + ",".join(str(table.days[d].get(c, "N/A")) for c in codes) + ","
        )
    path = tmp_path / "snapshot.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


async def funded(treasury: Treasury) -> tuple[int, str, str, str]:
    company = (await treasury.companies.create_company("Acme")).company.id
    usd = await treasury.wallets.create(company, CreateWalletRequest(name="U", currency_id="USD"))
    gbp = await treasury.wallets.create(company, CreateWalletRequest(name="G", currency_id="GBP"))
    kwd = await treasury.wallets.create(company, CreateWalletRequest(name="K", currency_id="KWD"))
    deposit = await treasury.deposits.create(
        company,
        CreateDepositRequest(wallet_id=usd.id, from_amount=100_000, from_currency_id="USD"),
    )
    await treasury.deposits.complete(None, deposit.id)
    return company, usd.id, gbp.id, kwd.id


@pytest.mark.parametrize("storage", ["memory", "sqlite"])
def test_selected_by_name_refreshed_from_the_url(
    server: RatesServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage: str
) -> None:
    # Offline the treasury knows Thursday 17 April; on Easter Tuesday evening the URL has more.
    monkeypatch.setenv("TREASURY_ECB_FILE", str(snapshot_until(tmp_path, date(2025, 4, 17))))
    monkeypatch.setenv("TREASURY_ECB_URL", server.url("/eurofxref-hist-90d.xml"))
    monkeypatch.setenv("TREASURY_ECB_MARKUP_BPS", "0")
    clock = FakeClock(datetime(2025, 4, 22, 17, tzinfo=UTC))
    # SQLite stores the record as JSON: the date must come back from it as it went in.
    url = "memory://" if storage == "memory" else f"sqlite:///{tmp_path / 'treasury.db'}"
    treasury = bootstrap(
        TreasuryConfig(database_url=url, fx_rates="ecb"), clock=clock, wall_clock=clock
    )
    assert server.hits == []  # building the treasury fetched nothing

    async def scenario() -> None:
        company, usd, gbp, kwd = await funded(treasury)
        transfer = await treasury.transfers.create(
            company, CreateTransferRequest(from_wallet_id=usd, to_wallet_id=gbp, from_amount=1_000)
        )
        assert server.hits == ["/eurofxref-hist-90d.xml"]
        assert transfer.exchange_rate_date == date(2025, 4, 22)
        # 0.85858 / 1.1476 → 0.7481526664; 1,000 cents → 748.15… pence, rounded once.
        assert str(transfer.exchange_rate_from_to) == "0.7481526664"
        assert transfer.to_amount == 748
        assert record_dict(transfer)["exchange_rate_date"] == "2025-04-22"

        # A same-currency transfer has no rate date.
        usd2 = await treasury.wallets.create(
            company, CreateWalletRequest(name="U2", currency_id="USD")
        )
        same = await treasury.transfers.create(
            company, CreateTransferRequest(from_wallet_id=usd, to_wallet_id=usd2.id, from_amount=5)
        )
        assert same.exchange_rate_date is None

        # Today's rate is loaded: no more fetches.
        await treasury.transfers.create(
            company, CreateTransferRequest(from_wallet_id=usd, to_wallet_id=gbp, from_amount=1_000)
        )
        assert len(server.hits) == 1

        # Over HTTP: the date on the record, and KWD (not published by the ECB) a clear 400.
        before = await treasury.wallets.balances(company)
        transfers = len((await treasury.transfers.list(company)).items)
        key = (await treasury.companies.create_api_key(company, KeyKind.SECRET))[1]
        client = TestClient(TestServer(create_app(treasury)))
        await client.start_server()
        try:
            auth = {"Authorization": f"Bearer {key}"}
            got = await client.get(f"/api/v1/transfer/{transfer.id}", headers=auth)
            assert got.status == 200
            assert (await got.json())["exchange_rate_date"] == "2025-04-22"
            refused = await client.post(
                "/api/v1/transfer",
                json={"from_wallet_id": usd, "to_wallet_id": kwd, "from_amount": 100},
                headers=auth,
            )
            assert refused.status == 400
            error = (await refused.json())["error"]
            assert error["code"] == "currency_not_quoted"
            assert "KWD" in error["message"]
        finally:
            await client.close()
        assert await treasury.wallets.balances(company) == before
        assert len((await treasury.transfers.list(company)).items) == transfers

    asyncio.run(scenario())
    check_invariants(treasury.storage)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Return once ``condition()`` holds (the fetching thread runs on its own); fail after 10 s."""
    deadline = time.monotonic() + 10
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not {what} after 10 s")
        time.sleep(0.01)


def test_a_failed_fetch_keeps_the_loaded_rates_and_the_thread_retries(
    server: RatesServer, tmp_path: Path
) -> None:
    clock = FakeClock(datetime(2025, 4, 22, 9, tzinfo=UTC))
    thursday = parse_rates(snapshot_until(tmp_path, date(2025, 4, 17)).read_bytes())
    fx = EcbFxRates(clock, table=thursday, url=server.url("/not-yet.xml"), refresh_seconds=0.02)
    try:
        # Tuesday morning, before the day's file: the first fetch finds nothing, Thursday's
        # rate (five days old, within the default guard) is used.
        first = asyncio.run(fx.rate("USD", "GBP"))
        assert first.rate_date == date(2025, 4, 17)
        assert server.hits[0] == "/not-yet.xml"
        assert fx.last_failure is not None and "404" in fx.last_failure
        # The thread tries again on its own; a page that is not the ECB's is refused too.
        server.files["/not-yet.xml"] = b"<html>maintenance</html>"
        wait_for(lambda: "no reference rate" in (fx.last_failure or ""), "refused the page")
        assert asyncio.run(fx.rate("USD", "GBP")).rate_date == date(2025, 4, 17)
        # Once the file is there, the thread merges it without a quote asking.
        server.files["/not-yet.xml"] = XML
        wait_for(lambda: fx.fetched_latest == date(2025, 4, 25), "fetched the file")
        assert fx.last_failure is None
        assert asyncio.run(fx.rate("USD", "GBP")).rate_date == date(2025, 4, 22)
    finally:
        fx.close()


SHIPPED = parse_rates(packaged_history())
assert SHIPPED.latest is not None
# The ECB's daily file of Friday 8 July 2022 (tests/data/ecb/SOURCES.md).
DAILY = (SAMPLES / "eurofxref-daily-2022-07-08.xml").read_bytes()


def daily_of(day: date) -> bytes:
    """The genuine daily file with only its date changed: the ECB's file of ``day``, as served."""
    dated = DAILY.replace(b"time='2022-07-08'", f"time='{day.isoformat()}'".encode())
    assert dated != DAILY
    return dated


def ecb_on(
    monkeypatch: pytest.MonkeyPatch, day: date, url: str | None = None
) -> tuple[Treasury, FakeClock]:
    """A treasury with ``TREASURY_FX_RATES=ecb`` and no ``TREASURY_ECB_*`` variable but
    ``TREASURY_ECB_URL=url`` if given, at 17:00 UTC on ``day``."""
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    if url is not None:
        monkeypatch.setenv("TREASURY_ECB_URL", url)
    clock = FakeClock(datetime.combine(day, datetime.min.time(), UTC).replace(hour=17))
    treasury = bootstrap(
        TreasuryConfig(database_url="memory://", fx_rates="ecb"), clock=clock, wall_clock=clock
    )
    return treasury, clock


def test_ecb_on_with_the_ecbs_daily_file_current_fx_transfers_move(
    server: RatesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Weeks after the shipped history ends, with nothing set but TREASURY_FX_RATES=ecb: the
    # default address is fetched. Tests do not reach the internet, so that default is the
    # loopback server's; every TREASURY_ECB_* variable is unset.
    today = SHIPPED.latest + timedelta(days=33)
    server.files["/eurofxref-daily.xml"] = daily_of(today)
    monkeypatch.setattr(treasury_ecb.fx, "DAILY_URL", server.url("/eurofxref-daily.xml"))
    treasury, _ = ecb_on(monkeypatch, today)

    async def scenario() -> None:
        company, usd, gbp, _ = await funded(treasury)
        transfer = await treasury.transfers.create(
            company, CreateTransferRequest(from_wallet_id=usd, to_wallet_id=gbp, from_amount=1_000)
        )
        assert transfer.exchange_rate_date == today
        # 0.84585 / 1.0163, the file's own figures; 1,000 cents → 832.28… pence.
        assert str(transfer.exchange_rate_from_to) == "0.8322837745"
        assert transfer.to_amount == 832

    try:
        asyncio.run(scenario())
    finally:
        treasury.close()
    assert server.hits == ["/eurofxref-daily.xml"]
    # Merged over the shipped history, not instead of it.
    table = asyncio.run(treasury.adapters.fx.table())  # type: ignore[attr-defined]
    assert table.days[SHIPPED.latest] == SHIPPED.days[SHIPPED.latest]
    check_invariants(treasury.storage)


def test_a_quote_does_not_wait_for_a_fetch_under_way(server: RatesServer, tmp_path: Path) -> None:
    clock = FakeClock(datetime(2025, 4, 22, 9, tzinfo=UTC))
    thursday = parse_rates(snapshot_until(tmp_path, date(2025, 4, 17)).read_bytes())
    fx = EcbFxRates(clock, table=thursday, url=server.url("/slow.xml"), refresh_seconds=0.02)
    hold = threading.Event()
    try:
        # The first fetch (a 404) is over before the first quote answers.
        assert asyncio.run(fx.rate("USD", "GBP")).rate_date == date(2025, 4, 17)
        server.hold = hold
        wait_for(lambda: bool(server.held), "fetching again")
        # The thread waits on that held fetch, which will answer the file once released.
        server.files["/slow.xml"] = XML
        # Meanwhile a quote answers from the loaded rates, without waiting for the fetch.
        assert asyncio.run(fx.rate("USD", "GBP")).rate_date == date(2025, 4, 17)
        assert fx.fetched_latest is None
        hold.set()
        wait_for(lambda: fx.fetched_latest == date(2025, 4, 25), "fetched the file")
        assert asyncio.run(fx.rate("USD", "GBP")).rate_date == date(2025, 4, 22)
    finally:
        hold.set()
        fx.close()


def test_with_the_ecb_unreachable_the_shipped_rates_answer_then_the_503_says_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A port nothing listens on: the fetch is refused at once, as when the network is down.
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    shipped = SHIPPED.latest
    url = f"http://127.0.0.1:{port}/eurofxref-daily.xml"
    treasury, clock = ecb_on(monkeypatch, shipped + timedelta(days=3), url)

    async def scenario() -> None:
        company, usd, gbp, _ = await funded(treasury)
        # Three days on, the shipped file's last rate is within the guard: it answers.
        transfer = await treasury.transfers.create(
            company, CreateTransferRequest(from_wallet_id=usd, to_wallet_id=gbp, from_amount=100)
        )
        assert transfer.exchange_rate_date == shipped
        clock.advance(30 * 86_400)
        before = await treasury.wallets.balances(company)
        key = (await treasury.companies.create_api_key(company, KeyKind.SECRET))[1]
        client = TestClient(TestServer(create_app(treasury)))
        await client.start_server()
        try:
            refused = await client.post(
                "/api/v1/transfer",
                json={"from_wallet_id": usd, "to_wallet_id": gbp, "from_amount": 100},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert refused.status == 503
            assert refused.headers["Retry-After"] == "5"
            error = (await refused.json())["error"]
        finally:
            await client.close()
        assert (error["type"], error["code"]) == ("api_error", "fx_rate_unavailable")
        assert error["message"] == (
            f"The newest ECB reference rate is of {shipped}, 33 days old, more than the 5 days "
            "TREASURY_ECB_MAX_AGE_DAYS allows; nothing moved. Fetching the ECB's rates failed: "
            "check the network and TREASURY_ECB_URL, or set TREASURY_ECB_FILE to a newer file."
        )
        assert await treasury.wallets.balances(company) == before

    with caplog.at_level(logging.WARNING, logger="treasury_ecb"):
        try:
            asyncio.run(scenario())
        finally:
            treasury.close()
    # The failure is logged once, as one line naming the URL.
    (line,) = [r for r in caplog.records if r.name == "treasury_ecb.fx"]
    assert f"127.0.0.1:{port}" in line.getMessage()
    assert line.exc_info is None and "\n" not in line.getMessage()
    check_invariants(treasury.storage)


def test_the_refreshed_day_merges_into_the_history(server: RatesServer) -> None:
    table = parse_rates(XML)
    early = RateTable({d: r for d, r in table.days.items() if d < date(2025, 4, 14)})
    clock = FakeClock(datetime(2025, 4, 25, 18, tzinfo=UTC))
    fx = EcbFxRates(clock, table=early, url=server.url("/eurofxref-hist-90d.xml"))
    assert asyncio.run(fx.refresh()) is True
    merged = asyncio.run(fx.table())
    assert merged.days == table.days
    assert merged.day_on_or_before(date(2025, 4, 20)) == date(2025, 4, 17)


def test_an_unquoted_currency_refuses_before_anything_moves() -> None:
    clock = FakeClock(datetime(2025, 4, 17, 18, tzinfo=UTC))
    fx = EcbFxRates(clock, table=parse_rates(XML))
    treasury = bootstrap(
        TreasuryConfig(database_url="memory://"), clock=clock, wall_clock=clock, fx=fx
    )

    async def scenario() -> None:
        company, usd, _, kwd = await funded(treasury)
        before = await treasury.wallets.balances(company)
        with pytest.raises(ValidationFailed) as caught:
            await treasury.transfers.create(
                company, CreateTransferRequest(from_wallet_id=usd, to_wallet_id=kwd, from_amount=1)
            )
        assert caught.value.code == "currency_not_quoted"
        assert await treasury.wallets.balances(company) == before

    asyncio.run(scenario())


def test_amounts_are_rounded_once_half_to_even() -> None:
    # A table made so USD→JPY is exactly 2.5: one cent buys 0.025 yen, and halves show the rule.
    clock = FakeClock(datetime(2025, 4, 17, 18, tzinfo=UTC))
    table = RateTable({date(2025, 4, 17): {"USD": Decimal(2), "JPY": Decimal(5)}})
    fx = EcbFxRates(clock, table=table)
    treasury = bootstrap(
        TreasuryConfig(database_url="memory://"), clock=clock, wall_clock=clock, fx=fx
    )

    async def scenario() -> list[int]:
        company, usd, _, _ = await funded(treasury)
        jpy = await treasury.wallets.create(
            company, CreateWalletRequest(name="J", currency_id="JPY")
        )
        amounts = []
        for cents in (100, 300, 140, 160):
            transfer = await treasury.transfers.create(
                company,
                CreateTransferRequest(from_wallet_id=usd, to_wallet_id=jpy.id, from_amount=cents),
            )
            assert str(transfer.exchange_rate_from_to) == "2.5"
            amounts.append(transfer.to_amount)
        return amounts

    # 2.5 → 2 and 7.5 → 8 (half to even); 3.5 → 4, 4.0 → 4.
    assert asyncio.run(scenario()) == [2, 8, 4, 4]
    check_invariants(treasury.storage)


def _zipped(body: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("eurofxref-hist.csv", body)
    return buffer.getvalue()


def test_whatever_a_refresh_gets_the_loaded_rates_still_answer(
    server: RatesServer, tmp_path: Path
) -> None:
    # Tuesday evening with Thursday's rates loaded: each fetch meets another failure, and the
    # quote is still answered, from Thursday, within the five-day guard.
    clock = FakeClock(datetime(2025, 4, 22, 9, tzinfo=UTC))
    thursday = parse_rates(snapshot_until(tmp_path, date(2025, 4, 17)).read_bytes())
    fx = EcbFxRates(clock, table=thursday, url=server.url("/rates"), refresh_seconds=3600)
    csv = b"Date,USD,GBP,\n2025-04-22,1.1476,0.85858,\n"
    failures = {
        # A status line http.client cannot read (BadStatusLine, not an OSError).
        "garbled status": (True, b"ECB 200 OK\r\n\r\n"),
        # Fewer bytes than the Content-Length says: a truncated file must not be half-read.
        "short body": (
            True,
            b"HTTP/1.0 200 OK\r\nContent-Length: 1000\r\n\r\n" + csv,
        ),
        # A chunked body cut off mid-chunk (IncompleteRead, not an OSError).
        "broken chunk": (
            True,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n400\r\nDate,USD",
        ),
        # A rate that would overflow the cross-rate arithmetic.
        "absurd rate": (False, b"Date,USD,GBP,\n2025-04-22,1E+999999,0.85858,\n"),
        # A zip unpacking past the limit.
        "zip bomb": (False, _zipped(csv + b" " * MAX_UNZIPPED_BYTES)),
    }

    async def scenario() -> None:
        for name, (raw, response) in failures.items():
            server.files.pop("/rates", None)
            server.raw.pop("/rates", None)
            (server.raw if raw else server.files)["/rates"] = response
            hits = len(server.hits)
            assert await fx.refresh() is False, name
            assert len(server.hits) == hits + 1, name
            assert (await fx.table()).days == thursday.days, name
        # The thread's first fetch fails the same way; the quote waits for it, then answers.
        assert (await fx.rate("USD", "GBP")).rate_date == date(2025, 4, 17)
        assert server.hits[-1] == "/rates"

    try:
        asyncio.run(scenario())
    finally:
        fx.close()


def test_a_corrupt_offline_zip_is_a_503_over_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = bytearray(_zipped(snapshot_until(tmp_path, date(2025, 4, 17)).read_bytes()))
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        (info,) = archive.infolist()
    start = data.index(info.filename.encode()) + len(info.filename)
    # 0xFF opens a deflate block of the reserved type: zlib refuses the stream.
    data[start : start + info.compress_size] = b"\xff" * info.compress_size
    path = tmp_path / "eurofxref-hist.zip"
    path.write_bytes(bytes(data))
    monkeypatch.setenv("TREASURY_ECB_FILE", str(path))
    monkeypatch.delenv("TREASURY_ECB_URL", raising=False)
    monkeypatch.setenv("TREASURY_ECB_FETCH", "false")
    clock = FakeClock(datetime(2025, 4, 17, 17, tzinfo=UTC))
    treasury = bootstrap(
        TreasuryConfig(database_url="memory://", fx_rates="ecb"), clock=clock, wall_clock=clock
    )

    async def scenario() -> None:
        company, usd, gbp, _ = await funded(treasury)
        before = await treasury.wallets.balances(company)
        key = (await treasury.companies.create_api_key(company, KeyKind.SECRET))[1]
        client = TestClient(TestServer(create_app(treasury)))
        await client.start_server()
        try:
            for _ in range(2):
                refused = await client.post(
                    "/api/v1/transfer",
                    json={"from_wallet_id": usd, "to_wallet_id": gbp, "from_amount": 100},
                    headers={"Authorization": f"Bearer {key}"},
                )
                assert refused.status == 503
                assert (await refused.json())["error"]["code"] == "fx_rate_unavailable"
        finally:
            await client.close()
        assert await treasury.wallets.balances(company) == before
        assert (await treasury.transfers.list(company)).items == []

    asyncio.run(scenario())
    check_invariants(treasury.storage)


def test_a_redirect_to_another_scheme_is_refused(server: RatesServer) -> None:
    # An FTP "server" on loopback that only notes who connects: a followed redirect reaches it.
    listener = socket.create_server(("127.0.0.1", 0))
    connections: list[object] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, peer = listener.accept()
                connections.append(peer)
                connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    ftp = f"ftp://127.0.0.1:{listener.getsockname()[1]}/eurofxref-hist-90d.xml"
    redirect = "HTTP/1.0 302 Found\r\nLocation: {}\r\nContent-Length: 0\r\n\r\n"
    server.raw["/to-ftp"] = redirect.format(ftp).encode()
    server.raw["/to-http"] = redirect.format(server.url("/eurofxref-hist-90d.xml")).encode()
    try:
        with pytest.raises(RatesSourceError, match="not an http"):
            download(server.url("/to-ftp"), 5)
        assert connections == []
        # A redirect that stays on http(s) is followed, as the ECB's own may be.
        assert download(server.url("/to-http"), 5) == XML
        # Through the adapter the refusal is a failed refresh: the loaded rates answer.
        clock = FakeClock(datetime(2025, 4, 22, 9, tzinfo=UTC))
        thursday = RateTable(
            {d: r for d, r in parse_rates(XML).days.items() if d <= date(2025, 4, 17)}
        )
        fx = EcbFxRates(clock, table=thursday, url=server.url("/to-ftp"))
        assert asyncio.run(fx.rate("USD", "GBP")).rate_date == date(2025, 4, 17)
        assert server.hits[-1] == "/to-ftp"
        assert connections == []
    finally:
        # Closing alone leaves accept() blocked; shutting the socket down wakes it.
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join()


def test_loops_in_several_threads_share_one_load_and_one_refresh(
    server: RatesServer, tmp_path: Path
) -> None:
    # Offline up to Thursday; on Easter Tuesday each thread's loop quotes at once. The offline
    # file is read once and the URL fetched once, by the adapter's thread; the quotes wait for
    # that first fetch (the rates lack today) unless it outlasts the timeout, when they get
    # Thursday's rate (within the day guard); every quote after it gets Tuesday's.
    snapshot = snapshot_until(tmp_path, date(2025, 4, 17))
    loads: list[int] = []

    def load() -> bytes:
        loads.append(threading.get_ident())
        return snapshot.read_bytes()

    clock = FakeClock(datetime(2025, 4, 22, 17, tzinfo=UTC))
    fx = EcbFxRates(clock, load=load, url=server.url("/eurofxref-hist-90d.xml"))
    threads = 4
    start = threading.Barrier(threads)
    answers: list[FxQuote | BaseException] = []

    async def quotes() -> list[FxQuote | BaseException]:
        return await asyncio.gather(
            *(fx.rate("USD", target) for target in ("GBP", "JPY", "CHF")), return_exceptions=True
        )

    def run() -> None:
        start.wait()
        answers.extend(asyncio.run(quotes()))

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(answers) == 3 * threads
    assert all(isinstance(a, FxQuote) for a in answers), answers
    assert {a.rate_date for a in answers if isinstance(a, FxQuote)} <= {
        date(2025, 4, 17),
        date(2025, 4, 22),
    }
    assert len(loads) == 1
    assert server.hits == ["/eurofxref-hist-90d.xml"]
    assert asyncio.run(fx.table()).days == parse_rates(XML).days
    assert asyncio.run(fx.rate("USD", "GBP")).rate_date == date(2025, 4, 22)


def test_close_does_not_wait_for_a_fetch_a_server_keeps_trickling(tmp_path: Path) -> None:
    # A byte every 50 ms never trips urllib's per-operation timeout, so the fetch itself could
    # go on for minutes; closing must not wait for it.
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))

    def trickle() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n<")
            while not stop.wait(0.05):
                connection.sendall(b" ")

    server = threading.Thread(target=trickle, daemon=True)
    server.start()
    clock = FakeClock(datetime(2025, 4, 22, 9, tzinfo=UTC))
    thursday = parse_rates(snapshot_until(tmp_path, date(2025, 4, 17)).read_bytes())
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/eurofxref-daily.xml"
    fx = EcbFxRates(clock, table=thursday, url=url, timeout_seconds=0.5)
    try:
        # The first quote starts the fetch, waits for it at most the timeout, then answers.
        assert asyncio.run(fx.rate("USD", "GBP")).rate_date == date(2025, 4, 17)
        closing = threading.Thread(target=fx.close)
        closing.start()
        closing.join(10)
        assert not closing.is_alive(), "close() waited for the trickling fetch"
    finally:
        stop.set()
        listener.close()


def test_a_quote_after_close_does_not_wait_for_a_fetch_that_never_starts(
    server: RatesServer, tmp_path: Path
) -> None:
    clock = FakeClock(datetime(2025, 4, 22, 9, tzinfo=UTC))
    thursday = parse_rates(snapshot_until(tmp_path, date(2025, 4, 17)).read_bytes())
    # The loaded rates lack the clock's day, so an open adapter's first quote would wait for
    # the first fetch, up to this (long) timeout.
    fx = EcbFxRates(clock, table=thursday, url=server.url("/daily.xml"), timeout_seconds=60)
    fx.close()
    answers: list[FxQuote] = []
    quoting = threading.Thread(target=lambda: answers.append(asyncio.run(fx.rate("USD", "GBP"))))
    quoting.start()
    quoting.join(10)
    assert not quoting.is_alive(), "the quote waited for a fetch a closed adapter never makes"
    assert [a.rate_date for a in answers] == [date(2025, 4, 17)]
    assert server.hits == []


def test_starting_the_fetch_does_not_wait_for_a_history_being_loaded(server: RatesServer) -> None:
    clock = FakeClock(datetime(2025, 4, 22, 9, tzinfo=UTC))
    loading, release = threading.Event(), threading.Event()

    def slow_load() -> bytes:
        loading.set()
        release.wait(10)
        return XML

    fx = EcbFxRates(clock, load=slow_load, url=server.url("/eurofxref-hist-90d.xml"))
    loader = threading.Thread(target=lambda: asyncio.run(fx.table()))
    try:
        loader.start()
        assert loading.wait(10)
        # start() runs on the event loop at every quote: it must not queue behind the load.
        starting = threading.Thread(target=fx.start)
        starting.start()
        starting.join(5)
        assert not starting.is_alive(), "start() waited for the history being parsed"
    finally:
        release.set()
        loader.join(10)
        fx.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the platform has no fork()")
def test_a_forked_child_fetches_with_a_thread_of_its_own(
    server: RatesServer, tmp_path: Path
) -> None:
    clock = FakeClock(datetime(2025, 4, 22, 9, tzinfo=UTC))
    thursday = parse_rates(snapshot_until(tmp_path, date(2025, 4, 17)).read_bytes())
    fx = EcbFxRates(
        clock, table=thursday, url=server.url("/eurofxref-hist-90d.xml"), refresh_seconds=60
    )
    try:
        fx.start()
        wait_for(lambda: bool(server.hits), "the parent's first fetch")
        reader, writer = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child, which reports through the pipe
            status = 1
            try:
                inherited = fx._thread
                fx.start()
                fresh = fx._thread
                asyncio.run(fx.refresh())
                ok = inherited is None and fresh is not None and fresh.is_alive()
                os.write(writer, b"ok" if ok else b"no thread")
                status = 0
            finally:
                os._exit(status)
        os.close(writer)
        _, status = os.waitpid(child, 0)
        answer = os.read(reader, 64)
        os.close(reader)
        assert (os.waitstatus_to_exitcode(status), answer) == (0, b"ok")
    finally:
        fx.close()
