"""The HTTP app's hooks: its settings model, so ``config_from_env`` reads its variables.

Imports neither aiohttp nor the app: a core install (no ``server`` extra) loads it with the
other entry points.
"""

from __future__ import annotations

from collections.abc import Iterable

from treasury_core.config import AdapterSettings
from treasury_core.plugins import hookimpl


@hookimpl
def treasury_settings_models() -> Iterable[type[AdapterSettings]]:
    """``TREASURY_RATE_LIMIT_*``, ``TREASURY_MAX_BODY_BYTES``, …:
    :class:`~treasury_aiohttp.settings.AppSettings`."""
    from treasury_aiohttp.settings import AppSettings

    return (AppSettings,)
