"""The sandbox bank rail's tables: account formats, bank names, collection accounts, VA programs.

Everything currency-specific the :class:`~treasury_sandbox.bank_rail.SandboxBankRail` knows lives
here as data; the rail itself only interprets it. Adding a currency means adding rows, not code.

Patterns are checked against the value after every space has been removed and letters have been
upper-cased (``"de89 3704 …"`` → ``"DE893704…"``); a client can apply the same two steps and the
pattern locally. Checksums (ABA, IBAN) and registry look-ups (IBAN and BIC countries) are
enforced by the rail on top of the pattern. Patterns use ``[0-9]`` rather than ``\\d`` so that
non-ASCII digits never match, and are written to work unchanged in Python and JavaScript.

This module imports nothing beyond the standard library and the core's list of refused
characters: schwifty is loaded by the rail only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from treasury_core.validation import refused_class


class Check(StrEnum):
    """What the rail checks beyond a field's pattern (and how it normalizes the value)."""

    #: The pattern only; the field's ``separators`` are then removed.
    PATTERN = "pattern"
    #: A US ABA routing number: the 3-7-1 weighted checksum.
    ABA = "aba"
    #: A Canadian routing number: ``TTTTT-III`` is rewritten as the electronic ``0IIITTTTT``.
    CA_ROUTING = "ca_routing"
    #: An IBAN (schwifty: country, length, structure, mod-97 checksum), then the country scope.
    IBAN = "iban"
    #: A BIC (schwifty: length, structure, ISO country), then the country scope.
    BIC = "bic"


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """What one field of one currency's bank-account format must look like."""

    pattern: str
    description: str
    example: str
    check: Check = Check.PATTERN
    #: Characters removed after the pattern matched (``"-"`` in ``12-34-56``).
    separators: str = ""
    #: IBAN/BIC: the ISO country codes allowed (empty: any).
    countries: frozenset[str] = frozenset()
    #: IBAN: the country must be in the SEPA zone (schwifty's registry says which are).
    sepa: bool = False


@dataclass(frozen=True, slots=True)
class CurrencyFormat:
    """A currency's bank-account format: what ``account_number`` and ``routing_number`` hold."""

    currency: str
    name: str
    account_number: FieldSpec
    routing_number: FieldSpec


# --- Field shapes shared by several currencies ------------------------------------------------

TEXT_MAX_LENGTH = 255
#: bank_name and account_name: 1–255 characters, none of the characters every text field
#: refuses (controls, line separators, bidirectional controls: the core's one list). Checked on
#: the value with surrounding whitespace removed (NFC-normalized).
TEXT_PATTERN = f"^[^{refused_class()}]{{1,{TEXT_MAX_LENGTH}}}$"

BANK_NAME = FieldSpec(
    pattern=TEXT_PATTERN,
    description=(
        "Name of the bank holding the account: 1–255 characters, no control or "
        "bidirectional characters."
    ),
    example="Example Bank",
)
ACCOUNT_NAME = FieldSpec(
    pattern=TEXT_PATTERN,
    description=(
        "Name of the account holder: 1–255 characters, no control or bidirectional characters."
    ),
    example="Jane Doe",
)

_BIC_PATTERN = "^[A-Z0-9]{4}{country}[A-Z0-9]{2}([A-Z0-9]{3})?$"


def _bic(example: str, countries: tuple[str, ...] = (), where: str = "") -> FieldSpec:
    country = f"({'|'.join(countries)})" if countries else "[A-Z]{2}"
    return FieldSpec(
        pattern=_BIC_PATTERN.replace("{country}", country),
        description=(
            f"BIC (SWIFT code) of the bank{where}: 8 or 11 characters "
            "(4 bank, 2 country, 2 location, optional 3 branch)."
        ),
        example=example,
        check=Check.BIC,
        countries=frozenset(countries),
    )


def _digits(low: int, high: int, what: str, example: str) -> FieldSpec:
    count = f"{low}" if low == high else f"{low},{high}"
    span = f"{low}" if low == high else f"{low}–{high}"
    return FieldSpec(
        pattern=f"^[0-9]{{{count}}}$",
        description=f"{what}: {span} digits.",
        example=example,
    )


# --- Formats ------------------------------------------------------------------------------------

_FORMATS: tuple[CurrencyFormat, ...] = (
    CurrencyFormat(
        currency="USD",
        name="US bank account (ABA routing number)",
        account_number=_digits(4, 17, "US account number", "000123456789"),
        routing_number=FieldSpec(
            # The first two digits are a Federal Reserve district (00–12), thrift (21–32),
            # electronic (61–72) or traveller's-cheque (80) prefix.
            pattern="^(0[0-9]|1[0-2]|2[1-9]|3[0-2]|6[1-9]|7[0-2]|80)[0-9]{7}$",
            description=(
                "9-digit ABA routing number; the rail also checks the ABA checksum "
                "(weights 3, 7, 1; the weighted sum is a multiple of 10)."
            ),
            example="021000021",
            check=Check.ABA,
        ),
    ),
    CurrencyFormat(
        currency="EUR",
        name="SEPA account (IBAN and BIC)",
        account_number=FieldSpec(
            pattern="^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$",
            description=(
                "IBAN of an account in a SEPA country; the rail checks the country's length "
                "and structure and the IBAN checksum."
            ),
            example="DE89370400440532013000",
            check=Check.IBAN,
            sepa=True,
        ),
        routing_number=_bic("COBADEFFXXX"),
    ),
    CurrencyFormat(
        currency="GBP",
        name="UK bank account (sort code)",
        account_number=_digits(8, 8, "UK account number", "31926819"),
        routing_number=FieldSpec(
            pattern="^[0-9]{2}-?[0-9]{2}-?[0-9]{2}$",
            description="6-digit sort code, with or without dashes (12-34-56 or 123456).",
            example="60-16-13",
            separators="-",
        ),
    ),
    CurrencyFormat(
        currency="JPY",
        name="Japanese bank account (zengin bank and branch code)",
        account_number=_digits(7, 7, "Japanese account number", "1234567"),
        routing_number=FieldSpec(
            pattern="^[0-9]{4}-?[0-9]{3}$",
            description="7 digits: the 4-digit bank code and the 3-digit branch code (0005-001).",
            example="0005001",
            separators="-",
        ),
    ),
    CurrencyFormat(
        currency="CHF",
        name="Swiss or Liechtenstein account (IBAN and BIC)",
        account_number=FieldSpec(
            pattern="^(CH|LI)[0-9]{2}[0-9]{5}[A-Z0-9]{12}$",
            description="21-character CH or LI IBAN; the rail checks the IBAN checksum.",
            example="CH9300762011623852957",
            check=Check.IBAN,
            countries=frozenset({"CH", "LI"}),
        ),
        routing_number=_bic("UBSWCHZH80A", ("CH", "LI"), " in Switzerland or Liechtenstein"),
    ),
    CurrencyFormat(
        currency="CAD",
        name="Canadian bank account (institution and transit number)",
        account_number=_digits(7, 12, "Canadian account number", "1234567"),
        routing_number=FieldSpec(
            pattern="^(0[0-9]{8}|[0-9]{5}-[0-9]{3})$",
            description=(
                "Routing number: electronic form 0 + 3-digit institution + 5-digit transit "
                "(000300002), or the paper form TTTTT-III (00002-003)."
            ),
            example="000300002",
            check=Check.CA_ROUTING,
        ),
    ),
    CurrencyFormat(
        currency="AUD",
        name="Australian bank account (BSB)",
        account_number=_digits(6, 10, "Australian account number", "12345678"),
        routing_number=FieldSpec(
            pattern="^[0-9]{3}-?[0-9]{3}$",
            description="6-digit BSB (bank-state-branch), with or without a dash (062-000).",
            example="062-000",
            separators="-",
        ),
    ),
    CurrencyFormat(
        currency="SGD",
        name="Singapore bank account (SWIFT BIC)",
        account_number=_digits(7, 12, "Singapore account number", "0721234567"),
        # Singapore's local 7-digit bank+branch code is not used: the BIC is what both FAST
        # and cross-border transfers accept, and it can be checked against ISO data.
        routing_number=_bic("DBSSSGSG", ("SG",), " in Singapore"),
    ),
    CurrencyFormat(
        currency="KWD",
        name="Kuwaiti bank account (IBAN and BIC)",
        account_number=FieldSpec(
            pattern="^KW[0-9]{2}[A-Z]{4}[A-Z0-9]{22}$",
            description="30-character KW IBAN; the rail checks the IBAN checksum.",
            example="KW81CBKU0000000000001234560101",
            check=Check.IBAN,
            countries=frozenset({"KW"}),
        ),
        routing_number=_bic("CBKUKWKW", ("KW",), " in Kuwait"),
    ),
)

#: Every format, by ISO currency code.
FORMATS: Mapping[str, CurrencyFormat] = MappingProxyType({f.currency: f for f in _FORMATS})


# --- Bank names ---------------------------------------------------------------------------------

#: A handful of plausible banks per currency (what ``GET /bank-account/bank-names`` lists).
BANK_NAMES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "USD": (
            "Bank of America",
            "Citibank",
            "Community Federal Savings Bank",
            "JPMorgan Chase Bank",
            "PNC Bank",
            "U.S. Bank",
            "Wells Fargo Bank",
        ),
        "EUR": (
            "ABN AMRO Bank",
            "BNP Paribas",
            "Banco Santander",
            "Commerzbank",
            "Deutsche Bank",
            "ING Bank",
            "Intesa Sanpaolo",
        ),
        "GBP": (
            "Barclays Bank",
            "ClearBank",
            "HSBC UK Bank",
            "Lloyds Bank",
            "NatWest",
            "Nationwide Building Society",
            "Santander UK",
        ),
        "JPY": (
            "Japan Post Bank",
            "Mizuho Bank",
            "MUFG Bank",
            "Resona Bank",
            "Sumitomo Mitsui Banking Corporation",
        ),
        "CHF": (
            "Banque Cantonale Vaudoise",
            "PostFinance",
            "Raiffeisen Schweiz",
            "UBS Switzerland",
            "Zürcher Kantonalbank",
        ),
        "CAD": (
            "Bank of Montreal",
            "Canadian Imperial Bank of Commerce",
            "National Bank of Canada",
            "Royal Bank of Canada",
            "Scotiabank",
            "TD Canada Trust",
        ),
        "AUD": (
            "ANZ",
            "Commonwealth Bank of Australia",
            "Macquarie Bank",
            "National Australia Bank",
            "Westpac Banking Corporation",
        ),
        "SGD": (
            "Citibank",
            "DBS Bank",
            "HSBC Singapore",
            "Maybank Singapore",
            "OCBC Bank",
            "United Overseas Bank",
        ),
        "KWD": (
            "Boubyan Bank",
            "Burgan Bank",
            "Commercial Bank of Kuwait",
            "Gulf Bank",
            "Kuwait Finance House",
            "National Bank of Kuwait",
        ),
    }
)


# --- Where deposits are sent ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IbanParts:
    """The components schwifty's ``IBAN.generate`` builds an IBAN (with its checksum) from."""

    country: str
    bank_code: str
    account_code: str
    branch_code: str = ""


@dataclass(frozen=True, slots=True)
class CollectionAccount:
    """A sandbox collection account payers send a currency to (quoting their reference).

    ``account_number`` is given as is, or built from ``iban`` (then it is the IBAN).
    """

    bank_name: str
    routing_number: str
    account_number: str = ""
    iban: IbanParts | None = None


#: The holder of every sandbox collection and virtual account.
HOLDER_NAME = "Treasury Sandbox Ltd"

COLLECTION_ACCOUNTS: Mapping[str, tuple[CollectionAccount, ...]] = MappingProxyType(
    {
        "USD": (CollectionAccount("JPMorgan Chase Bank", "021000021", "483920175"),),
        "EUR": (
            CollectionAccount("ING Bank", "INGBNL2A", iban=IbanParts("NL", "INGB", "0007051348")),
        ),
        "GBP": (CollectionAccount("Barclays Bank", "200000", "53918204"),),
        "JPY": (CollectionAccount("MUFG Bank", "0005001", "4021937"),),
        "CHF": (
            CollectionAccount(
                "UBS Switzerland", "UBSWCHZH80A", iban=IbanParts("CH", "00230", "0000F2740519")
            ),
        ),
        "CAD": (CollectionAccount("Royal Bank of Canada", "000300002", "5102847"),),
        "AUD": (CollectionAccount("Commonwealth Bank of Australia", "062000", "10482715"),),
        "SGD": (CollectionAccount("DBS Bank", "DBSSSGSG", "0720394816"),),
        "KWD": (
            CollectionAccount(
                "National Bank of Kuwait",
                "NBOKKWKW",
                iban=IbanParts("KW", "NBOK", "0000000000002019384756"),
            ),
        ),
    }
)


# --- Virtual accounts -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VirtualAccountProgram:
    """How a currency's virtual accounts are numbered.

    The account code is ``account_prefix`` followed by digits derived from the seed, in all
    ``account_digits`` long. With ``iban_country`` an IBAN is built from ``iban_bank_code``, the
    ``sort_code`` (as the branch) and the account code; ``expose_account_number`` says whether
    the local account number is shown as well (it is not for SEPA accounts, where the IBAN is
    the account number).
    """

    bank_name: str
    account_digits: int
    account_prefix: str = ""
    expose_account_number: bool = True
    routing_number: str | None = None
    sort_code: str | None = None
    iban_country: str | None = None
    iban_bank_code: str = ""
    bic: str | None = None


VIRTUAL_ACCOUNT_PROGRAMS: Mapping[str, VirtualAccountProgram] = MappingProxyType(
    {
        "USD": VirtualAccountProgram(
            bank_name="Community Federal Savings Bank",
            account_digits=12,
            account_prefix="8",
            routing_number="026073150",
        ),
        "GBP": VirtualAccountProgram(
            bank_name="ClearBank",
            account_digits=8,
            sort_code="040605",
            iban_country="GB",
            iban_bank_code="CLRB",
            bic="CLRBGB22",
        ),
        "EUR": VirtualAccountProgram(
            bank_name="ABN AMRO Bank",
            account_digits=10,
            account_prefix="5",
            expose_account_number=False,
            iban_country="NL",
            iban_bank_code="ABNA",
            bic="ABNANL2A",
        ),
    }
)
