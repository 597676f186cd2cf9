"""Registers the ECB reference rates under ``ecb`` (``TREASURY_FX_RATES=ecb``).

Its settings are :class:`~treasury_ecb.settings.EcbSettings`, the ``TREASURY_ECB_*`` variables
(all of them in :data:`SETTINGS`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial

from treasury_core.config import AdapterSettings, TreasuryConfig
from treasury_core.plugins.hookspecs import FxRatesFactory, hookimpl
from treasury_core.ports import Clock, FxRates
from treasury_ecb.names import FETCH_SETTING, SETTINGS, URL_SETTING

__all__ = ["SETTINGS", "ecb_fx_rates", "register_fx_rates", "treasury_settings_models"]


def ecb_fx_rates(
    config: TreasuryConfig, clock: Clock, environ: Mapping[str, str] | None = None
) -> FxRates:
    """The ECB adapter as its settings configure it: ``TREASURY_ECB_*`` of ``environ`` when
    given, else the config's (``config_from_env`` read them), else the process environment's
    when the config carries none (a config built in code).

    Raises :class:`treasury_core.settings.BadSetting` naming a variable that does not parse.
    Nothing is read from disk or the network here: the rates load, and fetching starts, on the
    first quote.
    """
    from treasury_core.settings import BadSetting, read_adapter_settings
    from treasury_ecb.fx import DAILY_URL, EcbFxRates
    from treasury_ecb.settings import EcbSettings
    from treasury_ecb.source import packaged_history, read_snapshot

    carried = any(
        EcbSettings.setting_name(field) in config.adapters for field in EcbSettings.model_fields
    )
    if environ is None and carried:
        settings = config.adapter_settings(EcbSettings)
    else:
        settings = read_adapter_settings(EcbSettings, environ)
    if settings.url is not None and not settings.fetch:
        # Either one would be ignored without a word: the operator meant something else.
        raise BadSetting(f"{URL_SETTING} is set but {FETCH_SETTING} is false: unset one of them")
    snapshot = settings.file
    return EcbFxRates(
        clock,
        load=packaged_history if snapshot is None else partial(read_snapshot, snapshot),
        url=(settings.url or DAILY_URL) if settings.fetch else None,
        markup_bps=settings.markup_bps,
        max_age_days=settings.max_age_days,
        max_age_seconds=config.fx_max_age_seconds,
    )


@hookimpl
def register_fx_rates() -> Mapping[str, FxRatesFactory]:
    """The ECB's euro reference rates: offline history, fetched current rates, markup, guard."""
    return {"ecb": ecb_fx_rates}


@hookimpl
def treasury_settings_models() -> Iterable[type[AdapterSettings]]:
    """``TREASURY_ECB_*``: :class:`~treasury_ecb.settings.EcbSettings`."""
    from treasury_ecb.settings import EcbSettings

    return (EcbSettings,)
