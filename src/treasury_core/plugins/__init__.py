"""Plugins: pluggy hook specifications and the function that builds the plugin manager."""

from treasury_core.plugins.hookspecs import PROJECT_NAME, hookimpl, hookspec
from treasury_core.plugins.manager import (
    ENTRY_POINT_GROUP,
    collect_factories,
    make_plugin_manager,
    missing_settings,
    settings_models,
    settings_names,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "PROJECT_NAME",
    "collect_factories",
    "hookimpl",
    "hookspec",
    "make_plugin_manager",
    "missing_settings",
    "settings_models",
    "settings_names",
]
