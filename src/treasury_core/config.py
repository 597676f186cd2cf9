"""Configuration of a treasury: which adapters, which currencies, which limits.

Plain data with defaults fit for the sandbox, built in code by an embedding application;
:func:`treasury_core.settings.config_from_env` builds one from ``TREASURY_*`` variables for the
command line. Nothing here reads the environment or opens a connection.

:class:`TreasuryConfig` holds the core's settings and names the adapters to use. Each adapter's
own settings are an :class:`AdapterSettings` model of the adapter's package, with its own
variable prefix (``TREASURY_STRIPE_``, ``TREASURY_VAULT_``, ``TREASURY_ECB_``, …); the config
carries their values by setting name in :attr:`TreasuryConfig.adapters` and an adapter's factory
reads its model with :meth:`TreasuryConfig.adapter_settings`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, TypeVar

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from treasury_core.currency import DEFAULT_CURRENCIES, DEFAULT_VBAN_CURRENCIES, CurrencyRegistry

DEFAULT_DATABASE_URL = "sqlite:///treasury.db"

#: The prefix of every setting's variable; a setting's name is its variable without it, in
#: lower case (``TREASURY_STRIPE_API_KEY`` is ``stripe_api_key``).
VARIABLE_PREFIX = "TREASURY_"

#: The bundled adapters' and the HTTP app's settings, which :class:`TreasuryConfig` takes as
#: keyword arguments (``TreasuryConfig(stripe_api_key=...)``, ``TreasuryConfig(pool_size=4)``)
#: and files under :attr:`TreasuryConfig.adapters`, where the owner's own model reads and
#: checks them. A third party's settings go in ``adapters=`` directly.
ADAPTER_KEYWORDS = frozenset(
    {
        # treasury_sqlalchemy's SqlSettings.
        "pool_size",
        # treasury_aiohttp's AppSettings.
        "max_body_bytes",
        "body_timeout_seconds",
        "bank_statement_max_bytes",
        "rate_limit_per_second",
        "rate_limit_burst",
        "auth_failure_limit_per_second",
        "auth_failure_limit_burst",
        "rate_limit_redis_url",
        "rate_limit_redis_timeout_seconds",
        "form_key",
        "frame_ancestors",
        "event_backlog_warning_seconds",
        # The adapters' own models.
        "stripe_api_key",
        "stripe_api_base",
        "stripe_webhook_secret",
        "stripe_timeout_seconds",
        "stripe_max_threads",
        "vault_key",
        "vault_old_keys",
        "settlement_delays_seconds",
        "bank_batch_booking",
        "ecb_fetch",
        "ecb_url",
        "ecb_file",
        "ecb_markup_bps",
        "ecb_max_age_days",
    }
)

Settings = TypeVar("Settings", bound="AdapterSettings")


def from_json(value: object) -> object:
    """A table setting's value: a variable's JSON text parsed, anything else as it is.

    For an :class:`AdapterSettings` table field: ``field_validator("fees", mode="before")
    (from_json)``; a value that is not JSON is refused as the core's tables are.
    """
    if isinstance(value, str):
        try:
            return pydantic_core.from_json(value)
        except ValueError as exc:
            raise PydanticCustomError(
                "json_invalid", "Invalid JSON: {error}", {"error": str(exc)}
            ) from None
    return value


def split_items(value: object) -> object:
    """A list setting's value: a variable's items, separated by commas or spaces, as a tuple;
    anything else as it is (for an :class:`AdapterSettings` list field, like :func:`from_json`).
    """
    if isinstance(value, str):
        return tuple(item for item in value.replace(",", " ").split() if item)
    return value


class AdapterSettings(BaseModel):
    """An adapter's own settings: one model per adapter, in the adapter's package.

    Subclasses set :attr:`env_prefix` (``"TREASURY_STRIPE_"``); each field is read from the
    variable named by the prefix and the field (``api_key`` → ``TREASURY_STRIPE_API_KEY``)
    by :func:`treasury_core.settings.config_from_env`, with the core's parsing rules (strict
    booleans, finite numbers). A plugin lists its models in the ``treasury_settings_models``
    hook; its factories read them with :meth:`TreasuryConfig.adapter_settings`. Values that
    come from a variable arrive as strings: a table or list field parses them itself (a
    ``mode="before"`` validator).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    #: The variables' common prefix, ``TREASURY_`` and the adapter's part, ending in ``_``.
    env_prefix: ClassVar[str] = VARIABLE_PREFIX
    #: Fields whose values an error message never repeats, besides the ``SecretStr`` ones (a
    #: URL that may hold a password).
    secret_fields: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def setting_name(cls, field: str) -> str:
        """The name under which ``field`` is kept in :attr:`TreasuryConfig.adapters`."""
        return (cls.env_prefix.removeprefix(VARIABLE_PREFIX) + field).lower()

    @classmethod
    def variable(cls, field: str) -> str:
        """The environment variable of ``field`` (``TREASURY_STRIPE_API_KEY``)."""
        return (cls.env_prefix + field).upper()

    @classmethod
    def variables(cls) -> frozenset[str]:
        """Every variable this model reads."""
        return frozenset(cls.variable(field) for field in cls.model_fields)

    def missing(self, config: TreasuryConfig) -> list[str]:
        """What ``config`` requires of these settings and they lack, one line per setting
        naming its variable (a Stripe key when ``config`` picks the ``stripe`` provider);
        :func:`~treasury_core.settings.config_from_env` names them with the rest. None here."""
        return []


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
    fx_rates: str = Field(default="sandbox", description="FX rates adapter name.")
    fx_max_age_seconds: float = Field(
        default=300, gt=0, description="A rate older than this is refused (nothing moves)."
    )
    withdrawal_fees: dict[str, tuple[int, int]] = Field(
        default_factory=lambda: {"*": (0, 0)},
        description="Per currency (or '*'): (fixed minor units, basis points) per withdrawal.",
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
    vault: str = Field(default="aesgcm", description="Card vault adapter name.")
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
    adapters: Mapping[str, Any] = Field(
        default_factory=dict,
        repr=False,
        description="The adapters' own settings by setting name (``stripe_api_key``, "
        "``acme_region``); given as a list of their models (``[StripeSettings(api_key=...)]``) "
        "too. Each adapter's model checks its own when the adapter is built "
        "(:meth:`adapter_settings`); left out of the repr, as they hold secrets.",
    )

    @model_validator(mode="before")
    @classmethod
    def _file_adapter_settings(cls, data: Any) -> Any:
        # adapters= takes the adapters' models as well as their values by name, and
        # TreasuryConfig(stripe_api_key=...) keeps working: the bundled adapters' settings are
        # filed with the other adapters' values, a keyword winning over the same name there.
        if not isinstance(data, Mapping):
            return data
        given = data.get("adapters")
        if not ADAPTER_KEYWORDS.intersection(data) and not isinstance(given, list | tuple):
            return data
        values = dict(data)
        values.pop("adapters", None)
        adapters: dict[str, Any] = {}
        if isinstance(given, list | tuple):
            for settings in given:
                if not isinstance(settings, AdapterSettings):
                    raise ValueError("adapters: a list holds AdapterSettings models only")
                dumped = settings.model_dump(exclude_unset=True)
                adapters.update({settings.setting_name(k): v for k, v in dumped.items()})
        elif given is not None:
            adapters.update(given)
        for name in ADAPTER_KEYWORDS.intersection(data):
            adapters[name] = values.pop(name)
        return {**values, "adapters": adapters}

    @model_validator(mode="after")
    def _lease_outlasts_a_send(self) -> TreasuryConfig:
        # A send still running when its lease ran out could be sent again by another worker.
        if self.delivery_lease_seconds <= 2 * self.webhook_timeout_seconds:
            raise ValueError(
                "delivery_lease_seconds must be more than twice webhook_timeout_seconds"
            )
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

    def adapter_settings(self, model: type[Settings]) -> Settings:
        """``model`` (an adapter's :class:`AdapterSettings`) from this config's values of its
        prefix, the model's defaults for the rest.

        Raises :class:`pydantic.ValidationError` when a value is refused: a config built in
        code is checked here, when its adapter is built; one from the environment was checked
        by :func:`~treasury_core.settings.config_from_env`, naming the variable.
        """
        fields = {model.setting_name(field): field for field in model.model_fields}
        return model.model_validate(
            {fields[name]: value for name, value in self.adapters.items() if name in fields}
        )

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
