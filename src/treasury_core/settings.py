"""The ``TREASURY_*`` environment variables, read into a :class:`TreasuryConfig`.

One variable per setting, named after it (``pool_size`` → ``TREASURY_POOL_SIZE``), read by one
pydantic-settings model, :class:`TreasurySettings`. The formats:

- booleans: ``true``/``false``, ``1``/``0``, ``yes``/``no``, ``on``/``off`` (any case) and
  nothing else: ``'False '``, ``flase`` or ``disabled`` are refused, never taken as "on";
- numbers: as Python writes them; ``inf`` and ``nan`` are refused;
- lists (``TREASURY_CURRENCIES``, ``TREASURY_VBAN_CURRENCIES``, ``TREASURY_VAULT_OLD_KEYS``,
  ``TREASURY_FRAME_ANCESTORS``): items separated by commas or spaces;
- tables (``TREASURY_WITHDRAWAL_FEES``, ``TREASURY_CURRENCY_EXPONENTS``,
  ``TREASURY_MIN_AMOUNTS``, ``TREASURY_SETTLEMENT_DELAYS_SECONDS``,
  ``TREASURY_PAYMENT_DELAYS_SECONDS``, ``TREASURY_BANK_ACCOUNTS``): a JSON object, e.g.
  ``{"*": [0, 0], "EUR": [25, 50]}``.

A value that does not parse, or that the config refuses, raises :class:`BadSetting` with one
line naming the variable and the value. This module reads the process environment and nothing
else: no ``.env`` file, no secrets directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from pydantic import Json, SecretStr, ValidationError, field_validator
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.sources.utils import parse_env_vars

from treasury_core.config import TreasuryConfig
from treasury_core.errors import TreasuryError

PREFIX = "TREASURY_"

#: The mapping :meth:`TreasurySettings.from_environ` reads instead of ``os.environ``.
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("treasury_environ", default=None)

#: Settings whose values are secrets: an error names the variable but never repeats the value.
_SECRET_FIELDS = frozenset(
    {
        "vault_key",
        "vault_old_keys",
        "form_key",
        "database_url",
        "rate_limit_redis_url",
        "stripe_api_key",
        "stripe_webhook_secret",
    }
)


class BadSetting(TreasuryError):
    """A ``TREASURY_*`` variable (or an override) holds a value the treasury cannot use.

    Raised before anything is opened or written; the message is one line that names the variable
    and, unless it is a secret, its value.
    """

    default_code = "bad_setting"


def _items(value: object) -> object:
    # Lists were comma- (currencies) or space-separated (origins) before this model; either works.
    if isinstance(value, str):
        return tuple(item for item in value.replace(",", " ").split() if item)
    return value


class TreasurySettings(BaseSettings):
    """Every :class:`TreasuryConfig` setting as a ``TREASURY_*`` variable; unset ones stay unset.

    Values are only parsed here (a boolean, a number, JSON); the limits (``pool_size`` 1 to 128,
    a lease longer than twice the timeout, …) are :class:`TreasuryConfig`'s, checked when
    :func:`config_from_env` builds it. ``tests/unit/test_config.py`` checks that the two models
    have the same fields.
    """

    model_config = SettingsConfigDict(
        env_prefix=PREFIX,
        case_sensitive=False,
        # Every variable is a plain string: tables are JSON by their type (Json[...]), lists
        # are split by _items, so no value is decoded twice.
        enable_decoding=False,
        # TREASURY_LOG_FORMAT (the command line) and TREASURY_TEST_POSTGRES_URL (the tests) are
        # not settings of the treasury.
        extra="ignore",
        # An infinite cache lifetime or poll interval would pass every "greater than 0".
        allow_inf_nan=False,
        frozen=True,
    )

    database_url: str | None = None
    sandbox: bool | None = None
    storage: str | None = None
    clock: str | None = None
    ids: str | None = None
    currencies: tuple[str, ...] | None = None
    vban_currencies: tuple[str, ...] | None = None
    currency_exponents: Json[dict[str, int]] | None = None
    max_amount: int | None = None
    min_amounts: Json[dict[str, int]] | None = None
    idempotency_ttl_seconds: int | None = None
    idempotency_lease_seconds: int | None = None
    pool_size: int | None = None
    bank_rail: str | None = None
    bank_debtor_name: str | None = None
    bank_debtor_iban: str | None = None
    bank_debtor_bic: str | None = None
    bank_accounts: Json[dict[str, tuple[str, ...]]] | None = None
    bank_batch_booking: bool | None = None
    bank_statement_max_bytes: int | None = None
    fx_rates: str | None = None
    fx_max_age_seconds: float | None = None
    withdrawal_fees: Json[dict[str, tuple[int, int]]] | None = None
    settlement_delays_seconds: Json[dict[str, float]] | None = None
    api_key_cache_seconds: float | None = None
    card_provider: str | None = None
    stripe_api_key: SecretStr | None = None
    stripe_api_base: str | None = None
    stripe_webhook_secret: SecretStr | None = None
    stripe_timeout_seconds: float | None = None
    stripe_max_threads: int | None = None
    payment_delays_seconds: Json[dict[str, float]] | None = None
    job_poll_seconds: float | None = None
    card_reconciliation_seconds: float | None = None
    card_reconciliation_window_seconds: float | None = None
    max_body_bytes: int | None = None
    body_timeout_seconds: float | None = None
    rate_limit_per_second: float | None = None
    rate_limit_burst: int | None = None
    rate_limit_redis_url: str | None = None
    rate_limit_redis_timeout_seconds: float | None = None
    auth_failure_limit_per_second: float | None = None
    auth_failure_limit_burst: int | None = None
    vault: str | None = None
    vault_key: SecretStr | None = None
    vault_old_keys: tuple[SecretStr, ...] | None = None
    tokenization_ttl_seconds: int | None = None
    public_url: str | None = None
    form_key: SecretStr | None = None
    allow_private_destinations: bool | None = None
    webhook_sender: str | None = None
    webhook_timeout_seconds: float | None = None
    delivery_lease_seconds: float | None = None
    delivery_batch_size: int | None = None
    delivery_concurrency: int | None = None
    delivery_concurrency_per_destination: int | None = None
    event_retention_days: int | None = None
    event_backlog_warning_seconds: float | None = None
    frame_ancestors: tuple[str, ...] | None = None
    dashboard: bool | None = None
    dashboard_idle_timeout_seconds: float | None = None

    _split_lists = field_validator(
        "currencies", "vban_currencies", "vault_old_keys", "frame_ancestors", mode="before"
    )(_items)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only the environment: a ``.env`` file or a secrets directory is never consulted."""
        environ = _ENVIRON.get()
        if environ is not None and isinstance(env_settings, EnvSettingsSource):
            # The source read os.environ when it was built; pointing it at the given mapping
            # keeps the same name matching and parsing for both.
            env_settings.env_vars = parse_env_vars(
                environ,
                env_settings.case_sensitive,
                env_settings.env_ignore_empty,
                env_settings.env_parse_none_str,
            )
        return (env_settings,)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> TreasurySettings:
        """The settings from ``environ``, or from the process environment when ``None``."""
        token = _ENVIRON.set(environ)
        try:
            return cls()
        finally:
            _ENVIRON.reset(token)


def _variable(field: str) -> str:
    return PREFIX + field.upper()


def _one_line(
    error: ErrorDetails, environ: Mapping[str, str], from_env: set[str]
) -> tuple[str, str]:
    """(the variable and value, or the setting, or "" for a rule across settings; what is wrong)
    for the first error of a validation."""
    if not error["loc"]:
        # A rule across settings (the delivery lease against the webhook timeout).
        return "", error["msg"].removeprefix("Value error, ")
    field = str(error["loc"][0])
    where = ".".join(str(part) for part in error["loc"][1:])
    problem = error["msg"] + (f" (at {where})" if where else "")
    if field not in from_env:
        return field, problem
    variable = _variable(field)
    raw = next((v for k, v in environ.items() if k.upper() == variable), "")
    shown = "(hidden)" if field in _SECRET_FIELDS else repr(raw)
    return f"{variable}={shown}", problem


def _bad(exc: ValidationError, environ: Mapping[str, str], from_env: set[str]) -> BadSetting:
    name, problem = _one_line(exc.errors()[0], environ, from_env)
    if not name:
        return BadSetting(f"The settings are not valid: {problem}")
    return BadSetting(f"{name} is not valid: {problem}")


def config_from_env(environ: Mapping[str, str] | None = None, **overrides: Any) -> TreasuryConfig:
    """A config from ``TREASURY_*`` variables (``os.environ`` by default), then ``overrides``.

    Overrides that are ``None`` are ignored, so a command's unset option leaves the variable in
    force. Raises :class:`BadSetting` (one line, naming the variable and value) when a variable
    does not parse or the resulting config is refused.
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    try:
        settings = TreasurySettings.from_environ(environ)
    except ValidationError as exc:
        raise _bad(exc, env, set(TreasurySettings.model_fields)) from None
    values = settings.model_dump(exclude_unset=True)
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return TreasuryConfig(**{**values, **given})
    except ValidationError as exc:
        raise _bad(exc, env, set(values) - set(given)) from None
