"""Endpoints of part 4.2: payment method token intents, the confirm call, saved-card tokens.

Creating a PMTI takes either kind of key (decisions.md); reading one, and reading a token, take
a secret key. The confirm call carries no key: the secret in its path is the credential, and it
works once.
"""

from __future__ import annotations

from aiohttp import web

from treasury_aiohttp.hosted_security import check_same_origin
from treasury_aiohttp.io import Responder, json_response, parse_body, principal, treasury
from treasury_aiohttp.routing import Auth, Route
from treasury_core.cards.tokens import (
    CardSubmission,
    CreateTokenIntentRequest,
    PaymentMethodTokenRecord,
    TokenIntentRecord,
    TokenizationResult,
)
from treasury_core.services.cards import CreatedTokenIntent

_CREATE_PATH = "/api/v1/payment_method_token_intent"


def base_url(request: web.Request, route_path: str) -> str:
    """The server's public base URL: configured, or this request's origin and mount point."""
    configured = treasury(request).config.public_url
    if configured:
        return configured.rstrip("/")
    route = request.match_info.route
    canonical = route.resource.canonical if route.resource is not None else ""
    prefix = canonical.removesuffix(route_path) if canonical.endswith(route_path) else ""
    return f"{request.url.origin()}{prefix}"


async def create_token_intent(request: web.Request) -> web.StreamResponse:
    """Create a PMTI; its two URLs are in ``latest_version``, shown this once."""
    body = await parse_body(request, CreateTokenIntentRequest)
    base = base_url(request, _CREATE_PATH)

    def render(created: CreatedTokenIntent) -> TokenIntentRecord:
        return created.intent.record(
            tokenization_url=base + created.tokenization_path,
            confirm_url=base + created.confirm_path,
        )

    responder: Responder[CreatedTokenIntent] = Responder(request, render)
    created = await treasury(request).cards.create_intent(
        principal(request).company_id, body, idempotency=responder.ticket()
    )
    return responder.respond(created)


async def get_token_intent(request: web.Request) -> web.StreamResponse:
    """A PMTI: where it stands and, once succeeded, its token and card."""
    intent = await treasury(request).cards.get_intent(
        principal(request).company_id, request.match_info["pmti_id"]
    )
    return json_response(intent.record())


async def confirm_token_intent(request: web.Request) -> web.StreamResponse:
    """Server-to-server card submission: tokenize the card, answer the result.

    A card failing the checks is a 400 and the PMTI stays open; a card the provider declines
    finishes it ``failed`` (200, the result says so). A second submission is refused.
    """
    check_same_origin(request)
    body = await parse_body(request, CardSubmission)
    intent = await treasury(request).cards.submit(
        request.match_info["pmti_id"], request.match_info["secret"], body
    )
    return json_response(intent.result())


async def get_payment_method_token(request: web.Request) -> web.StreamResponse:
    """A saved-card token (the card's brand, last4 and expiry; never the number)."""
    token = await treasury(request).cards.get_token(
        principal(request).company_id, request.match_info["token_id"]
    )
    return json_response(token.record())


_CARDS = ("Card on file",)

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        _CREATE_PATH,
        create_token_intent,
        "Create a payment method token intent",
        auth=Auth.PUBLISHABLE,
        body=CreateTokenIntentRequest,
        response=TokenIntentRecord,
        tags=_CARDS,
        description="`latest_version` carries `provider_tokenization_url` (the hosted card "
        "form) and `confirm_endpoint_url` (the server-to-server submission); both hold "
        "secrets and are shown in this response only.",
    ),
    Route(
        "GET",
        "/api/v1/payment_method_token_intent/{pmti_id}",
        get_token_intent,
        "Get a payment method token intent",
        response=TokenIntentRecord,
        tags=_CARDS,
        path_params={"pmti_id": "The PMTI's id (`pmti_…`)."},
    ),
    Route(
        "POST",
        "/api/v1/payment_method_token_intent/{pmti_id}/confirm/{secret}",
        confirm_token_intent,
        "Submit the card of a payment method token intent (server to server)",
        auth=Auth.NONE,
        body=CardSubmission,
        response=TokenizationResult,
        tags=_CARDS,
        path_params={
            "pmti_id": "The PMTI's id (`pmti_…`).",
            "secret": "The single-use secret of `confirm_endpoint_url`.",
        },
        description="No API key: the secret in the path is the credential. Works once.",
    ),
    Route(
        "GET",
        "/api/v1/payment_method_tokens/{token_id}",
        get_payment_method_token,
        "Get a saved-card token",
        response=PaymentMethodTokenRecord,
        tags=_CARDS,
        path_params={"token_id": "The token (`pmt_…`)."},
    ),
)
