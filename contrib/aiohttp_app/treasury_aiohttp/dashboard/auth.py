"""The dashboard's sign-in: a session cookie, CSRF on every form, and the page wrappers.

A company signs in with its secret key, checked exactly as the API checks a bearer key
(:meth:`CompanyService.authenticate`); the operator signs in on the same form with an operator
key (:meth:`CompanyService.authenticate_operator`). Each sign-in is a session kept on the
server (:class:`~treasury_core.services.dashboard_sessions.DashboardSessionService`); the
cookie (``treasury_dashboard``) holds only its random token, encrypted and authenticated with
Fernet (AES-CBC + HMAC, from ``cryptography``) under a key derived from ``form_key``. Every
request finds the session again, so sign-out, the key's rotation or revocation, the idle
timeout (``dashboard_idle_timeout_seconds``) and the lifetime end it for every copy of the
cookie. A session's requests count against its key's rate limit as the API's do; wrong keys
at sign-in count against the client's failed authentications
(:mod:`treasury_aiohttp.auth_throttle`).

A company session opens the company pages (:func:`dashboard_page`) and an operator session the
operator's (:func:`operator_page`), never each other's: the operator's pages hold facts about
the treasury's bank accounts, which hold every company's money, and an operator key acts for no
company. The cookie is HttpOnly,
SameSite=Strict, and Secure unless the host is the local machine; a session lasts at most
:data:`SESSION_SECONDS`.

Every form carries a CSRF token: the hosted pages' HMAC (:class:`FormKey`) over the session's
id, so a token is good only in the session it was served in; posts must also be
same-origin (``Sec-Fetch-Site``, else ``Origin``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

import jinja2
from aiohttp import web
from cryptography.fernet import Fernet, InvalidToken

from treasury_aiohttp.auth_throttle import count_failure, count_request, refuse_if_failing
from treasury_aiohttp.hosted.forms import CSRF_FIELD, FormData, read_form
from treasury_aiohttp.hosted.security import check_same_origin
from treasury_aiohttp.io import treasury
from treasury_aiohttp.keys import FORM_KEY
from treasury_aiohttp.settings import app_settings
from treasury_core.companies import Principal
from treasury_core.config import TreasuryConfig
from treasury_core.errors import (
    AuthenticationFailed,
    ErrorKind,
    PermissionDenied,
    RateLimited,
    TreasuryError,
    ValidationFailed,
)
from treasury_core.interface.errors import http_status
from treasury_core.operators import OperatorPrincipal, is_operator_key
from treasury_core.services.dashboard_sessions import LIFETIME_SECONDS

log = logging.getLogger("treasury.dashboard")

COOKIE = "treasury_dashboard"
#: How long a sign-in lasts at most (real time); then the dashboard asks for the key again.
SESSION_SECONDS = LIFETIME_SECONDS
DASHBOARD = "/dashboard"
LOGIN = "/dashboard/login"
LOGOUT = "/dashboard/logout"
STATIC = "/dashboard/static"
#: The operator's page, where an operator session starts.
BANK = "/dashboard/bank"

_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
_BAD_KEY = "That is not a valid secret key."
_OPERATOR_ONLY = "This page is the operator's: sign in with an operator key (ok_…) to see it."

_templates = jinja2.Environment(
    loader=jinja2.PackageLoader("treasury_aiohttp", "templates/dashboard"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
STYLESHEET = (files("treasury_aiohttp") / "static" / "dashboard.css").read_bytes()
SCRIPT = (files("treasury_aiohttp") / "static" / "dashboard.js").read_bytes()

SESSION_CIPHER = web.AppKey("dashboard_sessions", Fernet)


def session_cipher(config: TreasuryConfig) -> Fernet:
    """The session cookies' cipher: from ``form_key`` (required outside sandbox mode, so every
    process behind one address reads each other's cookies), else random per process."""
    form_key = app_settings(config).form_key
    secret = form_key.get_secret_value().encode() if form_key else None
    material = hashlib.sha256(
        b"treasury dashboard sessions\0" + (secret or secrets.token_bytes(32))
    )
    return Fernet(base64.urlsafe_b64encode(material.digest()))


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in browser: its company (as the API's auth sees it) and its session's id, to
    which its CSRF tokens are bound."""

    principal: Principal
    session_id: str
    prefix: str

    @property
    def company_id(self) -> int:
        """The signed-in company: every read and action is scoped to it."""
        return self.principal.company_id


@dataclass(frozen=True, slots=True)
class OperatorSession:
    """A browser signed in with an operator key: the operator's pages only, no company's."""

    operator: OperatorPrincipal
    session_id: str
    prefix: str


#: A signed-in browser of either kind.
AnySession = Session | OperatorSession


def home_of(session: AnySession) -> str:
    """Where a session lands after sign-in (its ``prefix`` included)."""
    return session.prefix + (BANK if isinstance(session, OperatorSession) else DASHBOARD)


def page_headers() -> dict[str, str]:
    """Every dashboard page's headers: a strict CSP (own stylesheet and script only, no inline
    code), no framing, no caching, no Referer outside the origin."""
    return {
        "Content-Security-Policy": (
            "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
            "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
        ),
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Cross-Origin-Resource-Policy": "same-origin",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
    }


def render(
    request: web.Request,
    template: str,
    prefix: str,
    *,
    status: int = 200,
    session: AnySession | None = None,
    **context: Any,
) -> web.Response:
    """A dashboard page with its security headers."""
    csrf = csrf_token(request, session) if session is not None else ""
    html = _templates.get_template(template).render(
        prefix=prefix,
        base=prefix + DASHBOARD,
        static=prefix + STATIC,
        csrf_field=CSRF_FIELD,
        csrf_token=csrf,
        signed_in=session is not None,
        operator=isinstance(session, OperatorSession),
        sandbox=treasury(request).config.sandbox,
        **context,
    )
    response = web.Response(text=html, status=status, content_type="text/html", charset="utf-8")
    response.headers.update(page_headers())
    return response


def redirect(location: str) -> web.Response:
    """303 to ``location`` (post/redirect/get: a reload never repeats an action)."""
    return web.Response(status=303, headers={"Location": location, "Cache-Control": "no-store"})


def csrf_token(request: web.Request, session: AnySession) -> str:
    """The token the session's forms carry."""
    return request.app[FORM_KEY].token(f"dashboard:{session.session_id}")


def _prefix(request: web.Request, path: str) -> str:
    resource = request.match_info.route.resource
    canonical = resource.canonical if resource is not None else ""
    return canonical.removesuffix(path) if canonical.endswith(path) else ""


def _secure(request: web.Request) -> bool:
    # Secure everywhere but the local machine, where a developer serves plain HTTP. A server
    # whose public address is https (TREASURY_PUBLIC_URL) is never that machine, whatever Host
    # its reverse proxy forwards (nginx sends 127.0.0.1 unless told otherwise).
    public = treasury(request).config.public_url
    if request.secure or (public is not None and public.lower().startswith("https://")):
        return True
    host = (request.url.host or "").lower()
    return host not in _LOCAL_HOSTS


def _set_cookie(request: web.Request, response: web.Response, value: str, prefix: str) -> None:
    response.set_cookie(
        COOKIE,
        value,
        path=(prefix + DASHBOARD) or "/",
        max_age=SESSION_SECONDS,
        httponly=True,
        secure=_secure(request),
        samesite="Strict",
    )


def _clear_cookie(response: web.Response, prefix: str) -> None:
    response.del_cookie(COOKIE, path=(prefix + DASHBOARD) or "/")


async def _session(request: web.Request, prefix: str) -> AnySession | None:
    """The request's session, or ``None`` (no cookie, a forged or expired one, a session ended,
    idle too long or whose key is no longer live)."""
    raw = request.cookies.get(COOKIE)
    if not raw:
        return None
    try:
        plain = request.app[SESSION_CIPHER].decrypt(raw.encode(), ttl=SESSION_SECONDS)
        token = json.loads(plain)["t"]
    except (InvalidToken, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not isinstance(token, str):
        return None
    live = await treasury(request).dashboard_sessions.resume(token)
    if live is None:
        return None
    if live.operator is not None:
        return OperatorSession(operator=live.operator, session_id=live.session.id, prefix=prefix)
    if live.principal is None:
        return None
    return Session(principal=live.principal, session_id=live.session.id, prefix=prefix)


def _key_id(session: AnySession) -> str:
    return (
        session.operator.key_id
        if isinstance(session, OperatorSession)
        else session.principal.key_id
    )


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: A company page: it reads and acts for the session's company.
Page = Callable[[web.Request, Session], Awaitable[web.StreamResponse]]
#: An operator page.
OperatorPage = Callable[[web.Request, OperatorSession], Awaitable[web.StreamResponse]]


def error_page(
    request: web.Request, prefix: str, error: TreasuryError, session: AnySession | None
) -> web.Response:
    """The page saying what was wrong (the API's status and message; nothing was changed)."""
    response = render(
        request, "error.html", prefix, status=http_status(error), session=session,
        title="Not done", message=error.message, param=error.param,
    )  # fmt: skip
    if isinstance(error, RateLimited):
        response.headers["Retry-After"] = str(error.retry_after)
    return response


def dashboard_page(path: str) -> Callable[[Page], Handler]:
    """Wrap a company page: a company session or a redirect (to sign-in without a session,
    to the operator's page for an operator session); on a POST the form's CSRF token and the
    same-origin check; a refused input or action becomes an error page."""

    def wrap(page: Page) -> Handler:
        async def run(request: web.Request, session: AnySession) -> web.StreamResponse:
            if not isinstance(session, Session):
                return redirect(home_of(session))
            return await page(request, session)

        return functools.wraps(page)(_guarded(path, run))

    return wrap


def operator_page(path: str) -> Callable[[OperatorPage], Handler]:
    """Wrap an operator page as :func:`dashboard_page` wraps a company page; a company session
    gets a 403 page saying it is the operator's (and learns nothing else)."""

    def wrap(page: OperatorPage) -> Handler:
        async def run(request: web.Request, session: AnySession) -> web.StreamResponse:
            if not isinstance(session, OperatorSession):
                raise PermissionDenied(_OPERATOR_ONLY, code="operator_key_required")
            return await page(request, session)

        return functools.wraps(page)(_guarded(path, run))

    return wrap


def _guarded(
    path: str, page: Callable[[web.Request, AnySession], Awaitable[web.StreamResponse]]
) -> Handler:
    # What every page does first: find the session, check a POST, turn a refusal into a page.
    async def handler(request: web.Request) -> web.StreamResponse:
        prefix = _prefix(request, path)
        session = await _session(request, prefix)
        if session is None:
            response = redirect(prefix + LOGIN)
            if COOKIE in request.cookies:
                _clear_cookie(response, prefix)
            return response
        try:
            # A page is a request of the key's, as an API call is.
            await count_request(request, _key_id(session))
            if request.method == "POST":
                check_same_origin(request)
                form = await read_form(request)
                token = form.get(CSRF_FIELD)
                request.app[FORM_KEY].check(
                    f"dashboard:{session.session_id}", token if isinstance(token, str) else None
                )
                _refuse_repeated(form)
                request[POSTED] = form
            return await page(request, session)
        except TreasuryError as error:
            if error.kind is ErrorKind.INTERNAL:
                log.error("%s on %s: %s", error.code, request.method, error.message)
                raise
            return error_page(request, prefix, error, session)

    return handler


POSTED = web.RequestKey("dashboard_form", FormData)


def _refuse_repeated(form: FormData) -> None:
    # A field given twice (``amount=1&amount=900``) would be read as its first value only:
    # refused, as the API refuses a repeated field, rather than acted on half-read.
    seen: set[str] = set()
    for name, _ in form.items():
        if name in seen:
            printable = name.isprintable()
            raise ValidationFailed(
                f"Received duplicate parameter: {name}"
                if printable
                else "Received a duplicate parameter",
                param=name if printable else None,
            )
        seen.add(name)


def posted(request: web.Request) -> FormData:
    """The form the wrapper read (and checked) for this POST."""
    return request[POSTED]


async def login_page(request: web.Request) -> web.StreamResponse:
    """``GET /dashboard/login``: the sign-in form (or home when signed in already)."""
    prefix = _prefix(request, LOGIN)
    session = await _session(request, prefix)
    if session is not None:
        return redirect(home_of(session))
    return _login_form(request, prefix)


def _login_form(
    request: web.Request, prefix: str, *, status: int = 200, error: str | None = None
) -> web.Response:
    return render(
        request, "login.html", prefix, status=status, title="Sign in", error=error,
        login_csrf=request.app[FORM_KEY].token("dashboard-login"),
    )  # fmt: skip


async def _signed_in(
    request: web.Request, key: str
) -> tuple[Principal | OperatorPrincipal, str] | None:
    # Whom ``key`` signs in as and where that lands; ``None`` for a publishable key.
    # AuthenticationFailed for anything that is no key.
    companies = treasury(request).companies
    if not key or len(key) > 200:
        raise AuthenticationFailed(_BAD_KEY)
    if is_operator_key(key):
        return await companies.authenticate_operator(key), BANK
    principal = await companies.authenticate(key)
    return (principal, DASHBOARD) if principal.is_secret else None


async def login(request: web.Request) -> web.StreamResponse:
    """``POST /dashboard/login``: check the secret key (a company's, or an operator key) as the
    API would; start a session of that kind."""
    prefix = _prefix(request, LOGIN)
    form = await _read_form_or_none(request)
    try:
        check_same_origin(request)
        token = form.get(CSRF_FIELD) if form is not None else None
        request.app[FORM_KEY].check("dashboard-login", token if isinstance(token, str) else None)
    except PermissionDenied as refused:
        return _login_form(request, prefix, status=403, error=refused.message)
    raw = form.get("secret_key") if form is not None else None
    key = raw.strip() if isinstance(raw, str) else ""
    try:
        # A client whose keys keep failing is refused before its next one is looked up.
        refuse_if_failing(request)
        try:
            signed_in = await _signed_in(request, key)
        except AuthenticationFailed:
            await count_failure(request)
            return _login_form(request, prefix, status=401, error=_BAD_KEY)
    except RateLimited as limited:
        response = _login_form(request, prefix, status=429, error=limited.message)
        response.headers["Retry-After"] = str(limited.retry_after)
        return response
    if signed_in is None:
        return _login_form(
            request, prefix, status=403,
            error="A publishable key cannot sign in: use the company's secret key.",
        )  # fmt: skip
    who, home = signed_in
    _, token = await treasury(request).dashboard_sessions.open(who)
    value = json.dumps({"t": token}).encode()
    response = redirect(prefix + home)
    _set_cookie(request, response, request.app[SESSION_CIPHER].encrypt(value).decode(), prefix)
    return response


async def _read_form_or_none(request: web.Request) -> FormData | None:
    try:
        return await read_form(request)
    except TreasuryError:
        return None


async def logout(request: web.Request) -> web.StreamResponse:
    """``POST /dashboard/logout``: end the session on the server and delete its cookie (a
    CSRF-checked form, like every action): a copy of the cookie is then no session."""
    prefix = _prefix(request, LOGOUT)
    session = await _session(request, prefix)
    if session is not None:
        form = await _read_form_or_none(request)
        token = form.get(CSRF_FIELD) if form is not None else None
        try:
            check_same_origin(request)
            request.app[FORM_KEY].check(
                f"dashboard:{session.session_id}", token if isinstance(token, str) else None
            )
        except PermissionDenied as refused:
            return error_page(request, prefix, refused, session)
        await treasury(request).dashboard_sessions.end(session.session_id)
    response = redirect(prefix + LOGIN)
    _clear_cookie(response, prefix)
    return response


def _asset(body: bytes, content_type: str) -> Handler:
    async def asset(_request: web.Request) -> web.StreamResponse:
        return web.Response(
            body=body,
            content_type=content_type,
            charset="utf-8",
            headers={"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"},
        )

    return asset


def auth_routes() -> list[tuple[str, str, Handler]]:
    """The sign-in, sign-out and asset routes."""
    return [
        ("GET", LOGIN, login_page),
        ("POST", LOGIN, login),
        ("POST", LOGOUT, logout),
        ("GET", f"{STATIC}/dashboard.css", _asset(STYLESHEET, "text/css")),
        ("GET", f"{STATIC}/dashboard.js", _asset(SCRIPT, "text/javascript")),
    ]
