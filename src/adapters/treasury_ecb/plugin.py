"""Registers the ECB reference rates under ``ecb`` (``TREASURY_FX_RATES=ecb``).

``TreasuryConfig`` stays closed to adapters' settings (docs/decisions.md), so this factory reads
its own ``TREASURY_ECB_*`` variables:

- ``TREASURY_ECB_URL``: an ECB rates file to refresh from (the daily XML, say); unset: offline;
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

#: The variables this adapter reads (see the module's documentation).
SETTINGS_NAMES = (
    "TREASURY_ECB_URL",
    "TREASURY_ECB_FILE",
    "TREASURY_ECB_MARKUP_BPS",
    "TREASURY_ECB_MAX_AGE_DAYS",
)


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


def ecb_fx_rates(
    config: TreasuryConfig, clock: Clock, environ: Mapping[str, str] | None = None
) -> FxRates:
    """The ECB adapter as ``TREASURY_ECB_*`` (``os.environ`` unless ``environ``) configure it.

    Raises :class:`treasury_core.settings.BadSetting` naming a variable that does not parse.
    Nothing is read from disk or the network here: the rates load on the first quote.
    """
    from treasury_ecb.fx import DEFAULT_MAX_AGE_DAYS, EcbFxRates
    from treasury_ecb.source import packaged_history, read_snapshot

    env = os.environ if environ is None else environ
    url = env.get("TREASURY_ECB_URL") or None
    snapshot = env.get("TREASURY_ECB_FILE") or None
    if url is not None and not url.startswith(("https://", "http://")):
        from treasury_core.settings import BadSetting

        raise BadSetting(f"TREASURY_ECB_URL={url!r} is not valid: must be an http(s) URL")
    return EcbFxRates(
        clock,
        load=packaged_history if snapshot is None else partial(read_snapshot, snapshot),
        url=url,
        markup_bps=_integer(env, "TREASURY_ECB_MARKUP_BPS", 0, 0, 9_999),
        max_age_days=_integer(env, "TREASURY_ECB_MAX_AGE_DAYS", DEFAULT_MAX_AGE_DAYS, 0, 36_500),
        max_age_seconds=config.fx_max_age_seconds,
    )


@hookimpl
def register_fx_rates() -> Mapping[str, FxRatesFactory]:
    """The ECB's euro reference rates: offline history, optional refresh, markup, day guard."""
    return {"ecb": ecb_fx_rates}


@hookimpl
def treasury_settings_names() -> Iterable[str]:
    """``TREASURY_ECB_*``: read here, not by ``TreasuryConfig``."""
    return SETTINGS_NAMES
