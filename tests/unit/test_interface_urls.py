"""The paths the services hand out are the wire's (:mod:`treasury_core.interface.urls`), given to
them at bootstrap: the interface's by default, an embedding application's when it says so."""

from __future__ import annotations

import asyncio

from treasury_core import TreasuryConfig, bootstrap
from treasury_core.cards.tokens import CreateTokenIntentRequest
from treasury_core.interface.urls import INTERFACE_PATHS
from treasury_core.payments.intents import PaymentType
from treasury_core.ports.hosted_pages import HostedPages
from treasury_core.services.payments.saved_cards import LinkedTokenIntent


class Elsewhere:
    """An embedding application's pages, under its own prefix."""

    def challenge_return_path(self, lookup_id: str) -> str:
        return f"/shop/3ds/{lookup_id}"

    def tokenization_form_path(self, pmti_id: str, secret: str) -> str:
        return f"/shop/card/{pmti_id}/{secret}"

    def confirm_path(self, pmti_id: str, secret: str) -> str:
        return f"/shop/confirm/{pmti_id}/{secret}"


def _linked(pages: HostedPages | None) -> LinkedTokenIntent:
    async def main() -> LinkedTokenIntent:
        treasury = bootstrap(TreasuryConfig(database_url="memory://"), hosted_pages=pages)
        try:
            created = await treasury.companies.create_company("Acme")
            return await treasury.cards.create_intent(
                created.company.id,
                CreateTokenIntentRequest(
                    account_id=created.merchant_account.id,
                    payment_type=PaymentType.TOKENIZATION,
                    customer_email="ada@example.com",
                    customer_phone_number="+447700900123",
                ),
            )
        finally:
            treasury.close()

    return asyncio.run(main())


def test_the_interface_s_paths() -> None:
    assert INTERFACE_PATHS.challenge_return_path("pil_x") == "/pay/pil_x/challenge/return"
    assert INTERFACE_PATHS.tokenization_form_path("pmti_1", "s") == "/tokenize/pmti_1/s"
    assert INTERFACE_PATHS.confirm_path("pmti_1", "s") == (
        "/api/v1/payment_method_token_intent/pmti_1/confirm/s"
    )


def test_by_default_a_pmti_hands_out_the_interface_s_urls() -> None:
    linked = _linked(None)
    pmti, form_secret = linked.tokenization_path.rsplit("/", 1)
    assert pmti == f"/tokenize/{linked.intent.id}"
    confirm_secret = linked.confirm_path.rsplit("/", 1)[1]
    assert linked.confirm_path == INTERFACE_PATHS.confirm_path(linked.intent.id, confirm_secret)
    assert form_secret != confirm_secret


def test_an_embedding_application_s_pages_are_handed_out_instead() -> None:
    linked = _linked(Elsewhere())
    assert linked.tokenization_path.startswith(f"/shop/card/{linked.intent.id}/")
    assert linked.confirm_path.startswith(f"/shop/confirm/{linked.intent.id}/")
