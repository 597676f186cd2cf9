"""The ``TREASURY_*`` environment variables, read into a :class:`TreasuryConfig`.

One variable per setting, named after it (``max_amount`` → ``TREASURY_MAX_AMOUNT``). The core's
settings are read by one pydantic-settings model, :class:`TreasurySettings`; each adapter's by
its own :class:`~treasury_core.config.AdapterSettings` model (``TREASURY_STRIPE_*``,
``TREASURY_VAULT_*``, ``TREASURY_ECB_*``, …, listed by the plugins'
``treasury_settings_models``), read through pydantic-settings with the same rules. The formats:

- booleans: ``true``/``false``, ``1``/``0``, ``yes``/``no``, ``on``/``off`` (any case) and
  nothing else: ``'False '``, ``flase`` or ``disabled`` are refused, never taken as "on";
- numbers: as Python writes them; ``inf`` and ``nan`` are refused;
- lists (``TREASURY_CURRENCIES``, ``TREASURY_VBAN_CURRENCIES``, ``TREASURY_VAULT_OLD_KEYS``,
  ``TREASURY_FRAME_ANCESTORS``): items separated by commas or spaces;
- tables (``TREASURY_WITHDRAWAL_FEES``, ``TREASURY_CURRENCY_EXPONENTS``,
  ``TREASURY_MIN_AMOUNTS``, ``TREASURY_SETTLEMENT_DELAYS_SECONDS``,
  ``TREASURY_PAYMENT_DELAYS_SECONDS``, ``TREASURY_BANK_ACCOUNTS``): a JSON object, e.g.
  ``{"*": [0, 0], "EUR": [25, 50]}``.

A value that does not parse, or that the config or an adapter's model refuses, raises
:class:`BadSetting` with one line naming the variable and the value (not a secret's); settings
that are required but missing are all named at once, one per line. A ``TREASURY_*`` variable
that neither the config, an adapter's model nor a plugin reads (a typo) is warned about, once
per process, with the closest known name. This module reads the process environment and nothing
else: no ``.env`` file, no secrets directory."""

from __future__ import annotations

import difflib
import functools
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from functools import partial
from typing import TYPE_CHECKING, Any, Self, TypeVar

from pydantic import Json, ValidationError, field_validator
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.sources.utils import parse_env_vars

from treasury_core.config import AdapterSettings, TreasuryConfig
from treasury_core.errors import TreasuryError

if TYPE_CHECKING:
    import pluggy

PREFIX = "TREASURY_"

#: Variables of the project that are not settings of the treasury: the command line's.
COMMAND_VARIABLES = frozenset({"TREASURY_LOG_FORMAT"})

#: The test suite's and the benchmarks' variables (``TREASURY_TEST_POSTGRES_URL``,
#: ``TREASURY_BENCH_POSTGRES_URL``, …): never warned about.
TEST_PREFIXES = ("TREASURY_TEST_", "TREASURY_BENCH_")

logger = logging.getLogger("treasury.settings")

#: The unknown variables already warned about in this process.
_WARNED: set[str] = set()

#: The mapping :meth:`TreasurySettings.from_environ` reads instead of ``os.environ``.
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("treasury_environ", default=None)

#: Settings whose values are secrets: an error names the variable but never repeats the value.
_SECRET_FIELDS = frozenset({"database_url"})


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


class _EnvironmentReader(BaseSettings):
    """pydantic-settings reading the environment (or a given mapping) and nothing else."""

    model_config = SettingsConfigDict(
        case_sensitive=False,
        # Every variable is a plain string: tables are JSON by their type (Json[...]) or by a
        # model's own validator, lists are split by a validator, so no value is decoded twice.
        enable_decoding=False,
        # TREASURY_LOG_FORMAT (the command line) and TREASURY_TEST_POSTGRES_URL (the tests) are
        # not settings of the treasury.
        extra="ignore",
        # An infinite cache lifetime or poll interval would pass every "greater than 0".
        allow_inf_nan=False,
        frozen=True,
    )

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
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Self:
        """The settings from ``environ``, or from the process environment when ``None``."""
        token = _ENVIRON.set(environ)
        try:
            return cls()
        finally:
            _ENVIRON.reset(token)


class TreasurySettings(_EnvironmentReader):
    """Every :class:`TreasuryConfig` setting as a ``TREASURY_*`` variable; unset ones stay unset.

    Values are only parsed here (a boolean, a number, JSON); the limits (``max_amount`` above 0,
    a lease longer than twice the timeout, …) are :class:`TreasuryConfig`'s, checked when
    :func:`config_from_env` builds it. ``tests/unit/test_config.py`` checks that the two models
    have the same fields.
    """

    model_config = SettingsConfigDict(env_prefix=PREFIX)

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
    bank_rail: str | None = None
    bank_debtor_name: str | None = None
    bank_debtor_iban: str | None = None
    bank_debtor_bic: str | None = None
    bank_accounts: Json[dict[str, tuple[str, ...]]] | None = None
    fx_rates: str | None = None
    fx_max_age_seconds: float | None = None
    withdrawal_fees: Json[dict[str, tuple[int, int]]] | None = None
    api_key_cache_seconds: float | None = None
    card_provider: str | None = None
    payment_delays_seconds: Json[dict[str, float]] | None = None
    job_poll_seconds: float | None = None
    card_reconciliation_seconds: float | None = None
    card_reconciliation_window_seconds: float | None = None
    vault: str | None = None
    tokenization_ttl_seconds: int | None = None
    public_url: str | None = None
    allow_private_destinations: bool | None = None
    webhook_sender: str | None = None
    webhook_timeout_seconds: float | None = None
    delivery_lease_seconds: float | None = None
    delivery_batch_size: int | None = None
    delivery_concurrency: int | None = None
    delivery_concurrency_per_destination: int | None = None
    event_retention_days: int | None = None
    dashboard: bool | None = None
    dashboard_idle_timeout_seconds: float | None = None

    _split_lists = field_validator("currencies", "vban_currencies", mode="before")(_items)


def _variable(field: str) -> str:
    return PREFIX + field.upper()


def _core_secret(field: str) -> bool:
    return field in _SECRET_FIELDS


def _one_line(
    error: ErrorDetails,
    environ: Mapping[str, str],
    from_env: set[str],
    variable: Callable[[str], str] = _variable,
    secret: Callable[[str], bool] = _core_secret,
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
    name = variable(field)
    raw = next((v for k, v in environ.items() if k.upper() == name), "")
    shown = "(hidden)" if secret(field) else repr(raw)
    return f"{name}={shown}", problem


def _bad(
    exc: ValidationError,
    environ: Mapping[str, str],
    from_env: set[str],
    model: type[AdapterSettings] | None = None,
) -> BadSetting:
    if model is None:
        name, problem = _one_line(exc.errors()[0], environ, from_env)
    else:
        name, problem = _one_line(
            exc.errors()[0], environ, from_env, model.variable, partial(_adapter_secret, model)
        )
    if not name:
        return BadSetting(f"The settings are not valid: {problem}")
    return BadSetting(f"{name} is not valid: {problem}")


def _adapter_secret(model: type[AdapterSettings], field: str) -> bool:
    # An adapter marks its secrets by their type (SecretStr, alone or in a list) or by name.
    return field in model.secret_fields or "SecretStr" in str(model.model_fields[field].annotation)


Settings = TypeVar("Settings", bound=AdapterSettings)


@functools.cache
def _reader(model: type[AdapterSettings]) -> type[_EnvironmentReader]:
    # The adapter's model, read by pydantic-settings: its fields, validators and prefix, with
    # the core's reading rules. Built on first use, so the adapter's module never imports
    # pydantic-settings (an embedding application that never reads the environment).
    config = SettingsConfigDict(env_prefix=model.env_prefix)
    return type(
        f"{model.__name__}FromEnvironment", (model, _EnvironmentReader), {"model_config": config}
    )


def _set_fields(model: type[AdapterSettings], environ: Mapping[str, str] | None) -> dict[str, Any]:
    """The fields of ``model`` whose variables are set, checked by the model."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    try:
        read = _reader(model).from_environ(environ)
    except ValidationError as exc:
        raise _bad(exc, env, set(model.model_fields), model) from None
    return read.model_dump(exclude_unset=True)


def read_adapter_settings(
    model: type[Settings], environ: Mapping[str, str] | None = None
) -> Settings:
    """An adapter's settings from its variables in ``environ`` (``os.environ`` by default).

    Raises :class:`BadSetting` (one line naming the variable and, unless a secret, its value)
    when a variable does not parse or the model refuses it.
    """
    return model.model_validate(_set_fields(model, environ))


def _adapter_values(
    models: Iterable[type[AdapterSettings]], environ: Mapping[str, str] | None
) -> dict[str, Any]:
    """The set variables of every model, by setting name (what ``TreasuryConfig.adapters``
    holds)."""
    return {
        model.setting_name(field): value
        for model in models
        for field, value in _set_fields(model, environ).items()
    }


def _missing(lines: list[str]) -> BadSetting:
    if len(lines) == 1:
        return BadSetting(f"The settings are not valid: {lines[0]}")
    listed = "".join(f"\n- {line}" for line in lines)
    return BadSetting(
        f"The settings are not valid: {len(lines)} required settings are missing:{listed}"
    )


def known_variables(plugins: pluggy.PluginManager | None = None) -> frozenset[str]:
    """Every ``TREASURY_*`` name something reads: a setting's, an adapter's settings model's
    (``treasury_settings_models``), a plugin's own (``treasury_settings_names``), the command
    line's."""
    if plugins is None:
        return _installed_variables()
    from treasury_core.plugins import settings_models, settings_names

    fields = {_variable(field) for field in TreasurySettings.model_fields}
    adapters = {name for model in settings_models(plugins) for name in model.variables()}
    return frozenset(fields | adapters | settings_names(plugins) | COMMAND_VARIABLES)


@functools.cache
def _installed_plugins() -> pluggy.PluginManager:
    # The installed plugins do not change while the process runs; loading their entry points
    # once is enough however often the config is read.
    from treasury_core.plugins import make_plugin_manager

    return make_plugin_manager()


@functools.cache
def _installed_variables() -> frozenset[str]:
    return known_variables(_installed_plugins())


def unknown_variables(
    environ: Mapping[str, str], known: Iterable[str]
) -> list[tuple[str, str | None]]:
    """``(name, closest known name or None)`` for each ``TREASURY_*`` variable of ``environ``
    nothing reads, in sorted order; the tests' and the benchmarks' (``TREASURY_TEST_*``,
    ``TREASURY_BENCH_*``) are left out."""
    names = {name.upper() for name in known}
    unknown = sorted(
        name
        for name in environ
        if name.upper().startswith(PREFIX)
        and not name.upper().startswith(TEST_PREFIXES)
        and name.upper() not in names
    )
    choices = sorted(names)
    return [
        (name, next(iter(difflib.get_close_matches(name.upper(), choices, n=1)), None))
        for name in unknown
    ]


def warn_unknown_variables(
    environ: Mapping[str, str] | None = None, plugins: pluggy.PluginManager | None = None
) -> list[tuple[str, str | None]]:
    """Log a warning (``treasury.settings``) for each unknown ``TREASURY_*`` variable not yet
    warned about in this process, naming the closest known one; returns what it warned about."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    if not any(name.upper().startswith(PREFIX) for name in env):
        return []
    fresh = [
        (name, closest)
        for name, closest in unknown_variables(env, known_variables(plugins))
        if name not in _WARNED
    ]
    for name, closest in fresh:
        _WARNED.add(name)
        hint = f"; did you mean {closest}?" if closest else ""
        logger.warning("%s is not a treasury setting and is ignored%s", name, hint)
    return fresh


def config_from_env(
    environ: Mapping[str, str] | None = None,
    *,
    plugins: pluggy.PluginManager | None = None,
    also_required: Callable[[TreasuryConfig], Iterable[str]] | None = None,
    **overrides: Any,
) -> TreasuryConfig:
    """A config from ``TREASURY_*`` variables (``os.environ`` by default), then ``overrides``.

    The core's settings come from :class:`TreasurySettings`, each adapter's from the settings
    models ``plugins`` list (``treasury_settings_models``; the installed plugins when
    ``None``), into :attr:`TreasuryConfig.adapters`. Overrides that are ``None`` are ignored,
    so a command's unset option leaves the variable in force. Unknown ``TREASURY_*`` variables
    are warned about first (:func:`warn_unknown_variables`, asking ``plugins`` for theirs).
    Raises :class:`BadSetting` (one line, naming the variable and value) when a variable does
    not parse or the resulting config is refused; when required settings are missing, the one
    error names every one of them, the adapters' settings' own
    (:meth:`~treasury_core.config.AdapterSettings.missing`: a Stripe key with the ``stripe``
    provider, …) and what ``also_required`` says the config lacks (one line each).
    """
    from treasury_core.plugins import settings_models

    env: Mapping[str, str] = os.environ if environ is None else environ
    warn_unknown_variables(env, plugins)
    models = settings_models(_installed_plugins() if plugins is None else plugins)
    try:
        settings = TreasurySettings.from_environ(environ)
    except ValidationError as exc:
        raise _bad(exc, env, set(TreasurySettings.model_fields)) from None
    values = settings.model_dump(exclude_unset=True)
    adapters = _adapter_values(models, environ)
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        config = TreasuryConfig.model_validate({**values, "adapters": adapters, **given})
        # An override of an adapter's setting (stripe_api_key=...) is checked by its model.
        adapter_settings = [config.adapter_settings(model) for model in models]
    except ValidationError as exc:
        raise _bad(exc, env, set(values) - set(given)) from None
    missing = [line for read in adapter_settings for line in read.missing(config)]
    missing += also_required(config) if also_required else ()
    if missing:
        # A caller asking the plugins' treasury_missing_settings may repeat a line.
        raise _missing(list(dict.fromkeys(missing)))
    return config
