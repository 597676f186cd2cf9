"""The sandbox bank rail: real bank-account formats and checksums, no real money.

:class:`SandboxBankRail` implements :class:`~treasury_core.ports.BankRail` from the tables in
:mod:`treasury_sandbox.bank_data`. Registration details are checked the way a bank would check
them — pattern, ABA checksum, IBAN checksum and country length, BIC structure and country (IBAN
and BIC through schwifty) — and every detail the rail hands out (deposit instructions, virtual
account coordinates) passes those same checks. Settlement is simulated: movements settle after
configurable delays on the treasury's clock (decisions.md, "Sandbox controls").

schwifty is a dependency of every install (the core's bank calls reach this rail); only this
module imports it, so importing :mod:`treasury_sandbox` does not load its registries.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from datetime import timedelta

from schwifty import BIC, IBAN
from schwifty.exceptions import (
    InvalidChecksumDigits,
    InvalidCountryCode,
    InvalidLength,
    InvalidStructure,
    SchwiftyException,
)

from treasury_core.errors import UnknownCurrency, ValidationFailed
from treasury_core.ports import (
    AccountFormat,
    BankAccountDetails,
    FormatField,
    PaymentInstruction,
    Settlement,
    VirtualAccountDetails,
)
from treasury_sandbox.bank_data import (
    ACCOUNT_NAME,
    BANK_NAME,
    BANK_NAMES,
    COLLECTION_ACCOUNTS,
    FORMATS,
    HOLDER_NAME,
    TEXT_MAX_LENGTH,
    VIRTUAL_ACCOUNT_PROGRAMS,
    Check,
    CollectionAccount,
    CurrencyFormat,
    FieldSpec,
    IbanParts,
    VirtualAccountProgram,
)

__all__ = [
    "DEFAULT_DEPOSIT_DELAY",
    "DEFAULT_FX_TRANSFER_DELAY",
    "DEFAULT_WITHDRAWAL_DELAY",
    "SandboxBankRail",
    "aba_checksum_ok",
]

#: decisions.md, "Sandbox controls": deposits and withdrawals settle after 24 hours,
#: cross-currency transfers after 60 seconds.
DEFAULT_DEPOSIT_DELAY = timedelta(hours=24)
DEFAULT_WITHDRAWAL_DELAY = timedelta(hours=24)
DEFAULT_FX_TRANSFER_DELAY = timedelta(seconds=60)

_ABA_WEIGHTS = (3, 7, 1, 3, 7, 1, 3, 7, 1)
_WHITESPACE = re.compile(r"\s+")

#: schwifty's IBAN errors, most specific first, as the message the caller sees.
_IBAN_ERRORS: tuple[tuple[type[SchwiftyException], str], ...] = (
    (InvalidChecksumDigits, "{param} fails the IBAN checksum"),
    (InvalidCountryCode, "{param} has an unknown IBAN country code"),
    (InvalidLength, "{param} has the wrong length for an IBAN of its country"),
    (InvalidStructure, "{param} does not have the structure of an IBAN of its country"),
    (SchwiftyException, "{param} is not a valid IBAN"),
)
_BIC_ERRORS: tuple[tuple[type[SchwiftyException], str], ...] = (
    (InvalidCountryCode, "{param} has an unknown BIC country code"),
    (InvalidLength, "{param} must be a BIC of 8 or 11 characters"),
    (SchwiftyException, "{param} is not a valid BIC"),
)


def aba_checksum_ok(routing_number: str) -> bool:
    """Whether a 9-digit string passes the ABA checksum (weights 3-7-1, sum divisible by 10)."""
    if len(routing_number) != 9 or not routing_number.isascii() or not routing_number.isdigit():
        return False
    return sum(w * int(d) for w, d in zip(_ABA_WEIGHTS, routing_number, strict=True)) % 10 == 0


def _schwifty_message(
    exc: SchwiftyException, table: tuple[tuple[type[SchwiftyException], str], ...], param: str
) -> str:
    return next(msg for kind, msg in table if isinstance(exc, kind)).format(param=param)


def _text(value: object, param: str, spec: FieldSpec) -> str:
    if not isinstance(value, str):
        raise ValidationFailed(f"{param} must be a string", param=param)
    if any(unicodedata.category(ch) == "Cs" for ch in value):
        raise ValidationFailed(f"{param} must be valid Unicode text", param=param)
    text = unicodedata.normalize("NFC", value).strip()
    if not text:
        raise ValidationFailed(f"{param} must not be blank", param=param)
    if len(text) > TEXT_MAX_LENGTH:
        raise ValidationFailed(f"{param} must be at most {TEXT_MAX_LENGTH} characters", param=param)
    if not re.fullmatch(spec.pattern, text):
        raise ValidationFailed(
            f"{param} must not contain control characters or bidirectional controls", param=param
        )
    return text


def _in_scope(country: str, spec: FieldSpec, in_sepa: bool = True) -> bool:
    if spec.countries and country not in spec.countries:
        return False
    return in_sepa or not spec.sepa


def _scope_label(spec: FieldSpec) -> str:
    if spec.countries:
        return "/".join(sorted(spec.countries))
    return "a SEPA country"


def _check_iban(value: str, param: str, spec: FieldSpec) -> str:
    try:
        iban = IBAN(value)
        country, in_sepa = iban.country_code, iban.in_sepa_zone
    except SchwiftyException as exc:
        raise ValidationFailed(_schwifty_message(exc, _IBAN_ERRORS, param), param=param) from exc
    except (KeyError, IndexError, TypeError) as exc:  # defensive: never leak a library error
        raise ValidationFailed(f"{param} is not a valid IBAN", param=param) from exc
    if not _in_scope(country, spec, in_sepa):
        raise ValidationFailed(
            f"{param} must be an IBAN from {_scope_label(spec)} (got {country})", param=param
        )
    return str(iban)


def _check_bic(value: str, param: str, spec: FieldSpec) -> str:
    try:
        bic = BIC(value)
        country = bic.country_code
    except SchwiftyException as exc:
        raise ValidationFailed(_schwifty_message(exc, _BIC_ERRORS, param), param=param) from exc
    except (KeyError, IndexError, TypeError) as exc:  # defensive: never leak a library error
        raise ValidationFailed(f"{param} is not a valid BIC", param=param) from exc
    if not _in_scope(country, spec):
        raise ValidationFailed(
            f"{param} must be the BIC of a bank in {_scope_label(spec)} (got {country})",
            param=param,
        )
    return str(bic)


def _check_aba(value: str, param: str, spec: FieldSpec) -> str:
    if not aba_checksum_ok(value):
        raise ValidationFailed(f"{param} fails the ABA checksum", param=param)
    return value


def _check_ca_routing(value: str, param: str, spec: FieldSpec) -> str:
    # Paper form TTTTT-III → electronic form 0IIITTTTT.
    if "-" in value:
        transit, institution = value.split("-")
        return f"0{institution}{transit}"
    return value


def _check_pattern(value: str, param: str, spec: FieldSpec) -> str:
    return value


_CHECKS = {
    Check.PATTERN: _check_pattern,
    Check.ABA: _check_aba,
    Check.CA_ROUTING: _check_ca_routing,
    Check.IBAN: _check_iban,
    Check.BIC: _check_bic,
}


def _code(value: object, param: str, spec: FieldSpec, fmt: CurrencyFormat) -> str:
    if not isinstance(value, str):
        raise ValidationFailed(f"{param} must be a string", param=param)
    stripped = _WHITESPACE.sub("", value)
    if not stripped:
        raise ValidationFailed(f"{param} is required", param=param)
    # ASCII before upper-casing, which would turn "ı" into "I" and "ß" into "SS".
    compact = stripped.upper()
    if not stripped.isascii() or not re.fullmatch(spec.pattern, compact):
        raise ValidationFailed(
            f"{param} is not valid for a {fmt.currency} account: {spec.description}",
            param=param,
        )
    normalized = _CHECKS[spec.check](compact, param, spec)
    return normalized.translate({ord(c): None for c in spec.separators})


def _currency(code: object, param: str) -> str:
    if not isinstance(code, str):
        raise UnknownCurrency("currency must be a string currency code", param=param)
    return code.strip().upper()


def _format_for(currency: object) -> CurrencyFormat:
    code = _currency(currency, "currency_id")
    fmt = FORMATS.get(code)
    if fmt is None:
        raise UnknownCurrency(f"No bank-account format for currency {code!r}", param="currency_id")
    return fmt


def _field(name: str, spec: FieldSpec) -> FormatField:
    return FormatField(
        name=name, pattern=spec.pattern, description=spec.description, example=spec.example
    )


def _iban(parts: IbanParts) -> str:
    return str(
        IBAN.generate(
            parts.country,
            bank_code=parts.bank_code,
            account_code=parts.account_code,
            branch_code=parts.branch_code,
        )
    )


def _sanitize_reference(reference: str) -> str:
    # Control, format (bidi) and separator characters become spaces; runs of spaces collapse.
    spaced = "".join(
        " " if unicodedata.category(ch)[0] in "CZ" else ch
        for ch in unicodedata.normalize("NFC", reference)
    )
    return " ".join(spaced.split())


class SandboxBankRail:
    """The sandbox's :class:`~treasury_core.ports.BankRail`: real formats, simulated settlement.

    The settlement delays default to decisions.md (deposits and withdrawals 24 h, cross-currency
    transfers 60 s); pass others to speed a sandbox up or slow it down.
    """

    def __init__(
        self,
        *,
        deposit_delay: timedelta = DEFAULT_DEPOSIT_DELAY,
        withdrawal_delay: timedelta = DEFAULT_WITHDRAWAL_DELAY,
        fx_transfer_delay: timedelta = DEFAULT_FX_TRANSFER_DELAY,
        holder_name: str = HOLDER_NAME,
    ) -> None:
        delays = {
            Settlement.DEPOSIT: deposit_delay,
            Settlement.WITHDRAWAL: withdrawal_delay,
            Settlement.FX_TRANSFER: fx_transfer_delay,
        }
        for kind, delay in delays.items():
            if delay < timedelta(0):
                raise ValueError(f"the {kind.value} settlement delay must not be negative")
        self._delays = delays
        self._holder_name = holder_name

    # --- formats and names ------------------------------------------------------------------

    def account_formats(self) -> list[AccountFormat]:
        """Every currency's format, in currency-code order."""
        return [
            AccountFormat(
                currency=fmt.currency,
                name=fmt.name,
                fields=(
                    _field("bank_name", BANK_NAME),
                    _field("account_name", ACCOUNT_NAME),
                    _field("account_number", fmt.account_number),
                    _field("routing_number", fmt.routing_number),
                ),
            )
            for _, fmt in sorted(FORMATS.items())
        ]

    def bank_names(self, currency: str | None = None) -> list[str]:
        """The banks known for ``currency`` (all currencies, de-duplicated, when None), sorted."""
        if currency is None:
            return sorted({name for names in BANK_NAMES.values() for name in names})
        code = _currency(currency, "currency_id")
        if code not in BANK_NAMES:
            raise UnknownCurrency(f"No banks known for currency {code!r}", param="currency_id")
        return sorted(BANK_NAMES[code])

    # --- validation -------------------------------------------------------------------------

    def validate_bank_account(self, details: BankAccountDetails) -> BankAccountDetails:
        """``details`` checked against its currency's format and normalized.

        Names are NFC-normalized and trimmed; codes lose their spaces and separators and are
        upper-cased (an IBAN in compact form, a sort code as 6 digits, a Canadian routing number
        in its 9-digit electronic form). Raises ``UnknownCurrency`` (param ``currency_id``) for
        a currency without a format and ``ValidationFailed`` naming the first failing field.
        """
        fmt = _format_for(details.currency)
        return BankAccountDetails(
            bank_name=_text(details.bank_name, "bank_name", BANK_NAME),
            account_name=_text(details.account_name, "account_name", ACCOUNT_NAME),
            account_number=_code(details.account_number, "account_number", fmt.account_number, fmt),
            routing_number=_code(details.routing_number, "routing_number", fmt.routing_number, fmt),
            currency=fmt.currency,
        )

    # --- where money comes in ---------------------------------------------------------------

    def deposit_instructions(self, currency: str, reference: str) -> list[PaymentInstruction]:
        """The sandbox collection account(s) for ``currency``; the payer quotes ``reference``."""
        code = _currency(currency, "currency_id")
        accounts = COLLECTION_ACCOUNTS.get(code)
        if not accounts:
            raise UnknownCurrency(
                f"No deposit instructions for currency {code!r}", param="currency_id"
            )
        ref = _sanitize_reference(reference) if isinstance(reference, str) else ""
        account_name = f"{self._holder_name} — ref {ref}" if ref else self._holder_name
        if len(account_name) > TEXT_MAX_LENGTH:
            account_name = account_name[: TEXT_MAX_LENGTH - 1].rstrip() + "…"
        return [self._instruction(account, account_name) for account in accounts]

    @staticmethod
    def _instruction(account: CollectionAccount, account_name: str) -> PaymentInstruction:
        number = _iban(account.iban) if account.iban is not None else account.account_number
        return PaymentInstruction(
            bank_name=account.bank_name,
            account_name=account_name,
            account_number=number,
            routing_number=account.routing_number,
        )

    def virtual_account_details(self, currency: str, seed: str) -> VirtualAccountDetails:
        """Coordinates of a new virtual account in ``currency``, derived from ``seed`` alone.

        The same seed always gives the same coordinates. Different seeds give different numbers
        except by hash collision, which for the short UK account number (8 digits) is not
        negligible over many accounts: the caller keeps virtual account numbers unique and
        retries with another seed on a clash. Raises ``UnknownCurrency`` (param
        ``source_currency``) for a currency without a virtual account program.
        """
        code = _currency(currency, "source_currency")
        program = VIRTUAL_ACCOUNT_PROGRAMS.get(code)
        if program is None:
            offered = ", ".join(sorted(VIRTUAL_ACCOUNT_PROGRAMS))
            raise UnknownCurrency(
                f"Virtual accounts are not offered in {code!r} (offered: {offered})",
                param="source_currency",
            )
        account_code = self._account_code(code, program, seed)
        iban = None
        if program.iban_country is not None:
            iban = _iban(
                IbanParts(
                    program.iban_country,
                    program.iban_bank_code,
                    account_code,
                    program.sort_code or "",
                )
            )
        return VirtualAccountDetails(
            account_name=self._holder_name,
            bank_name=program.bank_name,
            account_number=account_code if program.expose_account_number else None,
            routing_number=program.routing_number,
            iban=iban,
            bic=program.bic,
            sort_code=program.sort_code,
        )

    @staticmethod
    def _account_code(currency: str, program: VirtualAccountProgram, seed: str) -> str:
        width = program.account_digits - len(program.account_prefix)
        digest = hashlib.sha256(f"treasury-sandbox-va:{currency}:{seed}".encode()).digest()
        number = int.from_bytes(digest, "big") % (10**width)
        return f"{program.account_prefix}{number:0{width}d}"

    # --- settlement ---------------------------------------------------------------------------

    def settlement_delay(self, kind: Settlement) -> timedelta:
        """How long after creation a movement of ``kind`` settles on its own."""
        return self._delays[Settlement(kind)]
