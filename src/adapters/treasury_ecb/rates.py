"""The ECB's euro reference rates as a table, parsed from the files the ECB publishes.

The ECB publishes, each TARGET business day around 16:00 CET, how many units of about thirty
currencies one euro buys. The same figures come as XML (``eurofxref-daily.xml``,
``eurofxref-hist-90d.xml``, ``eurofxref-hist.xml``), as CSV (``eurofxref.csv``,
``eurofxref-hist.csv``) and as those CSVs zipped; :func:`parse_rates` reads every one of them.
Nothing here does I/O: it turns bytes into a :class:`RateTable`.
"""

from __future__ import annotations

import bisect
import csv
import io
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from xml.etree import ElementTree

#: The most a zipped file may unpack to: the ECB's full history is a few MB, so more is not
#: its file (and a small zip unpacking to gigabytes would exhaust memory).
MAX_UNZIPPED_BYTES = 32 * 1024 * 1024

#: The range of units per euro accepted. Every currency the ECB has published, the old Turkish
#: lira's millions included, lies well inside it; a figure outside is a broken file, and an
#: absurd one (``1E+999999``) would overflow the cross-rate arithmetic instead of being refused.
MIN_RATE = Decimal("1E-6")
MAX_RATE = Decimal("1E+9")

#: The namespace of the ``Cube`` elements in the ECB's XML files.
_ECB_NS = "{http://www.ecb.int/vocabulary/2002-08-01/eurofxref}"


class RatesFileError(ValueError):
    """The bytes are not an ECB reference-rates file this module can read."""


@dataclass(frozen=True)
class RateTable:
    """Units of each currency per one euro, by ECB business day (EUR itself is implied, 1)."""

    days: Mapping[date, Mapping[str, Decimal]]
    _dates: tuple[date, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_dates", tuple(sorted(self.days)))

    @property
    def latest(self) -> date | None:
        """The newest business day in the table, or ``None`` when it is empty."""
        return self._dates[-1] if self._dates else None

    def day_on_or_before(self, day: date) -> date | None:
        """The last business day on or before ``day`` (a weekend or holiday gives the one
        before it), or ``None`` when the table starts later."""
        i = bisect.bisect_right(self._dates, day)
        return self._dates[i - 1] if i else None

    def merged(self, newer: RateTable) -> RateTable:
        """This table with ``newer``'s days added; a day in both takes ``newer``'s figures."""
        return RateTable({**self.days, **newer.days})


def parse_rates(data: bytes) -> RateTable:
    """Parse an ECB reference-rates file: XML, CSV, or a zip holding one CSV.

    Raises :class:`RatesFileError` when the bytes are none of these or hold no rate.
    """
    if data.startswith(b"PK"):
        data = _unzip(data)
    text = _decode(data)
    stripped = text.lstrip()
    table = _parse_xml(stripped) if stripped.startswith("<") else _parse_csv(stripped)
    if not table.days:
        raise RatesFileError("the file holds no reference rate")
    return table


def _unzip(data: bytes) -> bytes:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = [n for n in archive.namelist() if not n.endswith("/")]
            if len(names) != 1:
                raise RatesFileError(f"expected one file in the zip, found {len(names)}")
            # The size in the zip's directory is the sender's claim: read one byte past the
            # limit rather than trust it, so a bomb stops at the limit whatever it declares.
            with archive.open(names[0]) as member:
                unzipped = member.read(MAX_UNZIPPED_BYTES + 1)
    # A corrupt deflate stream raises zlib.error, a truncated one EOFError, an unsupported
    # method NotImplementedError and an encrypted member RuntimeError: all a file not read.
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
        raise RatesFileError(f"not a readable zip: {exc}") from None
    if len(unzipped) > MAX_UNZIPPED_BYTES:
        raise RatesFileError(f"the zipped file unpacks to more than {MAX_UNZIPPED_BYTES} bytes")
    return unzipped


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RatesFileError("the file is not UTF-8 text") from None


def _rate(value: str, where: str) -> Decimal | None:
    value = value.strip()
    # The history marks a currency the ECB did not publish that day (before it started, after
    # it stopped: CYP, SIT, RUB) as N/A; an empty cell is the CSV's trailing comma.
    if value in ("", "N/A"):
        return None
    try:
        rate = Decimal(value)
    except InvalidOperation:
        raise RatesFileError(f"{where}: {value!r} is not a rate") from None
    if not rate.is_finite() or rate <= 0:
        raise RatesFileError(f"{where}: {value!r} is not a positive rate")
    if not MIN_RATE <= rate <= MAX_RATE:
        raise RatesFileError(f"{where}: {value!r} is outside {MIN_RATE} to {MAX_RATE} per euro")
    return rate


def _day(value: str) -> date:
    value = value.strip()
    # The history CSV writes 2024-05-17, the single-day CSV "17 May 2024".
    for parse in (date.fromisoformat, lambda v: datetime.strptime(v, "%d %B %Y").date()):  # noqa: DTZ007
        try:
            return parse(value)
        except ValueError:
            continue
    raise RatesFileError(f"{value!r} is not a date")


def _currency(value: str) -> str:
    code = value.strip()
    if len(code) != 3 or not code.isascii() or not code.isalpha() or not code.isupper():
        raise RatesFileError(f"{code!r} is not a currency code")
    return code


def _parse_csv(text: str) -> RateTable:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or rows[0][0].strip() != "Date":
        raise RatesFileError("not an ECB rates file: no XML, and no CSV header 'Date, ...'")
    header = [_currency(c) for c in rows[0][1:] if c.strip()]
    days: dict[date, dict[str, Decimal]] = {}
    for number, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip():
            continue
        day = _day(row[0])
        rates: dict[str, Decimal] = {}
        for code, cell in zip(header, row[1:], strict=False):
            rate = _rate(cell, f"line {number}, {code}")
            if rate is not None:
                rates[code] = rate
        days[day] = rates
    return RateTable(days)


def _parse_xml(text: str) -> RateTable:
    # The file comes from a URL: defusedxml refuses entity expansion and external references,
    # and the ECB's files declare no DTD, so one is refused outright. Imported here: the plugin
    # loads with every treasury, the ecb extra's packages need only be there when it is used.
    try:
        from defusedxml import DefusedXmlException
        from defusedxml import ElementTree as DefusedElementTree
    except ModuleNotFoundError:
        raise RatesFileError(
            "reading the ECB's XML needs defusedxml: pip install 'treasury-core[ecb]'"
        ) from None
    try:
        root = DefusedElementTree.fromstring(text, forbid_dtd=True)
    except DefusedXmlException:
        raise RatesFileError("an ECB rates file has no DTD or entity") from None
    except ElementTree.ParseError as exc:
        raise RatesFileError(f"not well-formed XML: {exc}") from None
    days: dict[date, dict[str, Decimal]] = {}
    for cube in root.iter(f"{_ECB_NS}Cube"):
        when = cube.get("time")
        if when is None:
            continue
        day = _day(when)
        rates: dict[str, Decimal] = {}
        for item in cube.findall(f"{_ECB_NS}Cube"):
            code = _currency(item.get("currency", ""))
            rate = _rate(item.get("rate", ""), f"{day}, {code}")
            if rate is not None:
                rates[code] = rate
        days[day] = rates
    return RateTable(days)
