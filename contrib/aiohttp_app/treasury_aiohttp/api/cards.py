"""Endpoints of part 4.2: payment method token intents, the confirm call, saved-card tokens.

Creating a PMTI takes either kind of key (decisions.md); reading one, and reading a token, take
a secret key. The confirm call carries no key: the secret in its path is the credential, and it
works once.
"""

from __future__ import annotations

from aiohttp import web

from treasury_aiohttp.hosted.security import check_same_origin
from treasury_aiohttp.io import (
    Responder,
    json_bytes,
    json_response,
    mount_prefix,
    parse_body,
    principal,
    treasury,
)
from treasury_aiohttp.routing import Auth, Route, route_of
from treasury_core.cards.tokens import (
    CardSubmission,
    CreateTokenIntentRequest,
    TokenizationResult,
)
from treasury_core.interface.records import PaymentMethodTokenRecord, TokenIntentRecord
from treasury_core.services.payments.saved_cards import LinkedTokenIntent

_CREATE_PATH = "/api/v1/payment_method_token_intent"


def base_url(request: web.Request) -> str:
    """The server's public base URL: configured, or this request's origin and mount point."""
    configured = treasury(request).config.public_url
    if configured:
        return configured.rstrip("/")
    route = route_of(request)
    return f"{request.url.origin()}{mount_prefix(request, route.path if route else '')}"


def _with_urls(request: web.Request, linked: LinkedTokenIntent) -> TokenIntentRecord:
    base = base_url(request)
    return TokenIntentRecord.of(
        linked.intent,
        tokenization_url=base + linked.tokenization_path,
        confirm_url=base + linked.confirm_path,
    )


async def create_token_intent(request: web.Request) -> web.StreamResponse:
    """Create a PMTI; its two URLs are in ``latest_version``.

    An idempotent replay stores the PMTI without its URLs and derives them again when it
    answers (:func:`_replay`), so no idempotency record holds a working URL.
    """
    body = await parse_body(request, CreateTokenIntentRequest)
    responder: Responder[LinkedTokenIntent] = Responder(
        request,
        lambda linked: _with_urls(request, linked),
        render_stored=lambda linked: TokenIntentRecord.of(linked.intent),
    )
    created = await treasury(request).cards.create_intent(
        principal(request).company_id, body, idempotency=responder.ticket()
    )
    return responder.respond(created)


async def _replay(request: web.Request, stored: bytes) -> bytes:
    record = TokenIntentRecord.model_validate_json(stored)
    cards = treasury(request).cards
    intent = await cards.get_intent(principal(request).company_id, record.id)
    # The PMTI as it was answered (its state then), with its URLs derived again.
    urls = _with_urls(request, cards.linked(intent)).latest_version
    version = record.latest_version.model_copy(
        update={
            "provider_tokenization_url": urls.provider_tokenization_url,
            "confirm_endpoint_url": urls.confirm_endpoint_url,
        }
    )
    answered = record.model_copy(update={"latest_version": version})
    return json_bytes(answered)


async def get_token_intent(request: web.Request) -> web.StreamResponse:
    """A PMTI: where it stands, its URLs and, once succeeded, its token and card."""
    cards = treasury(request).cards
    intent = await cards.get_intent(principal(request).company_id, request.match_info["pmti_id"])
    return json_response(_with_urls(request, cards.linked(intent)))


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
    return json_response(PaymentMethodTokenRecord.of(token))


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
        "secrets.",
        replay=_replay,
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
