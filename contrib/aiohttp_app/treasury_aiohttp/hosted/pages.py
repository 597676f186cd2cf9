"""The hosted pages: the payment page, its 3-D Secure challenge, and the tokenization form.

Server-rendered (Jinja2, autoescaped), no JavaScript, one stylesheet. Each form posts back to
the same address it was served from; the JSON form of those posts (for API clients) lives in
:mod:`treasury_aiohttp.api.payments` and :mod:`treasury_aiohttp.api.cards`, which hand
browser posts (``Accept: text/html``) to the functions here.

A browser post follows post/redirect/get: success answers ``303`` to the page that now shows the
result, so a reload never submits a card twice. A refused card re-renders the form with the
reason (``402``), a malformed one with the field at fault (``400``).
"""

from __future__ import annotations

from decimal import Decimal
from importlib.resources import files
from typing import Any

import jinja2
from aiohttp import web
from babel import Locale, UnknownLocaleError
from babel.numbers import format_currency

from treasury_aiohttp.hosted.forms import (
    CARD_INT_FIELDS,
    CSRF_FIELD,
    FormData,
    form_model,
    read_form,
)
from treasury_aiohttp.hosted.security import FormKey, check_same_origin, page_headers
from treasury_aiohttp.io import mount_prefix, treasury
from treasury_aiohttp.keys import FORM_KEY
from treasury_aiohttp.routing import Auth, Handler, Route
from treasury_core.cards.tokens import CardSubmission, TokenIntent, TokenIntentStatus
from treasury_core.errors import (
    CardError,
    InvalidRequestError,
    NotFound,
    PermissionDenied,
    ProviderError,
    ValidationFailed,
)
from treasury_core.payments import IntentStatus, PaymentIntent
from treasury_core.payments.expiry import OPEN_STATES, is_expired
from treasury_core.payments.records import Transaction
from treasury_core.payments.requests import ChallengeRequest, PayRequest
from treasury_core.payments.states import IllegalTransition
from treasury_core.services.payments import AUTHENTICATION_INCOMPLETE
from treasury_core.services.payments.saved_cards import card_data

_STATIC_PATH = "/hosted/static"

_templates = jinja2.Environment(
    loader=jinja2.PackageLoader("treasury_aiohttp", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
_STYLESHEET = (files("treasury_aiohttp") / "static" / "hosted.css").read_bytes()

#: The sandbox card provider's test cards the forms list in sandbox mode: the documented table
#: (docs/payments.md), a few rows a tester needs most. A test checks each against the provider.
SANDBOX_TEST_CARDS: tuple[tuple[str, str], ...] = (
    ("4242 4242 4242 4242", "Approved"),
    ("4000 0000 0000 3220", "Asks for 3-D Secure"),
    ("4000 0000 0000 0002", "Declined"),
    ("4000 0000 0000 9995", "Declined: insufficient funds"),
)


# --- rendering -----------------------------------------------------------------------------------


def render(
    request: web.Request,
    template: str,
    prefix: str,
    *,
    status: int = 200,
    merchant: str | None = None,
    **context: Any,
) -> web.Response:
    """A hosted page with its security headers.

    In sandbox mode every page carries the test-mode badge; the card forms also list the test
    cards when the card provider is the sandbox's (Stripe's test mode has its own cards).
    """
    config = treasury(request).config
    test_cards = SANDBOX_TEST_CARDS if config.sandbox and config.card_provider == "sandbox" else ()
    html = _templates.get_template(template).render(
        static_prefix=prefix + _STATIC_PATH,
        test_mode=config.sandbox,
        test_cards=test_cards,
        merchant=merchant,
        **context,
    )
    response = web.Response(text=html, status=status, content_type="text/html", charset="utf-8")
    response.headers.update(page_headers(treasury(request).config))
    return response


def _redirect(location: str) -> web.Response:
    # 303: the browser follows with a GET, so a reload does not post the card again.
    return web.Response(status=303, headers={"Location": location, "Cache-Control": "no-store"})


def page_locale(request: web.Request) -> Locale:
    """The first locale of ``Accept-Language`` that Babel knows (amounts only; text is English)."""
    tags = []
    for part in request.headers.get("Accept-Language", "").split(","):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        if tag and tag != "*" and q > 0:
            tags.append((q, tag))
    for _, tag in sorted(tags, key=lambda t: -t[0]):
        try:
            return Locale.parse(tag, sep="-")
        except (UnknownLocaleError, ValueError, TypeError):
            continue
    return Locale.parse("en_US")


def format_amount(request: web.Request, amount: int, currency: str) -> str:
    """``amount`` minor units of ``currency``, written for the customer's locale."""
    places = treasury(request).currencies.get(currency).decimal_places
    value = Decimal(amount).scaleb(-places)
    return str(format_currency(value, currency, locale=page_locale(request)))


async def merchant_name(request: web.Request, company_id: int) -> str:
    """The name the customer is shown for the company being paid: the company's own name."""
    return (await treasury(request).companies.get_company(company_id)).name


def _form_key(request: web.Request) -> FormKey:
    return request.app[FORM_KEY]


# --- the payment page ----------------------------------------------------------------------------

_PAY = "/pay/{payment_intent_lookup_id}"
_CHALLENGE = "/pay/{payment_intent_lookup_id}/challenge"
_CHALLENGE_RETURN = "/pay/{payment_intent_lookup_id}/challenge/return"

_NOT_A_LINK = "This payment link is not valid"
_PROVIDER_DOWN = "The payment could not be completed right now; please try again."
_NOT_CONFIRMED = "Your bank has not confirmed this payment yet."


def _pay_urls(request: web.Request, lookup_id: str, route_path: str) -> tuple[str, str, str]:
    prefix = mount_prefix(request, route_path)
    return prefix, f"{prefix}/pay/{lookup_id}", f"{prefix}/pay/{lookup_id}/challenge"


def _link_closed(request: web.Request, intent: PaymentIntent) -> bool:
    now = treasury(request).clock.now()
    return intent.status in OPEN_STATES and is_expired(intent, now)


async def _pay_view(
    request: web.Request,
    intent: PaymentIntent,
    route_path: str,
    *,
    status: int = 200,
    error: str | None = None,
    error_param: str | None = None,
    values: dict[str, Any] | None = None,
) -> web.Response:
    lookup_id = intent.payment_intent_lookup_id
    prefix, page, _ = _pay_urls(request, lookup_id, route_path)
    amount = format_amount(request, intent.billing_amount, intent.billing_currency)
    merchant = await merchant_name(request, intent.company_id)
    if intent.status is IntentStatus.PROCESSED:
        return render(
            request, "result.html", prefix, merchant=merchant, title="Payment complete", tone="ok",
            message="Thank you: your payment is complete.", amount=amount, detail=None,
        )  # fmt: skip
    if intent.status is IntentStatus.AUTHORIZED:
        return render(
            request, "result.html", prefix, merchant=merchant,
            title="Payment authorized", tone="ok",
            message="Thank you: your payment is authorized.", amount=amount,
            detail="Your card is charged when the merchant completes the order.",
        )  # fmt: skip
    if _link_closed(request, intent):
        return render(
            request, "result.html", prefix, merchant=merchant,
            status=410, title="Link expired", tone="bad",
            message="This payment link has expired.", amount=amount,
            detail="Ask the merchant for a new link.",
        )  # fmt: skip
    notice = None
    if intent.status is IntentStatus.CANCELLED:
        notice = "The earlier authorization of this payment was cancelled; you can pay again."
    return render(
        request, "pay.html", prefix, merchant=merchant, status=status, title="Pay", amount=amount,
        reference=intent.merchant_reference, notice=notice, action=page,
        button=f"Pay {amount}", error=error, error_param=error_param,
        values=values or {}, csrf_token=_form_key(request).token(f"pay:{lookup_id}"),
    )  # fmt: skip


def _not_a_link(request: web.Request, route_path: str, message: str = _NOT_A_LINK) -> web.Response:
    return render(
        request, "result.html", mount_prefix(request, route_path), status=404, title="Not found",
        tone="bad", message=message, amount=None, detail=None,
    )  # fmt: skip


def _refused_form(request: web.Request, route_path: str, error: PermissionDenied) -> web.Response:
    return render(
        request, "result.html", mount_prefix(request, route_path), status=403, title="Not accepted",
        tone="bad", message=error.message, amount=None, detail=None,
    )  # fmt: skip


async def _intent_or_404(
    request: web.Request, lookup_id: str, route_path: str
) -> PaymentIntent | web.Response:
    """The intent a payment link names, or the page saying the link is not valid."""
    try:
        return await treasury(request).payments.get_by_lookup_id(None, lookup_id)
    except NotFound:
        return _not_a_link(request, route_path)


async def pay_page(request: web.Request) -> web.StreamResponse:
    """``GET /pay/{payment_intent_lookup_id}``: the card form, or where the payment stands."""
    intent = await _intent_or_404(request, request.match_info["payment_intent_lookup_id"], _PAY)
    if isinstance(intent, web.Response):
        return intent
    return await _pay_view(request, intent, _PAY)


def _kept_values(form: FormData) -> dict[str, str]:
    # Re-shown after an error: never the card number or the CVC, and only text (a field sent as
    # a file upload is dropped, not shown as an object's repr).
    kept = {k: form.get(k) for k in ("cardholder_name", "expiry_month", "expiry_year")}
    return {k: v[:255] for k, v in kept.items() if isinstance(v, str)}


async def _posted_form(
    request: web.Request, scope: str, route_path: str
) -> FormData | web.Response:
    """The posted form if it came from the page served for ``scope`` on this origin, else the
    page saying it was not accepted (403)."""
    form = await read_form(request)
    try:
        check_same_origin(request)
        token = form.get(CSRF_FIELD)
        _form_key(request).check(scope, token if isinstance(token, str) else None)
    except PermissionDenied as refused:
        return _refused_form(request, route_path, refused)
    return form


async def pay_from_form(request: web.Request) -> web.StreamResponse:
    """A browser's post of the payment form (called by ``POST /pay/{lookup_id}``)."""
    payments = treasury(request).payments
    lookup_id = request.match_info["payment_intent_lookup_id"]
    intent = await _intent_or_404(request, lookup_id, _PAY)
    if isinstance(intent, web.Response):
        return intent
    _, page, challenge = _pay_urls(request, lookup_id, _PAY)
    if _link_closed(request, intent):
        return await _pay_view(request, intent, _PAY)  # the page saying so (410)
    form = await _posted_form(request, f"pay:{lookup_id}", _PAY)
    if isinstance(form, web.Response):
        return form
    values = _kept_values(form)
    try:
        body = form_model(form, PayRequest, int_fields=CARD_INT_FIELDS)
        outcome = await payments.pay(lookup_id, card_data(body))
    except ValidationFailed as invalid:
        return await _pay_view(
            request, intent, _PAY, status=400, error=invalid.message,
            error_param=invalid.param, values=values,
        )  # fmt: skip
    except CardError as declined:
        intent = await payments.get_by_lookup_id(None, lookup_id)
        return await _pay_view(
            request, intent, _PAY, status=402, error=declined.message,
            error_param="card_number", values=values,
        )  # fmt: skip
    except ProviderError:
        return await _pay_view(
            request, intent, _PAY, status=502, values=values,
            error=_PROVIDER_DOWN,
        )  # fmt: skip
    except IllegalTransition:
        return _redirect(page)  # paid meanwhile: the page shows where it stands
    if outcome.transaction.status.value == "requires_action":
        return _redirect(challenge)
    return _redirect(page)


async def _challenge_view(
    request: web.Request,
    intent: PaymentIntent,
    waiting: Transaction,
    route_path: str,
    *,
    status: int = 200,
    notice: str | None = None,
) -> web.Response:
    lookup_id = intent.payment_intent_lookup_id
    prefix, _, challenge = _pay_urls(request, lookup_id, route_path)
    merchant = await merchant_name(request, intent.company_id)
    # With the provider's own page (action_url) the customer authenticates there and comes
    # back to the return route; otherwise the page answers pass or fail itself (in sandbox
    # mode it says it is a test page: outside it, a provider may have had no page to link).
    return render(
        request, "challenge.html", prefix, merchant=merchant,
        status=status, title="Confirm your payment",
        amount=format_amount(request, intent.billing_amount, intent.billing_currency),
        action=challenge, csrf_token=_form_key(request).token(f"challenge:{lookup_id}"),
        action_url=waiting.action_url, notice=notice, sandbox=treasury(request).config.sandbox,
    )  # fmt: skip


async def challenge_page(request: web.Request) -> web.StreamResponse:
    """``GET /pay/{lookup_id}/challenge``: the 3-D Secure page (a link to the card provider's
    page when it has one, the sandbox's test page otherwise)."""
    payments = treasury(request).payments
    lookup_id = request.match_info["payment_intent_lookup_id"]
    intent = await _intent_or_404(request, lookup_id, _CHALLENGE)
    if isinstance(intent, web.Response):
        return intent
    _, page, _ = _pay_urls(request, lookup_id, _CHALLENGE)
    waiting = await payments.waiting_challenge(intent)
    if waiting is None or _link_closed(request, intent):
        return _redirect(page)
    return await _challenge_view(request, intent, waiting, _CHALLENGE)


async def _answer_challenge(
    request: web.Request, intent: PaymentIntent, route_path: str, *, passed: bool
) -> web.StreamResponse:
    """Complete the challenge and show where the payment stands (303 to the payment page)."""
    payments = treasury(request).payments
    lookup_id = intent.payment_intent_lookup_id
    _, page, _ = _pay_urls(request, lookup_id, route_path)
    try:
        await payments.complete_challenge(lookup_id, passed=passed)
    except CardError as failed:
        intent = await payments.get_by_lookup_id(None, lookup_id)
        return await _pay_view(request, intent, route_path, status=402, error=failed.message)
    except IllegalTransition:
        return _redirect(page)  # finished meanwhile: the page shows where it stands
    except InvalidRequestError as refused:
        if refused.code == "payment_intent_expired":
            return _redirect(page)  # the page says the link has expired
        if refused.code != AUTHENTICATION_INCOMPLETE:
            raise
        waiting = await payments.waiting_challenge(intent)
        if waiting is None:
            return _redirect(page)
        return await _challenge_view(
            request, intent, waiting, route_path, status=400, notice=_NOT_CONFIRMED
        )
    except ProviderError:
        return await _pay_view(
            request, intent, route_path, status=502,
            error=_PROVIDER_DOWN,
        )  # fmt: skip
    return _redirect(page)


async def challenge_from_form(request: web.Request) -> web.StreamResponse:
    """A browser's answer to the challenge page (called by ``POST …/challenge``)."""
    lookup_id = request.match_info["payment_intent_lookup_id"]
    intent = await _intent_or_404(request, lookup_id, _CHALLENGE)
    if isinstance(intent, web.Response):
        return intent
    _, page, _ = _pay_urls(request, lookup_id, _CHALLENGE)
    form = await _posted_form(request, f"challenge:{lookup_id}", _CHALLENGE)
    if isinstance(form, web.Response):
        return form
    try:
        body = form_model(form, ChallengeRequest)
    except ValidationFailed:
        return _redirect(page)
    return await _answer_challenge(request, intent, _CHALLENGE, passed=body.outcome == "pass")


async def challenge_return(request: web.Request) -> web.StreamResponse:
    """``GET /pay/{lookup_id}/challenge/return``: back from the card provider's 3-D Secure
    page. The provider's verdict, not anything in the request, completes the payment, so a
    GET (Stripe's redirect) may do it; the query Stripe appends is not read."""
    lookup_id = request.match_info["payment_intent_lookup_id"]
    intent = await _intent_or_404(request, lookup_id, _CHALLENGE_RETURN)
    if isinstance(intent, web.Response):
        return intent
    return await _answer_challenge(request, intent, _CHALLENGE_RETURN, passed=True)


# --- the tokenization form -----------------------------------------------------------------------

_TOKENIZE = "/tokenize/{pmti_id}/{secret}"
_NOT_A_FORM = "This card form link is not valid"


async def _tokenize_view(
    request: web.Request,
    intent: TokenIntent,
    *,
    status: int = 200,
    error: str | None = None,
    error_param: str | None = None,
    values: dict[str, Any] | None = None,
) -> web.Response:
    prefix = mount_prefix(request, _TOKENIZE)
    merchant = await merchant_name(request, intent.company_id)
    if intent.status is TokenIntentStatus.SUCCEEDED:
        assert intent.card is not None  # a succeeded PMTI has its card
        card = intent.card
        return render(
            request, "result.html", prefix, merchant=merchant, title="Card saved", tone="ok",
            message=f"Your card {card.brand.title()} •••• {card.last4} is saved.", amount=None,
            detail=f"Expires {card.expiry_month:02d}/{card.expiry_year}. You can close this page.",
        )  # fmt: skip
    if intent.status is TokenIntentStatus.FAILED:
        reason = intent.error.message if intent.error else "The card was declined"
        return render(
            request, "result.html", prefix, merchant=merchant, title="Card not saved", tone="bad",
            message=f"{reason}.".replace("..", "."), amount=None,
            detail="Ask the merchant for a new link to try another card.",
        )  # fmt: skip
    if treasury(request).clock.now() >= intent.expires_at:
        return render(
            request, "result.html", prefix, merchant=merchant,
            status=410, title="Link expired", tone="bad",
            message="This card form link has expired.", amount=None,
            detail="Ask the merchant for a new link.",
        )  # fmt: skip
    return render(
        request, "tokenize.html", prefix, merchant=merchant, status=status, title="Save your card",
        customer_email=intent.customer_email, action=request.path, error=error,
        error_param=error_param, values=values or {},
        csrf_token=_form_key(request).token(f"tokenize:{intent.id}"),
    )  # fmt: skip


async def tokenize_page(request: web.Request) -> web.StreamResponse:
    """``GET /tokenize/{pmti_id}/{secret}``: the card form, or the tokenization's result."""
    try:
        intent = await treasury(request).cards.find_by_secret(
            request.match_info["pmti_id"], request.match_info["secret"], form=True
        )
    except NotFound:
        return _not_a_link(request, _TOKENIZE, _NOT_A_FORM)
    return await _tokenize_view(request, intent)


async def tokenize_from_form(request: web.Request) -> web.StreamResponse:
    """``POST /tokenize/{pmti_id}/{secret}``: the customer submits the card."""
    cards = treasury(request).cards
    pmti_id, secret = request.match_info["pmti_id"], request.match_info["secret"]
    try:
        intent = await cards.find_by_secret(pmti_id, secret, form=True)
    except NotFound:
        return _not_a_link(request, _TOKENIZE, _NOT_A_FORM)
    form = await _posted_form(request, f"tokenize:{pmti_id}", _TOKENIZE)
    if isinstance(form, web.Response):
        return form
    values = _kept_values(form)
    try:
        card = form_model(form, CardSubmission, int_fields=CARD_INT_FIELDS)
        await cards.submit(pmti_id, secret, card, form=True)
    except ValidationFailed as invalid:
        return await _tokenize_view(
            request, intent, status=400, error=invalid.message, error_param=invalid.param,
            values=values,
        )  # fmt: skip
    except ProviderError:
        return await _tokenize_view(
            request, intent, status=502, values=values,
            error="The card could not be checked right now; please try again.",
        )  # fmt: skip
    except InvalidRequestError as refused:
        if refused.code == "payment_attempt_in_doubt":
            # Still open: an earlier try of this card may have reached the provider.
            return await _tokenize_view(
                request, intent, status=400, values=values, error=refused.message
            )
        # Otherwise finished or expired meanwhile: the page says which.
    return _redirect(request.path)


async def stylesheet(request: web.Request) -> web.StreamResponse:
    """The hosted pages' one stylesheet."""
    return web.Response(
        body=_STYLESHEET,
        content_type="text/css",
        charset="utf-8",
        headers={"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"},
    )


_HANDLERS: dict[tuple[str, str], Handler] = {
    ("GET", _PAY): pay_page,
    ("GET", _CHALLENGE): challenge_page,
    ("GET", _CHALLENGE_RETURN): challenge_return,
    ("GET", _TOKENIZE): tokenize_page,
    ("POST", _TOKENIZE): tokenize_from_form,
    ("GET", f"{_STATIC_PATH}/hosted.css"): stylesheet,
}

#: The pages' routes (the stylesheet among them).
PAGES: tuple[tuple[str, str], ...] = tuple(_HANDLERS)

_PAGE_TAGS = ("Hosted pages",)
_NOT_A_LINK_PAGE = "The page saying the link is not valid"
_TOKENIZE_PARAMS = {
    "pmti_id": "The payment method token intent's id (`pmti_…`).",
    "secret": "The form's secret, from `provider_tokenization_url`.",
}

#: The pages for people, as the OpenAPI document shows them (HTML answers). The routes are
#: added by :func:`add_routes` from :data:`PAGES`; these describe them.
ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        _PAY,
        pay_page,
        "The hosted payment page (the customer)",
        auth=Auth.NONE,
        tags=_PAGE_TAGS,
        path_params={"payment_intent_lookup_id": "The intent's lookup id (`pil_…`)."},
        html={
            200: "The card form, or the page saying the payment is complete or authorized",
            404: _NOT_A_LINK_PAGE,
            410: "The page saying the payment link has expired (`expires_at`)",
        },
    ),
    Route(
        "GET",
        _CHALLENGE,
        challenge_page,
        "The 3-D Secure challenge page (the customer)",
        auth=Auth.NONE,
        tags=_PAGE_TAGS,
        path_params={"payment_intent_lookup_id": "The intent's lookup id (`pil_…`)."},
        html={
            200: "The challenge: the sandbox's test page, or a link to the card provider's page",
            303: "No challenge is waiting: to the payment page",
            404: _NOT_A_LINK_PAGE,
        },
    ),
    Route(
        "GET",
        _CHALLENGE_RETURN,
        challenge_return,
        "Back from the card provider's 3-D Secure page (the customer's browser)",
        auth=Auth.NONE,
        tags=_PAGE_TAGS,
        path_params={"payment_intent_lookup_id": "The intent's lookup id (`pil_…`)."},
        html={
            303: "The card provider's verdict is recorded (or none was waiting): to the payment "
            "page, which shows the result",
            400: "The challenge page again: the bank has not confirmed the payment yet",
            402: "The payment page, saying the authentication failed",
            404: _NOT_A_LINK_PAGE,
            502: "The payment page: the card provider could not be asked right now",
        },
    ),
    Route(
        "GET",
        _TOKENIZE,
        tokenize_page,
        "The hosted card form of a payment method token intent (the customer)",
        auth=Auth.NONE,
        tags=_PAGE_TAGS,
        path_params=_TOKENIZE_PARAMS,
        html={
            200: "The card form, or the page saying the card was saved or refused",
            404: _NOT_A_LINK_PAGE,
            410: "The page saying the link has expired",
        },
    ),
    Route(
        "POST",
        _TOKENIZE,
        tokenize_from_form,
        "Submit the hosted card form (the customer's browser)",
        auth=Auth.NONE,
        tags=_PAGE_TAGS,
        path_params=_TOKENIZE_PARAMS,
        form=CardSubmission,
        html={
            303: "Submitted: back to the page, which shows the result",
            400: "The form again, saying which field is wrong",
            403: "The page saying the form was not accepted (not from this page)",
            404: _NOT_A_LINK_PAGE,
            410: "The page saying the link has expired",
            502: "The form again: the card could not be checked right now",
        },
    ),
)


def add_routes(app: web.Application) -> None:
    """Add :data:`PAGES` to ``app``'s router."""
    for (method, path), handler in _HANDLERS.items():
        app.router.add_route(method, path, handler)
