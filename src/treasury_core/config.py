"""Configuration of a treasury: which adapters, which currencies, which limits.

Plain data with defaults fit for the sandbox, built in code by an embedding application;
:func:`treasury_core.settings.config_from_env` builds one from ``TREASURY_*`` variables for the
command line. Nothing here reads the environment or opens a connection.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    ValidationInfo,
    model_validator,
)

from treasury_core.currency import DEFAULT_CURRENCIES, DEFAULT_VBAN_CURRENCIES, CurrencyRegistry

DEFAULT_DATABASE_URL = "sqlite:///treasury.db"

#: The validation context under which a config lacking required settings is still built, so
#: that :meth:`TreasuryConfig.missing_settings` can name them all together with what plugins
#: and the command line require (``config_from_env`` does; it then refuses the config).
DEFER_MISSING: dict[str, Any] = {"defer_missing_settings": True}

#: An origin allowed to frame the hosted pages (``https://shop.example``, ``https://*.example``):
#: a scheme, a host and an optional port, nothing that could add a CSP directive.
FrameAncestor = Annotated[
    str, StringConstraints(pattern=r"^https?://(\*\.)?[A-Za-z0-9.-]+(:[0-9]{1,5})?$")
]


class TreasuryConfig(BaseModel):
    """Everything :func:`treasury_core.bootstrap` needs to assemble a treasury."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL, description="sqlite:///…, postgresql://… or memory://"
    )
    sandbox: bool = Field(default=True, description="Sandbox mode: sandbox adapters and controls.")
    storage: str | None = Field(
        default=None, description="Storage adapter name; inferred from the URL."
    )
    clock: str | None = Field(
        default=None, description="Clock name; default sandbox/system by mode."
    )
    ids: str = "ulid"
    currencies: tuple[str, ...] = Field(default=DEFAULT_CURRENCIES, min_length=1)
    vban_currencies: tuple[str, ...] = DEFAULT_VBAN_CURRENCIES
    currency_exponents: dict[str, int] = Field(default_factory=dict)
    max_amount: int = Field(
        default=99_999_999_999, gt=0, description="Largest amount, minor units."
    )
    min_amounts: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict,
        description="Smallest payment intent amount per currency (minor units); entries "
        "override the default table (USD 50, EUR 50, GBP 30, JPY 50, …; see payments.md).",
    )
    idempotency_ttl_seconds: int = Field(default=24 * 3600, gt=0)
    idempotency_lease_seconds: int = Field(default=60, gt=0)
    pool_size: int = Field(default=8, ge=1, le=128, description="Connections/threads for storage.")
    bank_rail: str = Field(default="sandbox", description="Bank rail adapter name.")
    bank_debtor_name: str | None = Field(
        default=None,
        description="The files rail's account holder: the debtor of its payment files.",
    )
    bank_debtor_iban: str | None = Field(
        default=None, description="The files rail's own bank account (IBAN)."
    )
    bank_debtor_bic: str | None = Field(
        default=None, description="The BIC of the files rail's bank (optional in SEPA)."
    )
    bank_accounts: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description="The treasury's own bank accounts by currency (IBANs or account numbers): "
        "the only accounts whose statements are imported. The debtor IBAN is always one "
        "(EUR).",
    )
    bank_batch_booking: bool = Field(
        default=True,
        description="Ask the bank to book each payment file as one debit (pain.001 BtchBookg) "
        "rather than one debit per transfer.",
    )
    bank_statement_max_bytes: int = Field(
        default=5 * 1024 * 1024,
        gt=0,
        description="Largest statement POST /api/v1/bank-statements accepts.",
    )
    fx_rates: str = Field(default="sandbox", description="FX rates adapter name.")
    fx_max_age_seconds: float = Field(
        default=300, gt=0, description="A rate older than this is refused (nothing moves)."
    )
    withdrawal_fees: dict[str, tuple[int, int]] = Field(
        default_factory=lambda: {"*": (0, 0)},
        description="Per currency (or '*'): (fixed minor units, basis points) per withdrawal.",
    )
    settlement_delays_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="Sandbox rail delays by kind (deposit, withdrawal, fx_transfer); "
        "decisions.md's defaults (24 h, 24 h, 60 s) otherwise.",
    )
    api_key_cache_seconds: float = Field(
        default=2.0,
        ge=0,
        description="How long a process reuses a successful API-key lookup; a key revoked in "
        "another process stops working within this time (0: look up every request).",
    )
    card_provider: str = Field(
        default="sandbox", description="Card provider adapter name (sandbox, stripe)."
    )
    stripe_api_key: SecretStr | None = Field(
        default=None,
        description="The Stripe secret key (sk_…) of the stripe card provider; required with it.",
    )
    stripe_api_base: str | None = Field(
        default=None,
        description="Stripe's API base URL, for a local fake such as localstripe; Stripe's own "
        "when unset. https://, or http:// to a loopback host only.",
    )
    stripe_webhook_secret: SecretStr | None = Field(
        default=None, description="Verifies Stripe's webhook signatures (whsec_…)."
    )
    stripe_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        allow_inf_nan=False,
        description="How long one HTTP request to Stripe may take (connecting, then each "
        "read) before it counts as a timeout; the SDK retries it twice.",
    )
    stripe_max_threads: int = Field(
        default=32,
        ge=1,
        description="The stripe card provider's own threads: how many Stripe calls may be in "
        "flight at once; more wait their turn, and no other work waits for them.",
    )
    payment_delays_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="Delays of payment jobs by kind (payout, payout_apply, chargeback_open, "
        "chargeback_resolve); 2 days, 1 hour, 1 day and 1 day otherwise.",
    )
    job_poll_seconds: float = Field(
        default=1.0, gt=0, description="How often `treasury serve` looks for due jobs (wall time)."
    )
    card_reconciliation_seconds: float = Field(
        default=3600.0,
        ge=0,
        description="How often the worker compares the card provider's recent charges with the "
        "records (business time; 0: never). Needs a provider that answers lookups.",
    )
    card_reconciliation_window_seconds: float = Field(
        default=48 * 3600.0,
        gt=0,
        description="How far back card reconciliation asks the provider for charges.",
    )
    max_body_bytes: int = Field(default=64 * 1024, gt=0)
    body_timeout_seconds: float = Field(
        default=30.0, gt=0, description="How long a client may take to send a request body (408)."
    )
    rate_limit_per_second: float = Field(
        default=100.0,
        ge=0,
        description="Requests per second each API key may make on average (0: no limit).",
    )
    rate_limit_burst: int = Field(
        default=200, ge=1, description="Requests an API key may make at once."
    )
    auth_failure_limit_per_second: float = Field(
        default=0.2,
        ge=0,
        description="Failed authentications (a wrong API key, a wrong dashboard sign-in) each "
        "client address may make per second on average before it is answered 429 without a "
        "lookup (0: no limit); kept in the rate limit's Redis when one is set.",
    )
    auth_failure_limit_burst: int = Field(
        default=20, ge=1, description="Failed authentications a client address may make at once."
    )
    rate_limit_redis_url: str | None = Field(
        default=None,
        pattern=r"^(rediss?|unix)://",
        description="Keep the rate limit's buckets in this Redis (redis://, rediss://, unix://; "
        "the `redis` extra), shared by every server process that names it; unset: a bucket per "
        "process, so N processes allow N times the limit.",
    )
    rate_limit_redis_timeout_seconds: float = Field(
        default=0.25,
        gt=0,
        le=60,
        description="How long a request waits for the rate limit's Redis (a free connection, "
        "connecting, the answer) before it is limited by the process's own bucket instead.",
    )
    vault: str = Field(default="aesgcm", description="Card vault adapter name.")
    vault_key: SecretStr | None = Field(
        default=None,
        description="The vault's key: 32 random bytes, base64 (url-safe or standard). Required "
        "outside sandbox mode; the sandbox falls back to a fixed, public test key.",
    )
    vault_old_keys: tuple[SecretStr, ...] = Field(
        default=(),
        description="Earlier vault keys, still used to open cards sealed with them (rotation).",
    )
    tokenization_ttl_seconds: int = Field(
        default=24 * 3600,
        gt=0,
        description="How long a payment method token intent accepts its card (business time).",
    )
    public_url: str | None = Field(
        default=None,
        description="The server's public base URL, for the URLs it hands out (hosted form, "
        "confirm endpoint); the request's own scheme and host otherwise.",
    )
    form_key: SecretStr | None = Field(
        default=None,
        description="Signs the hosted forms' CSRF tokens; every server process behind one "
        "address needs the same. Random per process when unset.",
    )
    allow_private_destinations: bool | None = Field(
        default=None,
        description="Whether callbacks may go to loopback, private and link-local addresses; "
        "by default only in sandbox mode.",
    )
    webhook_sender: str | None = Field(
        default=None,
        description="A webhook sender adapter by name (plugins' register_notifier); the "
        "aiohttp app's HTTP sender when unset.",
    )
    webhook_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="How long a webhook or callback receiver has to answer.",
    )
    delivery_lease_seconds: float = Field(
        default=60.0,
        gt=0,
        description="How long a worker holds a claimed delivery (real time); a worker that "
        "dies mid-send delays it this long. More than twice the webhook timeout.",
    )
    delivery_batch_size: int = Field(
        default=200,
        gt=0,
        description="How many due deliveries a worker claims, and records, in one transaction.",
    )
    delivery_concurrency: int = Field(
        default=256,
        gt=0,
        description="How many webhook and callback sends a worker process keeps in flight.",
    )
    delivery_concurrency_per_destination: int = Field(
        default=64,
        gt=0,
        description="How many of those may go to one destination (scheme, host and port) at "
        "once, so a slow or dead receiver cannot take the others' slots.",
    )
    event_retention_days: int = Field(
        default=30, gt=0, description="How long GET /api/v1/events shows an event (days)."
    )
    event_backlog_warning_seconds: float = Field(
        default=300.0,
        ge=0,
        description="The worker logs a warning when the oldest undelivered event is older "
        "than this (business time), at most once every 5 minutes, and a line when it "
        "recovers (0: never).",
    )
    dashboard: bool = Field(
        default=True,
        description="Whether the HTTP server serves the dashboard (/dashboard): sign-in with a "
        "company's secret key, then its payments, wallets, events and webhooks.",
    )
    dashboard_idle_timeout_seconds: float = Field(
        default=1800.0,
        gt=0,
        description="A dashboard session not used for this long (real time) is over; every "
        "session also ends 8 hours after sign-in.",
    )
    frame_ancestors: tuple[FrameAncestor, ...] = Field(
        default=(),
        description="Origins allowed to embed the hosted pages in an iframe (CSP "
        "frame-ancestors); the server's own origin always may.",
    )

    @model_validator(mode="after")
    def _lease_outlasts_a_send(self) -> TreasuryConfig:
        # A send still running when its lease ran out could be sent again by another worker.
        if self.delivery_lease_seconds <= 2 * self.webhook_timeout_seconds:
            raise ValueError(
                "delivery_lease_seconds must be more than twice webhook_timeout_seconds"
            )
        return self

    @model_validator(mode="after")
    def _required_settings_are_set(self, info: ValidationInfo) -> TreasuryConfig:
        # Refused here, before anything is opened, rather than at the first payment or export;
        # every missing one at once, so a deployment is not fixed one restart per setting.
        missing = self.missing_settings()
        if missing and not (info.context or {}).get("defer_missing_settings"):
            raise ValueError("; ".join(missing))
        return self

    @model_validator(mode="after")
    def _bank_accounts_are_accounts(self) -> TreasuryConfig:
        # A blank or malformed entry would never match a statement; refused at start rather
        # than at the first import. One account may be listed under several currencies: a
        # multi-currency account holds each of them (its statements say which per line).
        for currency, accounts in self.bank_accounts.items():
            if len(currency) != 3 or not currency.isascii() or not currency.isalpha():
                raise ValueError(f"bank_accounts: {currency!r} is not a currency code")
            for account in accounts:
                # IBANs and plain numbers, and the bank-code forms statements write
                # (``50880050/0194774600888``, ``123-456.78``).
                if _ACCOUNT_NUMBER.fullmatch(normalized_account(account)) is None:
                    raise ValueError(f"bank_accounts: {account!r} is not an account number")
        return self

    @model_validator(mode="after")
    def _stripe_base_is_private(self) -> TreasuryConfig:
        # The API key travels in every request's headers: plain HTTP only to a fake on this
        # machine (localstripe), never across a network.
        if self.stripe_api_base is not None:
            base = urllib.parse.urlsplit(self.stripe_api_base)
            host = base.hostname or ""
            loopback = host in ("localhost", "::1") or host.startswith("127.")
            if not (base.scheme == "https" or (base.scheme == "http" and loopback)):
                raise ValueError(
                    "TREASURY_STRIPE_API_BASE must be https:// unless its host is loopback"
                )
        return self

    def missing_settings(self) -> list[str]:
        """The settings this config's adapters require and it lacks, one line each naming the
        variable (a Stripe key with the ``stripe`` provider, the debtor with the files rail)."""
        missing = []
        if self.card_provider == "stripe" and self.stripe_api_key is None:
            missing.append("TREASURY_STRIPE_API_KEY is required when TREASURY_CARD_PROVIDER=stripe")
        if self.bank_rail == "files" and not (self.bank_debtor_name and self.bank_debtor_iban):
            missing.append(
                "TREASURY_BANK_DEBTOR_NAME and TREASURY_BANK_DEBTOR_IBAN are required when "
                "TREASURY_BANK_RAIL=files"
            )
        return missing

    @property
    def storage_name(self) -> str:
        """The storage adapter to use: the explicit one, or the one the URL's scheme implies."""
        if self.storage:
            return self.storage
        if self.database_url.startswith("memory:"):
            return "memory"
        return "sqlalchemy"

    @property
    def clock_name(self) -> str:
        """The clock: the explicit one, else ``sandbox`` in sandbox mode, ``system`` otherwise."""
        return self.clock or ("sandbox" if self.sandbox else "system")

    @property
    def private_destinations_allowed(self) -> bool:
        """Whether outbound callbacks may reach non-public addresses (sandbox: yes)."""
        if self.allow_private_destinations is None:
            return self.sandbox
        return self.allow_private_destinations

    def withdrawal_fee(self, currency: str) -> tuple[int, int]:
        """The (fixed, basis points) fee rule for withdrawals in ``currency``."""
        return self.withdrawal_fees.get(currency, self.withdrawal_fees.get("*", (0, 0)))

    def treasury_bank_accounts(self) -> dict[str, frozenset[str]]:
        """The treasury's own bank accounts, each to the currencies it holds: :attr:`bank_accounts`
        and the debtor IBAN (which always holds EUR, what its payment files pay), written
        without spaces and in upper case."""
        found: dict[str, set[str]] = {}
        for currency, accounts in self.bank_accounts.items():
            for account in accounts:
                found.setdefault(normalized_account(account), set()).add(currency.upper())
        if self.bank_debtor_iban:
            found.setdefault(normalized_account(self.bank_debtor_iban), set()).add("EUR")
        return {account: frozenset(currencies) for account, currencies in found.items()}

    def currency_registry(self) -> CurrencyRegistry:
        """The enabled currencies."""
        return CurrencyRegistry.from_codes(
            self.currencies, self.vban_currencies, exponents=self.currency_exponents
        )


#: What a configured bank account number may be made of, once normalized.
_ACCOUNT_NUMBER = re.compile(r"[A-Z0-9][A-Z0-9/.\-]*")


def normalized_account(account: str) -> str:
    """A bank account number as statements and configuration are compared: no white space,
    upper case."""
    return "".join(account.split()).upper()
