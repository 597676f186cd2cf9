"""Registers the ECB reference rates under ``ecb`` (``TREASURY_FX_RATES=ecb``).

``TreasuryConfig`` stays closed to adapters' settings (docs/decisions.md), so this factory reads
its own ``TREASURY_ECB_*`` variables (all of them in :data:`SETTINGS`):

- ``TREASURY_ECB_FETCH``: fetch current rates (default ``true``); ``false`` for a fully
  offline install, which then quotes only from its file;
- ``TREASURY_ECB_URL``: the ECB rates file to fetch (default the ECB's daily XML);
- ``TREASURY_ECB_FILE``: a snapshot file to start from instead of the packaged history;
- ``TREASURY_ECB_MARKUP_BPS``: basis points taken off every cross rate (0 to 9999, default 0);
- ``TREASURY_ECB_MAX_AGE_DAYS``: refuse a rate dated more days before today (default 5).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from functools import partial

from treasury_core.config import TreasuryConfig
from treasury_core.plugins.hookspecs import FxRatesFactory, hookimpl
from treasury_core.ports import Clock, FxRates
from treasury_ecb.names import (
    FETCH_SETTING,
    FILE_SETTING,
    MARKUP_SETTING,
    MAX_AGE_SETTING,
    SETTINGS,
    URL_SETTING,
)

# The spellings treasury_core.settings accepts for a boolean, and nothing else.
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def _integer(environ: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    from treasury_core.settings import BadSetting

    raw = environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw, 10)
    except ValueError:
        raise BadSetting(f"{name}={raw!r} is not valid: not a whole number") from None
    if not low <= value <= high:
        raise BadSetting(f"{name}={raw!r} is not valid: must be from {low} to {high}")
    return value


def _flag(environ: Mapping[str, str], name: str, default: bool) -> bool:
    from treasury_core.settings import BadSetting

    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise BadSetting(f"{name}={raw!r} is not valid: must be true or false")


def ecb_fx_rates(
    config: TreasuryConfig, clock: Clock, environ: Mapping[str, str] | None = None
) -> FxRates:
    """The ECB adapter as ``TREASURY_ECB_*`` (``os.environ`` unless ``environ``) configure it.

    Raises :class:`treasury_core.settings.BadSetting` naming a variable that does not parse.
    Nothing is read from disk or the network here: the rates load, and fetching starts, on the
    first quote.
    """
    from treasury_core.settings import BadSetting
    from treasury_ecb.fx import DAILY_URL, DEFAULT_MAX_AGE_DAYS, EcbFxRates
    from treasury_ecb.source import packaged_history, read_snapshot

    env = os.environ if environ is None else environ
    fetch = _flag(env, FETCH_SETTING, default=True)
    url = env.get(URL_SETTING) or None
    snapshot = env.get(FILE_SETTING) or None
    if url is not None and not url.startswith(("https://", "http://")):
        raise BadSetting(f"{URL_SETTING}={url!r} is not valid: must be an http(s) URL")
    if url is not None and not fetch:
        # Either one would be ignored without a word: the operator meant something else.
        raise BadSetting(f"{URL_SETTING} is set but {FETCH_SETTING} is false: unset one of them")
    return EcbFxRates(
        clock,
        load=packaged_history if snapshot is None else partial(read_snapshot, snapshot),
        url=(url or DAILY_URL) if fetch else None,
        markup_bps=_integer(env, MARKUP_SETTING, 0, 0, 9_999),
        max_age_days=_integer(env, MAX_AGE_SETTING, DEFAULT_MAX_AGE_DAYS, 0, 36_500),
        max_age_seconds=config.fx_max_age_seconds,
    )


@hookimpl
def register_fx_rates() -> Mapping[str, FxRatesFactory]:
    """The ECB's euro reference rates: offline history, fetched current rates, markup, guard."""
    return {"ecb": ecb_fx_rates}


@hookimpl
def treasury_settings_names() -> Iterable[str]:
    """``TREASURY_ECB_*``: read here, not by ``TreasuryConfig``."""
    return SETTINGS
