"""Card on file (parts 1.2, 2.2, 4.2): payment method token intents and saved cards.

The flow: a client creates a PMTI; the customer submits a card once, through the hosted form at
``provider_tokenization_url`` or the client's server through ``confirm_endpoint_url``; the card
is checked, verified with the card provider (the CVC is used there and then dropped), sealed by
the vault and saved as a ``pmt_…`` token, all in one transaction with the PMTI's result and its
event; the notifications dispatcher then sends the result to the PMTI's ``callback_url``. The
token is later a payment intent's ``card_token`` (:meth:`CardOnFileService.saved_card` is what
the payments service asks).

With a card provider that keeps saved cards itself (``saved_cards_supported()``, the Stripe
provider), the provider checks and keeps the card instead (:meth:`SavedCardProvider.save_card`)
and the token stores only its reference there: no card number, not even sealed, is kept here.

Card numbers and CVCs never appear in a message, a log line, an event or a stored field here:
errors name the field, and storage holds the vault's ciphertext only.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import date, timedelta
from typing import TypeVar

from treasury_core.cards.numbers import check_card, full_year
from treasury_core.cards.tokens import (
    CardSubmission,
    CardSummary,
    CreateTokenIntentRequest,
    PaymentMethodToken,
    TokenIntent,
    TokenIntentStatus,
    TokenizationError,
)
from treasury_core.errors import CardError, InvalidRequestError, NotFound, ValidationFailed
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.listing import DELETED
from treasury_core.metadata import checked_metadata
from treasury_core.movements.records import TreasuryRecord
from treasury_core.notifications.events import EventType
from treasury_core.payments.intents import PaymentType
from treasury_core.ports import CardProvider, SealedCard, UnitOfWork, Vault
from treasury_core.ports.card_provider import CardData, SavedCardReference, keeps_saved_cards
from treasury_core.ports.hosted_pages import HostedPages
from treasury_core.services.adapters import Adapters
from treasury_core.services.idempotency import finish
from treasury_core.validation import is_resource_id

R = TypeVar("R", bound=TreasuryRecord)

ALREADY_SUBMITTED = "A card has already been submitted for this payment method token intent"
SESSION_EXPIRED = "This payment method token intent has expired"
TOKEN_EXPIRED = "This payment method token has expired"
TOKEN_DELETED = "This payment method token was deleted; the card must be saved again"


def card_data(card: CardSubmission) -> CardData:
    """The card of a submission, as the card provider takes it (not yet checked)."""
    return CardData(
        number=card.card_number,
        expiry_month=card.expiry_month,
        expiry_year=card.expiry_year,
        cvc=card.cvc,
        cardholder_name=card.cardholder_name,
    )


def checked_card(card: CardData, today: date) -> CardData:
    """``card`` after :func:`~treasury_core.cards.numbers.check_card` (digits only, four-digit
    year); raises :class:`ValidationFailed` naming the field, never echoing the number."""
    number = check_card(card.number, card.expiry_month, card.expiry_year, card.cvc, today=today)
    return CardData(
        number=number,
        expiry_month=card.expiry_month,
        expiry_year=full_year(card.expiry_year),
        cvc=card.cvc,
        cardholder_name=card.cardholder_name,
    )


@dataclass(frozen=True, slots=True)
class LinkedTokenIntent:
    """A PMTI and the paths of its two URLs (relative to the server's base URL)."""

    intent: TokenIntent
    tokenization_path: str
    confirm_path: str


class CardOnFileService:
    """Payment method token intents, the vault and the saved cards they produce.

    ``context`` gives storage, ids, the clock and the tokenization TTL setting; ``provider``
    verifies cards (or keeps them, when it keeps saved cards); ``vault`` seals the others.
    """

    def __init__(
        self,
        *,
        context: Adapters,
        provider: CardProvider,
        vault: Vault,
        hosted_pages: HostedPages,
    ) -> None:
        self._ctx = context
        self.provider = provider
        self.vault = vault
        #: Where a PMTI's hosted form and confirm endpoint live.
        self.hosted_pages = hosted_pages
        self._ttl = timedelta(seconds=context.config.tokenization_ttl_seconds)

    # --- create and read ------------------------------------------------------------------------

    async def create_intent(
        self,
        company_id: int,
        request: CreateTokenIntentRequest,
        *,
        idempotency: IdempotencyTicket[LinkedTokenIntent] | None = None,
    ) -> LinkedTokenIntent:
        """A new PMTI for the company's merchant account (``requires_payment_method``)."""
        if request.payment_type is not PaymentType.TOKENIZATION:
            raise ValidationFailed(
                "payment_type must be Tokenization for a payment method token intent",
                param="payment_type",
            )
        ctx = self._ctx
        now = ctx.clock.now()
        if request.expiry_date is not None and request.expiry_date < now.date():
            raise ValidationFailed("expiry_date must not be in the past", param="expiry_date")
        intent = TokenIntent(
            id=ctx.ids.new_id(TokenIntent.prefix),
            company_id=company_id,
            account_id=request.account_id,
            customer_email=request.customer_email,
            customer_phone_number=request.customer_phone_number,
            callback_url=request.callback_url,
            expiry_date=request.expiry_date,
            created_at=now,
            expires_at=now + self._ttl,
            url_salt=ctx.ids.token(16),
            metadata=checked_metadata(request.metadata),
        )
        created = self.linked(intent)

        def write(uow: UnitOfWork) -> LinkedTokenIntent:
            accounts = uow.companies.merchant_accounts(company_id)
            if not any(a.id == request.account_id for a in accounts):
                raise NotFound(f"No such account: {request.account_id}", param="account_id")
            uow.records.add(intent)
            return finish(uow, idempotency, created)

        return await ctx.storage.run(write)

    def _secret(self, intent: TokenIntent, *, form: bool) -> str:
        # Separate purposes: the browser's URL must not work as the server-to-server one.
        purpose = "pmti-tokenization-form" if form else "pmti-confirm"
        return self.vault.derive_secret(purpose, f"{intent.id}:{intent.url_salt}")

    def linked(self, intent: TokenIntent) -> LinkedTokenIntent:
        """``intent`` with the paths of its hosted form and confirm endpoint."""
        pages = self.hosted_pages
        return LinkedTokenIntent(
            intent,
            pages.tokenization_form_path(intent.id, self._secret(intent, form=True)),
            pages.confirm_path(intent.id, self._secret(intent, form=False)),
        )

    async def _find(self, kind: type[R], record_id: str, company_id: int | None) -> R | None:
        # An id that does not even look like one of ``kind`` is simply not found.
        if not is_resource_id(record_id, kind.prefix):
            return None
        return await self._ctx.storage.run(
            lambda uow: uow.records.get(kind, record_id, company_id), write=False
        )

    async def get_intent(self, company_id: int, pmti_id: str) -> TokenIntent:
        """The company's PMTI, or :class:`NotFound`."""
        found = await self._find(TokenIntent, pmti_id, company_id)
        if found is None:
            raise NotFound(f"No such payment method token intent: {pmti_id}")
        return found

    async def get_token(self, company_id: int, token: str) -> PaymentMethodToken:
        """The company's saved-card token, or :class:`NotFound` (also once deleted)."""
        found = await self._find(PaymentMethodToken, token, company_id)
        if found is None or found.status == DELETED:
            raise NotFound(f"No such payment method token: {token}")
        return found

    # --- the card submission --------------------------------------------------------------------

    async def find_by_secret(self, pmti_id: str, secret: str, *, form: bool) -> TokenIntent:
        """The PMTI a URL secret opens, whatever its state (the hosted page shows results too).

        ``form`` picks the hosted form's secret, otherwise the confirm endpoint's. A wrong id
        or secret is :class:`NotFound`, with no hint which.
        """
        intent = await self._find(TokenIntent, pmti_id, None) if len(secret) <= 128 else None
        expected = "" if intent is None else self._secret(intent, form=form)
        if intent is None or not hmac.compare_digest(expected.encode(), secret.encode()):
            raise NotFound("No such payment method token intent")
        return intent

    def _check_open(self, intent: TokenIntent) -> None:
        if not intent.is_open:
            raise InvalidRequestError(
                ALREADY_SUBMITTED, code="payment_method_token_intent_unexpected_state"
            )
        if self._ctx.clock.now() >= intent.expires_at:
            raise InvalidRequestError(SESSION_EXPIRED, code="payment_method_token_intent_expired")

    async def submit(
        self, pmti_id: str, secret: str, card: CardSubmission, *, form: bool = False
    ) -> TokenIntent:
        """Tokenize ``card`` for the PMTI the secret opens; returns the finished PMTI.

        A card failing the checks raises :class:`ValidationFailed` and leaves the PMTI open. A
        decline by the provider's verification, or by a provider that keeps saved cards as it
        saves the card, finishes it ``failed`` (returned, not raised); an unreachable provider
        raises and leaves it open (a retry saves no second card at the provider).
        """
        ctx = self._ctx
        intent = await self.find_by_secret(pmti_id, secret, form=form)
        self._check_open(intent)
        data = checked_card(card_data(card), ctx.clock.now().date())
        expiry_year = data.expiry_year
        declined: CardError | None = None
        kept: SavedCardReference | None = None
        fingerprint = self.vault.fingerprint(data.number)
        try:
            if keeps_saved_cards(self.provider):
                # The provider checks the card as it saves it; nothing goes to the vault.
                kept = await self.provider.save_card(
                    data,
                    customer_email=intent.customer_email,
                    key=self._saving_key(intent, fingerprint),
                )
            elif self.provider.verification_supported():
                await self.provider.verify(data)
        except CardError as exc:
            declined = exc
        if declined is not None:
            finished = intent.model_copy(
                update={
                    "status": TokenIntentStatus.FAILED,
                    "error": TokenizationError(
                        code=declined.failure_reason or declined.code, message=declined.message
                    ),
                }
            )
            token = None
        else:
            token_id = ctx.ids.new_id(PaymentMethodToken.prefix)
            sealed_card: str | None = None
            saved: SavedCardReference | SealedCard | None = kept
            if saved is None:
                saved = self.vault.seal(
                    data.number, data.expiry_month, expiry_year, context=token_id
                )
                sealed_card = saved.ciphertext
            summary = CardSummary(
                brand=saved.brand,
                last4=saved.last4,
                expiry_month=saved.expiry_month,
                expiry_year=saved.expiry_year,
            )
            token = PaymentMethodToken(
                id=token_id,
                company_id=intent.company_id,
                account_id=intent.account_id,
                payment_method_token_intent_id=intent.id,
                card=summary,
                customer_email=intent.customer_email,
                expiry_date=intent.expiry_date,
                created_at=ctx.clock.now(),
                sealed_card=sealed_card,
                provider_reference=None if kept is None else kept.reference,
                fingerprint=fingerprint,
                cardholder_name=card.cardholder_name,
            )
            finished = intent.model_copy(
                update={
                    "status": TokenIntentStatus.SUCCEEDED,
                    "payment_method_token": token_id,
                    "card": summary,
                }
            )
        event_type = (
            EventType.PAYMENT_METHOD_TOKEN_INTENT_SUCCEEDED
            if token is not None
            else EventType.PAYMENT_METHOD_TOKEN_INTENT_FAILED
        )

        def write(uow: UnitOfWork) -> None:
            current = uow.records.get(TokenIntent, intent.id, None, for_update=True)
            assert current is not None  # PMTIs are never deleted
            # Another submission may have finished it since it was opened: one card per PMTI.
            self._check_open(current)
            if token is not None:
                uow.records.add(token)
            uow.records.update(finished)
            uow.outbox.add(ctx.events.event(event_type, finished))

        await ctx.storage.run(write)
        return finished

    def _saving_key(self, intent: TokenIntent, fingerprint: str) -> str:
        # One per PMTI and card: a confirm retried after a lost answer saves no second card at
        # the provider, while another card submitted after that failure is its own saving. A
        # keyed digest, as the provider sees it: it must not reveal the salt or the fingerprint.
        return self.vault.derive_secret(
            "pmti-card-saving", f"{intent.id}:{intent.url_salt}:{fingerprint}"
        )

    # --- charging a saved card ------------------------------------------------------------------

    async def saved_card(self, company_id: int, token: str) -> CardData | SavedCardReference | None:
        """The card behind the company's ``token`` for the card provider, or ``None``.

        A card the provider keeps itself is its :class:`SavedCardReference`; one in the vault
        is opened. Raises :class:`ValidationFailed` (``payment_method_token_expired``) once the
        token is past its ``expiry_date`` or the card past its expiry month. The CVC is never
        stored, so a vaulted card goes to the provider without one.
        """
        found = await self._find(PaymentMethodToken, token, company_id)
        if found is None:
            return None
        if found.status == DELETED:
            raise ValidationFailed(
                TOKEN_DELETED, code="payment_method_token_deleted", param="card_token"
            )
        if found.expired(self._ctx.clock.now().date()):
            raise ValidationFailed(
                TOKEN_EXPIRED, code="payment_method_token_expired", param="card_token"
            )
        if found.provider_reference is not None:
            return SavedCardReference(
                reference=found.provider_reference,
                brand=found.card.brand,
                last4=found.card.last4,
                expiry_month=found.card.expiry_month,
                expiry_year=found.card.expiry_year,
            )
        sealed = _sealed(found)
        return CardData(
            number=self.vault.open(sealed, context=found.id),
            expiry_month=found.card.expiry_month,
            expiry_year=found.card.expiry_year,
            cardholder_name=found.cardholder_name,
        )


def _sealed(token: PaymentMethodToken) -> SealedCard:
    assert token.sealed_card is not None  # a token without a provider reference is sealed
    return SealedCard(
        ciphertext=token.sealed_card,
        brand=token.card.brand,
        last4=token.card.last4,
        expiry_month=token.card.expiry_month,
        expiry_year=token.card.expiry_year,
        fingerprint=token.fingerprint,
    )
