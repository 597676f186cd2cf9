"""Building the plugin manager (never at import time) and reading factories out of it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import pluggy

from treasury_core.errors import TreasuryError
from treasury_core.plugins import hookspecs

if TYPE_CHECKING:
    from treasury_core.config import AdapterSettings, TreasuryConfig

ENTRY_POINT_GROUP = "treasury"


class DuplicateAdapter(TreasuryError):
    """Two plugins register an adapter of the same kind under the same name.

    Letting the later one win would make which adapter runs depend on installation order, and
    a configuration that names it would silently get the other package's code.
    """


def make_plugin_manager(
    *, load_entry_points: bool = True, plugins: Iterable[object] = ()
) -> pluggy.PluginManager:
    """A plugin manager with the hook specs, the ``treasury`` entry points, and ``plugins``.

    The built-in adapters are entry points of this project, so they load the same way a third
    party's do. Pass ``load_entry_points=False`` and explicit ``plugins`` for full control.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    if load_entry_points:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    for plugin in plugins:
        pm.register(plugin)
    return pm


def collect_factories(pm: pluggy.PluginManager, kind: str) -> dict[str, Callable[..., Any]]:
    """Every factory registered for ``kind`` (a ``REGISTER_HOOKS`` key), by adapter name.

    Raises :class:`DuplicateAdapter` when two plugins register the same name.
    """
    if kind not in hookspecs.REGISTER_HOOKS:
        raise KeyError(f"no such adapter kind: {kind}")
    hook = getattr(pm.hook, f"register_{kind}")
    factories: dict[str, Callable[..., Any]] = {}
    for mapping in hook():
        for name, factory in mapping.items():
            if name in factories:
                raise DuplicateAdapter(
                    f"Two plugins register a {kind} adapter named {name!r}; "
                    "uninstall or unregister one of them"
                )
            factories[name] = factory
    return factories


def settings_names(pm: pluggy.PluginManager) -> frozenset[str]:
    """Every ``TREASURY_*`` variable the plugins declare they read themselves."""
    return frozenset(name for names in pm.hook.treasury_settings_names() for name in names)


def settings_models(pm: pluggy.PluginManager) -> list[type[AdapterSettings]]:
    """Every adapter settings model the plugins list, in the order the plugins were registered
    (the built-in ones in the order of their entry points), each once."""
    # pluggy calls the most recently registered plugin first.
    listed = [model for models in reversed(pm.hook.treasury_settings_models()) for model in models]
    return list(dict.fromkeys(listed))


def missing_settings(pm: pluggy.PluginManager, config: TreasuryConfig) -> list[str]:
    """What the plugins say ``config`` lacks, one line per setting (in pluggy's call order)."""
    return [line for lines in pm.hook.treasury_missing_settings(config=config) for line in lines]
