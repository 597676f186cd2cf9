"""The optional aiohttp app that serves treasury-core's HTTP interface."""

from treasury_aiohttp.app import TREASURY_KEY, create_app

__all__ = ["TREASURY_KEY", "create_app"]
