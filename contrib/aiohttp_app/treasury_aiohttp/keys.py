"""Typed keys for the app and request state."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from treasury_aiohttp.hosted.security import FormKey
from treasury_aiohttp.settings import AppSettings
from treasury_core import Treasury
from treasury_core.companies import Principal
from treasury_core.idempotency import Claim
from treasury_core.operators import OperatorPrincipal
from treasury_core.ports import RequestLimiter
from treasury_core.ratelimit import FailureThrottle

TREASURY_KEY = web.AppKey("treasury", Treasury)
MAX_BODY_KEY = web.AppKey("max_body_bytes", int)
#: The app's own settings, read from the config once, when the app is built.
APP_SETTINGS_KEY = web.AppKey("app_settings", AppSettings)
FORM_KEY = web.AppKey("form_key", FormKey)
RATE_LIMITER_KEY = web.AppKey("rate_limiter", RequestLimiter)
#: Failed authentications per client address (asked before a key is looked up).
AUTH_FAILURES_KEY = web.AppKey("auth_failures", FailureThrottle)
OPENAPI_KEY = web.AppKey("openapi", dict[str, Any])
PRINCIPAL = web.RequestKey("principal", Principal)
#: The operator, on an operator route (such a request has no :data:`PRINCIPAL`).
OPERATOR = web.RequestKey("operator", OperatorPrincipal)
CLAIM = web.RequestKey("idempotency_claim", Claim)
IDEMPOTENCY_DONE = web.RequestKey("idempotency_done", bool)
#: The body as parse_body validated it last: a route's authorize hook and its handler read one
#: body, once.
PARSED_BODY = web.RequestKey("parsed_body", tuple[type[Any], Any])
