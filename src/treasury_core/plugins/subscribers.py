"""Calling the ``treasury_event`` subscribers through pluggy, each on its own.

pluggy stops a hook call at the first implementation that raises, so one broken subscriber
would silence every one after it. Each subscriber is therefore called through a subset of the
hook that leaves the other subscribers out: pluggy still applies the ordering marks
(``tryfirst``, ``trylast``) to the order of the calls and runs every wrapper around each one,
and a failure stays with the subscriber that raised it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

__all__ = ["event_subscribers"]

#: One subscriber: its plugin's name and the call that reaches only it (and the wrappers).
Subscriber = tuple[str, Callable[..., Any]]


def event_subscribers(pm: pluggy.PluginManager) -> list[Subscriber]:
    """The ``treasury_event`` implementations in pluggy's call order, each callable alone.

    Call each with ``event=``; read afresh on every call, so plugins registered since are in.
    """
    hook = pm.hook.treasury_event
    plain = [impl for impl in hook.get_hookimpls() if not (impl.wrapper or impl.hookwrapper)]
    # get_hookimpls lists implementations in the reverse of the order pluggy calls them.
    plain.reverse()
    if len(plain) == 1:
        return [(plain[0].plugin_name, hook)]
    return [
        (
            impl.plugin_name,
            pm.subset_hook_caller(
                "treasury_event", remove_plugins=[o.plugin for o in plain if o is not impl]
            ),
        )
        for impl in plain
    ]
