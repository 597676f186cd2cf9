"""The optional aiohttp app that serves treasury-core's HTTP interface.

The app is imported on first use: the package's plugin (its settings model) is loaded with
the other entry points on installs without aiohttp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from treasury_aiohttp.app import TREASURY_KEY, create_app

__all__ = ["TREASURY_KEY", "create_app"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from treasury_aiohttp import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
