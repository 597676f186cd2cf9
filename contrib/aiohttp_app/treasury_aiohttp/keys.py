"""Typed keys for the app and request state."""

from __future__ import annotations

from aiohttp import web

from treasury_core import Treasury

TREASURY_KEY = web.AppKey("treasury", Treasury)
PRINCIPAL = "treasury.principal"
CLAIM = "treasury.idempotency_claim"
IDEMPOTENCY_DONE = "treasury.idempotency_done"
ROUTE = "treasury.route"
