"""Payment intents: create, pay, capture, cancel, refund, read and list (parts 3.1, 4.1, 7).

Every change of an intent goes through :func:`treasury_core.payments.states.transition`, and is
written with its ledger legs, its records and its events in one storage transaction.

Talking to the card provider: a provider call is slow and outside any database transaction, so
each operation is

1. read the intent and check the move is allowed (the interface's errors come from here);
2. ask the provider;
3. in one transaction, lock the intent, check it is still where step 1 saw it, and write.

Within one process, operations on one intent are serialized by a lock, so step 3's check only
fails when another process changed the intent meanwhile; the provider's work is then undone
(a hold voided, a charge refunded) and the caller told what happened. A refund reserves its
amount in a transaction *before* asking the provider, so concurrent refunds can never promise
more than was captured (ledger invariant 10).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import weakref
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from treasury_core.errors import (
    CardError,
    InvalidRequestError,
    NotFound,
    PermissionDenied,
    ProviderError,
    TreasuryError,
    ValidationFailed,
)
from treasury_core.events import Event, EventType
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.jobs import Job
from treasury_core.ledger import ExpirePending, Journal, Leg, PostPending, VoidPending
from treasury_core.metadata import checked_metadata
from treasury_core.money import round_minor
from treasury_core.pagination import DEFAULT_LIMIT, MAX_LIMIT, Page, page_of
from treasury_core.payments.expiry import check_link_open, link_expiry
from treasury_core.payments.intents import (
    CaptureMethod,
    IntentFilter,
    IntentStatus,
    PaymentIntent,
    check_create_rules,
)
from treasury_core.payments.ledger import card_payment_legs, refund_legs, settlement_account
from treasury_core.payments.minimums import check_min_amount
from treasury_core.payments.payloads import webhook_object
from treasury_core.payments.records import (
    Refund,
    RefundStatus,
    Transaction,
    TransactionStatus,
    TransactionType,
)
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.payments.states import (
    TRANSITIONS,
    IllegalTransition,
    Transition,
    Trigger,
    check_capturable,
    check_refundable,
    transition,
)
from treasury_core.ports import CardProvider, UnitOfWork
from treasury_core.ports.card_provider import (
    CardData,
    CardProviderResult,
    CardProviderStatus,
    HoldGone,
    SavedCardReference,
    keeps_saved_cards,
)
from treasury_core.ports.ids import SORTABLE_DIGITS
from treasury_core.services.cards import checked_card
from treasury_core.services.idempotency import finish
from treasury_core.services.payment_links import schedule_link_expiry
from treasury_core.services.refund_outcomes import (
    refund_failed,
    refund_in_progress,
    refund_succeeded,
)
from treasury_core.services.support import TreasuryContext
from treasury_core.validation import is_resource_id

log = logging.getLogger("treasury.payments")


def check_publishable_create(request: CreateIntentRequest) -> None:
    """Raise :class:`PermissionDenied` (403) for an intent a publishable key may not create.

    Manual capture needs a secret key (part 5). So does ``card_token``: a publishable key and a
    ``pmt_`` id are both in a browser's reach, and together they must not charge the customer
    whatever amount they name.
    """
    if request.capture_method is CaptureMethod.MANUAL:
        raise PermissionDenied(
            "capture_method manual requires a secret key", param="capture_method"
        )
    if request.card_token is not None:
        raise PermissionDenied("card_token requires a secret key", param="card_token")


#: Job kinds of the payments service (run by the job runner on the clock).
EXPIRE_AUTHORIZATION = "expire_authorization"
#: Voids at the card provider a hold the expiry released in the ledger (after it committed).
RELEASE_HOLD = "release_hold"
PAYOUT = "payout"
PAYOUT_APPLY = "payout_apply"
CHARGEBACK_OPEN = "chargeback_open"
CHARGEBACK_RESOLVE = "chargeback_resolve"

#: Default delays of decisions.md's sandbox (payouts 2 days after capture) and of the simulated
#: card network (a chargeback opens a day after capture and is decided a day later; a payout
#: is applied an hour after it was confirmed). ``TreasuryConfig.payment_delays_seconds``
#: overrides each by name.
DEFAULT_DELAYS: dict[str, float] = {
    PAYOUT: 2 * 24 * 3600,
    PAYOUT_APPLY: 3600,
    CHARGEBACK_OPEN: 24 * 3600,
    CHARGEBACK_RESOLVE: 24 * 3600,
}

#: Finds a saved card for ``(company_id, card_token)``: the card from the vault, or the reference
#: of one the card provider keeps; ``None`` when the company has no such token. Supplied by the
#: card-on-file service; without one no token is known.
SavedCards = Callable[[int, str], Awaitable[CardData | SavedCardReference | None]]


#: The ``code`` of the 400 refusing what the card provider says it cannot do (decisions.md).
CAPABILITY_UNSUPPORTED = "provider_capability_unsupported"
#: The ``code`` of the 400 answering a 3-D Secure completion the provider has no verdict for
#: yet (the customer has not finished at its page); the challenge keeps waiting.
AUTHENTICATION_INCOMPLETE = "authentication_incomplete"


def _unsupported(message: str, param: str | None = None) -> InvalidRequestError:
    """The refusal of a request the card provider's ``*_supported()`` flags rule out.

    Raised before the provider is called and before anything is written: the provider's
    flags are its contract, and asking it anyway would move money (or hold it) in ways the
    adapter has said it cannot follow through.
    """
    return InvalidRequestError(message, code=CAPABILITY_UNSUPPORTED, param=param)


def intent_job_key(intent_id: int) -> str:
    """The ``resource_id`` of an intent's jobs (intent ids are integers, job resources strings)."""
    return f"pi:{intent_id}"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)


def new_lookup_id(now: datetime, secret: str) -> str:
    """An unguessable ``payment_intent_lookup_id``: ``pil_``, the creation time's milliseconds
    as 9 base32 digits, then ``secret``, the id source's token of 192 random bits (it addresses
    the hosted payment page, so it is a bearer secret; the randomness alone makes it
    unguessable).

    Why the time first: the lookup id has a unique index, and fully random keys land each
    insert on a random leaf of it, so a group commit of creates wrote as many scattered index
    pages, and an insert grew dearer as the table grew. Ids made together share a page (the
    figures are in CHANGELOG.md, "Performance history").
    The prefix tells whoever holds the link when the intent was made, to the millisecond; that
    is all it gives away, and it helps no one guess another id.
    """
    ms = (now - _EPOCH) // _MILLISECOND
    stamp = "".join([SORTABLE_DIGITS[(ms >> shift) & 31] for shift in range(40, -1, -5)])
    return "pil_" + stamp + secret


def processing_share(intent: PaymentIntent, billing_amount: int) -> int:
    """The part of ``processing_amount`` that ``billing_amount`` of the billing amount stands for.

    Rounded by the one rounding rule. A refund takes the share of the cumulative refunded amount
    minus what earlier refunds took, so the shares of all refunds of an intent add up to exactly
    ``processing_amount``.
    """
    if intent.processing_currency == intent.billing_currency:
        return billing_amount
    return round_minor(
        Decimal(billing_amount) * intent.processing_amount / Decimal(intent.billing_amount)
    )


@dataclass(frozen=True, slots=True)
class PaymentOutcome:
    """What a payment attempt did: the intent as it is now and the attempt's record.

    ``transaction.status`` ``requires_action`` means the customer must pass 3-D Secure at
    ``POST /pay/{lookup_id}/challenge`` before anything is held or moved.
    """

    intent: PaymentIntent
    transaction: Transaction


_Refunds = list[Refund]  # spelled here: inside the class, ``list`` is a method


class PaymentService:
    """Payment intents over a card provider (see the module docstring for the call pattern)."""

    def __init__(
        self,
        ctx: TreasuryContext,
        provider: CardProvider,
        *,
        saved_cards: SavedCards | None = None,
        delays_seconds: dict[str, float] | None = None,
    ) -> None:
        self._ctx = ctx
        self.provider = provider
        self.saved_cards = saved_cards
        delays = {**DEFAULT_DELAYS, **(delays_seconds or {})}
        self._delays = {kind: timedelta(seconds=s) for kind, s in delays.items()}
        self._locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()
        # What a create has already checked, so the hot path skips two reads (see ``create``).
        self._known_accounts: set[tuple[int, int]] = set()
        self._known_settlements: set[str] = set()

    def delay(self, kind: str) -> timedelta:
        """How long after its cause a job of ``kind`` falls due."""
        return self._delays[kind]

    def _lock(self, intent_id: int) -> asyncio.Lock:
        lock = self._locks.get(intent_id)
        if lock is None:
            lock = self._locks[intent_id] = asyncio.Lock()
        return lock

    # --- reads --------------------------------------------------------------------------------

    async def get(self, company_id: int, intent_id: int) -> PaymentIntent:
        """The company's intent, or :class:`NotFound`."""
        found = await self._ctx.storage.run(
            lambda uow: uow.intents.get(intent_id, company_id), write=False
        )
        if found is None:
            raise NotFound(f"No such payment intent: {intent_id}", param="payment_intent_id")
        return found

    async def get_by_lookup_id(self, company_id: int | None, lookup_id: str) -> PaymentIntent:
        """The intent with this lookup id (of ``company_id`` unless ``None``), or NotFound."""
        found = None
        if _is_lookup_id(lookup_id):
            found = await self._ctx.storage.run(
                lambda uow: uow.intents.by_lookup_id(lookup_id, company_id), write=False
            )
        if found is None:
            raise NotFound("No such payment intent", param="payment_intent_lookup_id")
        return found

    async def list(
        self,
        company_id: int,
        filters: IntentFilter,
        *,
        limit: int = DEFAULT_LIMIT,
        starting_after: int | None = None,
    ) -> Page[PaymentIntent]:
        """A page of the company's intents passing ``filters``, newest first."""
        if isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
            raise ValidationFailed(f"limit must be an integer from 1 to {MAX_LIMIT}", param="limit")
        rows = await self._ctx.storage.run(
            lambda uow: uow.intents.list(company_id, filters, limit + 1, starting_after),
            write=False,
        )
        return page_of(rows, limit)

    async def count(self, company_id: int, filters: IntentFilter) -> int:
        """How many of the company's intents pass ``filters``."""
        return await self._ctx.storage.run(
            lambda uow: uow.intents.count(company_id, filters), write=False
        )

    # --- create -------------------------------------------------------------------------------

    async def create(
        self,
        company_id: int,
        request: CreateIntentRequest,
        *,
        publishable: bool = False,
        idempotency: IdempotencyTicket[PaymentIntent] | None = None,
    ) -> PaymentIntent:
        """Create an intent (``INITIALIZED``); with ``card_token``, charge the saved card at once.

        Raises :class:`PermissionDenied` for what a publishable key may not ask
        (:func:`check_publishable_create`),
        :class:`ValidationFailed` for manual capture on a non-card type (part 4.1) and bad
        fields, :class:`InvalidRequestError` (``provider_capability_unsupported``) for manual
        capture when the card provider cannot capture holds later and for a ``card_token``
        saved with another kind of provider (the vault or the provider), :class:`NotFound` for
        another company's account or card token. A saved card that is declined leaves the
        intent ``INITIALIZED`` and raises the :class:`CardError`.
        """
        ctx = self._ctx
        if publishable:
            check_publishable_create(request)
        check_create_rules(request.payment_type, request.capture_method)
        if request.capture_method is CaptureMethod.MANUAL:
            self._check_manual_capture(param="capture_method")
        billing = ctx.currencies.get(request.billing_currency, param="billing_currency").code
        processing = billing
        if request.processing_currency is not None:
            processing = ctx.currencies.get(
                request.processing_currency, param="processing_currency"
            ).code
        ctx.check_amount(request.billing_amount, "billing_amount")
        check_min_amount(request.billing_amount, billing, ctx.config.min_amounts)
        card = await self._saved_card(company_id, request.card_token)
        try:
            _, processing_amount = await ctx.quote(billing, processing, request.billing_amount)
        except ValidationFailed as exc:
            raise ValidationFailed(exc.message, code=exc.code, param="billing_amount") from None
        now = ctx.clock.now()
        draft = PaymentIntent(
            id=0,
            company_id=company_id,
            account_id=request.account_id,
            billing_amount=request.billing_amount,
            billing_currency=billing,
            processing_amount=processing_amount,
            processing_currency=processing,
            payment_type=request.payment_type,
            capture_method=request.capture_method,
            merchant_reference=request.merchant_reference,
            checkin_date=request.checkin_date,
            card_token=request.card_token,
            callback_url=request.callback_url,
            customer=request.customer,
            customer_email=request.customer_email,
            payment_intent_lookup_id=new_lookup_id(now, self._ctx.ids.token(24)),
            created_at=now,
            expires_at=link_expiry(request.expires_at, now),
            metadata=checked_metadata(request.metadata),
        )
        # With a saved card the request's answer is the charged intent, so the idempotency
        # ticket completes with the charge, not here.
        ticket = None if card is not None else idempotency

        account_key = (company_id, request.account_id)
        settlement = settlement_account(company_id, processing)
        known_account = account_key in self._known_accounts
        known_settlement = settlement.id in self._known_settlements

        def create(uow: UnitOfWork) -> PaymentIntent:
            if not known_account:
                accounts = uow.companies.merchant_accounts(company_id)
                if not any(a.id == request.account_id for a in accounts):
                    raise NotFound(f"No such account: {request.account_id}", param="account_id")
            if not known_settlement:
                uow.ledger.ensure_account(settlement)
            stored = uow.intents.add(draft)
            schedule_link_expiry(uow, ctx, stored)
            moved = transition(stored, Trigger.CREATE, now=now)
            self._intent_events(uow, moved)
            return finish(uow, ticket, stored)

        intent = await ctx.storage.run(create)
        # Remembered only once committed. Neither can become false: merchant accounts never
        # change company and ledger accounts are never deleted.
        self._known_accounts.add(account_key)
        self._known_settlements.add(settlement.id)
        if card is None:
            return intent
        outcome = await self._attempt(intent, card, idempotency=idempotency)
        return outcome.intent

    async def _saved_card(
        self, company_id: int, token: str | None
    ) -> CardData | SavedCardReference | None:
        if token is None:
            return None
        if not is_resource_id(token, "pmt"):
            raise ValidationFailed(
                "card_token must be a payment method token (pmt_…)", param="card_token"
            )
        card = await self.saved_cards(company_id, token) if self.saved_cards else None
        if card is None:
            raise NotFound(f"No such payment method token: {token}", param="card_token")
        # A token is charged the way it was saved: the provider's reference needs a provider
        # that keeps cards, and one that does is never handed a number from the vault (its
        # tokens keep none; a vaulted card from before the switch is saved again).
        keeps = keeps_saved_cards(self.provider)
        if isinstance(card, SavedCardReference) and not keeps:
            raise _unsupported(
                "This card was saved with a card provider that keeps cards itself; the current "
                "card provider cannot charge it",
                "card_token",
            )
        if isinstance(card, CardData) and keeps:
            raise _unsupported(
                "This card was saved in the treasury's vault; the current card provider charges "
                "only cards saved with it, so the card must be saved again",
                "card_token",
            )
        return card

    # --- pay ----------------------------------------------------------------------------------

    async def pay(self, lookup_id: str, card: CardData) -> PaymentOutcome:
        """The customer pays with ``card``: authorize (manual capture) or charge (automatic).

        A card failing the number, expiry or CVC checks raises :class:`ValidationFailed` and
        records nothing. A decline is recorded (the intent stays payable, ``payment_failed``
        fires) and then raised as :class:`CardError`. A 3-D Secure card answers a
        ``requires_action`` transaction; the intent moves once :meth:`complete_challenge` is
        called.
        """
        intent = await self.get_by_lookup_id(None, lookup_id)
        # Checked before anything is recorded: a typo is the customer's to fix (400), not a
        # payment attempt the provider declined.
        card = checked_card(card, self._ctx.clock.now().date())
        return await self._attempt(intent, card)

    def _check_manual_capture(self, param: str | None = None) -> None:
        if not self.provider.manual_capture_supported():
            raise _unsupported(
                "The card provider cannot capture a hold later, so capture_method manual is "
                "not available",
                param,
            )

    def _check_payable(self, intent: PaymentIntent) -> None:
        if (intent.capture_method, intent.status, Trigger.PAY_SUCCEEDED) not in TRANSITIONS:
            raise IllegalTransition(
                f"Payment intent {intent.id} is {intent.status.value} and cannot be paid",
                code="payment_intent_unexpected_state",
            )

    async def _attempt(
        self,
        intent: PaymentIntent,
        card: CardData | SavedCardReference,
        *,
        idempotency: IdempotencyTicket[PaymentIntent] | None = None,
    ) -> PaymentOutcome:
        async with self._lock(intent.id):
            intent = await self.get(intent.company_id, intent.id)
            self._check_payable(intent)
            check_link_open(intent, self._ctx.clock.now())
            capture = intent.capture_method is CaptureMethod.AUTOMATIC
            if not capture:
                # An intent made before the provider lost the capability: a hold nobody can
                # capture would only wait for its expiry.
                self._check_manual_capture()
            await self._abandon_challenge(intent)
            kind = TransactionType.SALE if capture else TransactionType.AUTHORIZATION
            try:
                if isinstance(card, SavedCardReference):
                    if not keeps_saved_cards(self.provider):  # checked by _saved_card
                        raise _unsupported("The card provider cannot charge this saved card")
                    result = await self.provider.authorize_saved(
                        card,
                        intent.billing_amount,
                        intent.billing_currency,
                        capture=capture,
                        attempt_key=attempt_key(intent),
                    )
                elif _takes_attempt_keys(self.provider):
                    result = await self.provider.authorize(
                        card,
                        intent.billing_amount,
                        intent.billing_currency,
                        capture=capture,
                        attempt_key=attempt_key(intent),
                        **self._challenge_return(intent),
                    )
                else:
                    result = await self.provider.authorize(
                        card,
                        intent.billing_amount,
                        intent.billing_currency,
                        capture=capture,
                        **self._challenge_return(intent),
                    )
            except CardError as declined:
                # Not replayed: the answer is the decline, and a retry is a new attempt.
                await self._record_decline(intent, kind, declined, card)
                raise
            if result.requires_action:
                if not self.provider.three_d_secure_supported():
                    # The provider broke its own contract; nothing here could finish the
                    # challenge (complete_action is not called on such a provider).
                    await self._undo(result.reference, None)
                    raise ProviderError(
                        "The card provider asked for 3-D Secure, which it says it does not support"
                    )
                return await self._record_challenge(intent, kind, result, card, idempotency)
            return await self._record_success(intent, kind, result, card.last4, idempotency)

    def _transaction(
        self,
        intent: PaymentIntent,
        kind: TransactionType,
        status: TransactionStatus,
        *,
        brand: str | None = None,
        last4: str | None = None,
        error: CardError | None = None,
        reference: str | None = None,
    ) -> Transaction:
        ctx = self._ctx
        return Transaction(
            id=ctx.ids.new_id(Transaction.prefix),
            company_id=intent.company_id,
            payment_intent_id=intent.id,
            type=kind,
            status=status,
            amount=intent.billing_amount,
            currency=intent.billing_currency,
            card_brand=brand,
            card_last4=last4,
            failure_reason=None if error is None else error.failure_reason,
            failure_message=None if error is None else error.message,
            created_at=ctx.clock.now(),
            provider_reference=reference,
        )

    async def _record_decline(
        self,
        intent: PaymentIntent,
        kind: TransactionType,
        declined: CardError,
        card: CardData | SavedCardReference,
    ) -> None:
        now = self._ctx.clock.now()
        txn = self._transaction(
            intent, kind, TransactionStatus.FAILED, last4=_safe_last4(card), error=declined
        )

        def write(uow: UnitOfWork) -> None:
            current = self._locked(uow, intent)
            moved = transition(current, Trigger.PAY_DECLINED, now=now)
            stored = moved.intent.model_copy(update={"latest_transaction_id": txn.id})
            uow.intents.update(stored)
            self._transaction_events(uow, txn, EventType.TRANSACTION_FAILED)
            self._intent_events(uow, moved, stored)

        await self._ctx.storage.run(write)

    async def _record_challenge(
        self,
        intent: PaymentIntent,
        kind: TransactionType,
        result: CardProviderResult,
        card: CardData | SavedCardReference,
        idempotency: IdempotencyTicket[PaymentIntent] | None,
    ) -> PaymentOutcome:
        txn = self._transaction(
            intent,
            kind,
            TransactionStatus.REQUIRES_ACTION,
            brand=result.brand,
            last4=result.last4 or _safe_last4(card),
            reference=result.reference,
        ).model_copy(update={"action_url": result.action_url})

        def write(uow: UnitOfWork) -> PaymentOutcome:
            current = self._locked(uow, intent)
            stored = current.model_copy(update={"latest_transaction_id": txn.id})
            uow.intents.update(stored)
            self._transaction_events(uow, txn, EventType.TRANSACTION_REQUIRES_ACTION)
            self._intent_event(uow, stored, EventType.PAYMENT_INTENT_PROCESSING)
            finish(uow, idempotency, stored)
            return PaymentOutcome(stored, txn)

        try:
            return await self._ctx.storage.run(write)
        except IllegalTransition:
            await self._undo(result.reference, None)
            raise

    async def _record_success(
        self,
        intent: PaymentIntent,
        kind: TransactionType,
        result: CardProviderResult,
        last4: str | None,
        idempotency: IdempotencyTicket[PaymentIntent] | None,
        *,
        pending: Transaction | None = None,
    ) -> PaymentOutcome:
        ctx = self._ctx
        now = ctx.clock.now()
        captured = kind is TransactionType.SALE
        if pending is not None:
            txn = pending.model_copy(
                update={
                    "status": TransactionStatus.COMPLETED,
                    "provider_reference": result.reference,
                }
            )
        else:
            # The charge's reference is kept on the attempt: the provider's later events about
            # it (a dispute, a refund made at the provider) find the intent through it.
            txn = self._transaction(
                intent,
                kind,
                TransactionStatus.COMPLETED,
                brand=result.brand,
                last4=result.last4 or last4,
                reference=result.reference,
            )

        def write(uow: UnitOfWork) -> PaymentOutcome:
            current = self._locked(uow, intent)
            moved = transition(current, Trigger.PAY_SUCCEEDED, now=now)
            hold_until = None if captured else moved.intent.authorization_expires_at
            journal = Journal(
                ctx.ids.new_id("jr"),
                card_payment_legs(
                    current.company_id,
                    current.billing_currency,
                    current.billing_amount,
                    current.processing_currency,
                    current.processing_amount,
                    hold_until=hold_until,
                ),
                operation="card_sale" if captured else "card_authorization",
                company_id=current.company_id,
            )
            uow.ledger.apply(journal, now)
            update: dict[str, object] = {
                "provider_reference": result.reference,
                "latest_transaction_id": txn.id,
                "hold_pending_ids": ()
                if captured
                else tuple(journal.leg_id(i) for i in range(len(journal.legs))),
            }
            if captured:
                update["captured_at"] = now
            stored = moved.intent.model_copy(update=update)
            uow.intents.update(stored)
            if pending is not None:
                uow.records.update(txn)
                ctx.event(uow, EventType.TRANSACTION_COMPLETED, txn)
            else:
                self._transaction_events(uow, txn, EventType.TRANSACTION_COMPLETED)
            self._intent_events(uow, moved, stored)
            key = intent_job_key(current.id)
            if captured:
                self._after_capture(uow, stored, now)
            else:
                assert stored.authorization_expires_at is not None  # just authorized
                self._schedule(
                    uow, EXPIRE_AUTHORIZATION, key, stored, stored.authorization_expires_at
                )
            finish(uow, idempotency, stored)
            return PaymentOutcome(stored, txn)

        try:
            return await ctx.storage.run(write)
        except IllegalTransition:
            recorded = await self._recorded_elsewhere(intent, result.reference, captured=captured)
            if recorded is not None:
                # The provider's event about this very charge got there first: it is recorded.
                return PaymentOutcome(recorded, txn)
            # Another process paid this intent meanwhile: give the customer's money back.
            await self._undo(result.reference, intent.billing_amount if captured else None)
            raise

    def _challenge_return(self, intent: PaymentIntent) -> dict[str, str]:
        """``return_url`` for ``authorize``, for a provider that takes it and a server that
        knows its public address (config ``public_url``); otherwise nothing."""
        base = self._ctx.config.public_url
        if not base or not _takes_return_urls(self.provider):
            return {}
        return {"return_url": base.rstrip("/") + challenge_return_path(intent)}

    async def complete_challenge(self, lookup_id: str, *, passed: bool = True) -> PaymentOutcome:
        """Finish the intent's pending 3-D Secure attempt: ``passed`` authorizes or charges
        (per the capture method), otherwise the attempt fails as a decline would.

        With ``passed`` the provider's verdict decides (:meth:`CardProvider.complete_action`):
        while the customer has not finished at the provider's own page the attempt keeps
        waiting and :class:`InvalidRequestError` ``authentication_incomplete`` (400) is raised;
        a :class:`ProviderError` leaves it waiting too.
        """
        intent = await self.get_by_lookup_id(None, lookup_id)
        async with self._lock(intent.id):
            intent = await self.get(intent.company_id, intent.id)
            check_link_open(intent, self._ctx.clock.now())
            txn = await self._pending_challenge(intent)
            assert txn.provider_reference is not None  # a requires_action attempt keeps one
            if not self.provider.three_d_secure_supported():
                raise _unsupported("The card provider does not support 3-D Secure")
            failure: CardError | None = None
            result: CardProviderResult | None = None
            if passed:
                try:
                    result = await self.provider.complete_action(txn.provider_reference)
                except CardError as exc:
                    failure = exc
            else:
                await self._undo(txn.provider_reference, None)
                failure = CardError(
                    "The customer did not pass 3-D Secure", failure_reason="authentication_failed"
                )
            if result is not None and result.requires_action:
                # No verdict yet: the customer has not finished at the provider's page.
                raise InvalidRequestError(
                    "The customer has not finished 3-D Secure at the card provider yet",
                    code=AUTHENTICATION_INCOMPLETE,
                )
            if failure is None and result is not None:
                done = txn.model_copy(update={"action_url": None})
                return await self._record_success(
                    intent, txn.type, result, txn.card_last4, None, pending=done
                )
            assert failure is not None
            await self._fail_challenge(intent, txn, failure)
            raise failure

    async def _waiting_challenge(self, intent: PaymentIntent) -> Transaction | None:
        """The intent's latest attempt if it waits for 3-D Secure."""
        txn_id = intent.latest_transaction_id
        if txn_id is None:
            return None
        txn = await self._ctx.storage.run(
            lambda uow: uow.records.get(Transaction, txn_id, intent.company_id), write=False
        )
        if txn is None or txn.status is not TransactionStatus.REQUIRES_ACTION:
            return None
        return txn

    async def waiting_challenge(self, intent: PaymentIntent) -> Transaction | None:
        """The intent's payment attempt waiting for 3-D Secure, if any (the hosted page asks)."""
        return await self._waiting_challenge(intent)

    async def _abandon_challenge(self, intent: PaymentIntent) -> None:
        """A new attempt replaces one still waiting for 3-D Secure: release it at the provider
        and record it as failed, so no challenge is left open behind the customer's back."""
        txn = await self._waiting_challenge(intent)
        if txn is None:
            return
        assert txn.provider_reference is not None  # a requires_action attempt keeps one
        await self._undo(txn.provider_reference, None)
        failed = txn.failed("superseded", "A newer payment attempt replaced this one")

        def write(uow: UnitOfWork) -> None:
            current = uow.records.get(Transaction, txn.id, txn.company_id, for_update=True)
            if current is not None and current.status is TransactionStatus.REQUIRES_ACTION:
                uow.records.update(failed)
                self._ctx.event(uow, EventType.TRANSACTION_FAILED, failed)

        await self._ctx.storage.run(write)

    async def _pending_challenge(self, intent: PaymentIntent) -> Transaction:
        txn = await self._waiting_challenge(intent)
        if txn is None:
            raise IllegalTransition(
                "No 3-D Secure challenge is pending for this payment intent",
                code="no_action_required",
            )
        self._check_payable(intent)
        return txn

    async def _fail_challenge(
        self, intent: PaymentIntent, txn: Transaction, failure: CardError
    ) -> None:
        now = self._ctx.clock.now()
        failed = txn.failed(failure.failure_reason, failure.message)

        def write(uow: UnitOfWork) -> None:
            current = self._locked(uow, intent)
            moved = transition(current, Trigger.PAY_DECLINED, now=now)
            uow.intents.update(moved.intent)
            uow.records.update(failed)
            self._ctx.event(uow, EventType.TRANSACTION_FAILED, failed)
            self._intent_events(uow, moved)

        await self._ctx.storage.run(write)

    # --- capture and cancel -------------------------------------------------------------------

    async def capture(
        self,
        company_id: int,
        intent_id: int,
        *,
        idempotency: IdempotencyTicket[PaymentIntent] | None = None,
    ) -> PaymentIntent:
        """Capture the full authorized amount (``AUTHORIZED`` → ``PROCESSED``).

        Refused with the interface's messages (400) unless ``AUTHORIZED`` and before
        ``authorization_expires_at``, whether or not the expiry job has run. A provider refusal
        is a 402 :class:`CardError` leaving the intent ``AUTHORIZED``; a hold gone at the
        provider cancels the intent (reason ``expired``) and raises the 402 too. A card provider
        that no longer says it captures holds is not asked (400
        ``provider_capability_unsupported``).
        """
        ctx = self._ctx
        async with self._lock(intent_id):
            intent = await self.get(company_id, intent_id)
            now = ctx.clock.now()
            check_capturable(intent, now)
            self._check_manual_capture()
            assert intent.provider_reference is not None  # an AUTHORIZED intent has a charge
            txn = self._transaction(intent, TransactionType.CAPTURE, TransactionStatus.COMPLETED)
            try:
                result = await self.provider.capture(
                    intent.provider_reference, intent.billing_amount
                )
            except HoldGone as gone:
                await self._capture_refused(intent, txn, gone, Trigger.CAPTURE_HOLD_GONE, now)
                raise
            except CardError as refused:
                await self._capture_refused(intent, txn, refused, Trigger.CAPTURE_DECLINED, now)
                raise

            def write(uow: UnitOfWork) -> PaymentIntent:
                current = self._locked(uow, intent)
                stored = self.record_capture(uow, current, txn, result.reference, now)
                return finish(uow, idempotency, stored)

            try:
                return await ctx.storage.run(write)
            except IllegalTransition:
                recorded = await self._recorded_elsewhere(intent, result.reference, captured=True)
                if recorded is not None:
                    return recorded
                await self._undo(result.reference, intent.billing_amount)
                raise

    def record_capture(
        self,
        uow: UnitOfWork,
        current: PaymentIntent,
        txn: Transaction,
        reference: str,
        now: datetime,
    ) -> PaymentIntent:
        """Record the capture of the locked ``AUTHORIZED`` intent's hold (``txn``, a completed
        capture attempt) in the caller's transaction: ``PROCESSED``, the ledger hold posted,
        the payout (and a known chargeback) scheduled. The intent as stored."""
        moved = transition(current, Trigger.CAPTURE_SUCCEEDED, now=now)
        self._ledger(uow, current, (PostPending(p) for p in current.hold_pending_ids), now)
        stored = moved.intent.model_copy(
            update={"provider_reference": reference, "hold_pending_ids": (), "captured_at": now}
        )
        uow.intents.update(stored)
        self._transaction_events(uow, txn, EventType.TRANSACTION_COMPLETED)
        self._intent_events(uow, moved, stored)
        uow.jobs.finish_for(intent_job_key(current.id))
        self._after_capture(uow, stored, now)
        return stored

    async def _recorded_elsewhere(
        self, intent: PaymentIntent, reference: str, *, captured: bool
    ) -> PaymentIntent | None:
        """The intent, if what this call got from the provider was recorded meanwhile by
        another path (the provider's event about the same charge, handled by another process):
        then there is nothing to undo. ``None`` when the intent moved some other way."""
        current = await self.get(intent.company_id, intent.id)
        wanted = (
            {IntentStatus.PROCESSED}
            if captured
            else {IntentStatus.AUTHORIZED, IntentStatus.PROCESSED}
        )
        if current.provider_reference == reference and current.status in wanted:
            return current
        return None

    async def _capture_refused(
        self,
        intent: PaymentIntent,
        txn: Transaction,
        error: CardError,
        trigger: Trigger,
        now: datetime,
    ) -> None:
        failed = txn.failed(error.failure_reason, error.message)

        def write(uow: UnitOfWork) -> None:
            current = self._locked(uow, intent)
            transition(current, trigger, now=now)  # still a legal move: raises otherwise
            self._transaction_events(uow, failed, EventType.TRANSACTION_FAILED)
            if trigger is Trigger.CAPTURE_HOLD_GONE:
                self.release_gone_hold(uow, current, now)

        await self._ctx.storage.run(write)

    def release_gone_hold(self, uow: UnitOfWork, current: PaymentIntent, now: datetime) -> None:
        """The provider no longer holds the money of the ``AUTHORIZED`` intent: ``CANCELLED``
        with reason ``expired``, the ledger hold released, its jobs finished.

        In the caller's transaction, ``current`` locked. Past ``authorization_expires_at`` it
        is the expiry the job would have made (the hold's pending movements expire); before,
        the provider let go early (they are voided).
        """
        deadline = current.authorization_expires_at
        if deadline is not None and now >= deadline:
            moved = transition(current, Trigger.EXPIRE, now=now)
            legs: Iterable[Leg] = (ExpirePending(p) for p in current.hold_pending_ids)
        else:
            moved = transition(current, Trigger.CAPTURE_HOLD_GONE, now=now)
            legs = (VoidPending(p) for p in current.hold_pending_ids)
        self._ledger(uow, current, legs, now)
        uow.jobs.finish_for(intent_job_key(current.id))
        stored = moved.intent.model_copy(update={"hold_pending_ids": ()})
        uow.intents.update(stored)
        self._intent_events(uow, moved, stored)

    async def cancel(
        self,
        company_id: int,
        intent_id: int,
        *,
        idempotency: IdempotencyTicket[PaymentIntent] | None = None,
    ) -> PaymentIntent:
        """Void the hold: ``AUTHORIZED`` → ``CANCELLED`` with reason ``voided``."""
        ctx = self._ctx
        async with self._lock(intent_id):
            intent = await self.get(company_id, intent_id)
            now = ctx.clock.now()
            # The capture checks: past the deadline the hold is gone (the expiry job will say so).
            check_capturable(intent, now)
            assert intent.provider_reference is not None  # an AUTHORIZED intent has a charge
            result = await self.provider.void(intent.provider_reference)

            def write(uow: UnitOfWork) -> PaymentIntent:
                current = self._locked(uow, intent)
                moved = transition(current, Trigger.CANCEL, now=now)
                self._ledger(uow, current, (VoidPending(p) for p in current.hold_pending_ids), now)
                stored = moved.intent.model_copy(
                    update={"provider_reference": result.reference, "hold_pending_ids": ()}
                )
                uow.intents.update(stored)
                uow.jobs.finish_for(intent_job_key(intent_id))
                self._intent_events(uow, moved, stored)
                return finish(uow, idempotency, stored)

            return await ctx.storage.run(write)

    # --- refunds ------------------------------------------------------------------------------

    async def refund(
        self,
        company_id: int,
        intent_id: int,
        *,
        amount: int | None = None,
        reason: str | None = None,
        idempotency: IdempotencyTicket[Refund] | None = None,
    ) -> Refund:
        """Refund ``amount`` (default: all that remains) of a ``PROCESSED`` intent.

        The amount is reserved first (``refund.created``), then the provider refunds; a refusal
        marks the refund ``failed``, gives its amount back, and raises the :class:`CardError`.
        A card provider without refunds, or without partial refunds for less than the captured
        amount, is not asked: :class:`InvalidRequestError` (``provider_capability_unsupported``)
        and nothing reserved.
        """
        ctx = self._ctx
        async with self._lock(intent_id):
            now = ctx.clock.now()
            refund_id = ctx.ids.new_id(Refund.prefix)
            journal_id = ctx.ids.new_id("jr")

            def reserve(uow: UnitOfWork) -> tuple[PaymentIntent, Refund]:
                intent = uow.intents.get(intent_id, company_id, for_update=True)
                if intent is None:
                    raise NotFound(
                        f"No such payment intent: {intent_id}", param="payment_intent_id"
                    )
                # The intent's own state first: a refund the interface refuses anyway says why
                # in its terms, whatever the provider could do.
                value = check_refundable(intent, amount)
                if not self.provider.refunds_supported():
                    raise _unsupported("The card provider does not support refunds")
                if value < intent.billing_amount and not self.provider.partial_refunds_supported():
                    raise _unsupported(
                        "The card provider refunds only the whole captured amount "
                        f"({intent.billing_amount}), in one refund",
                        "amount",
                    )
                refund = self.reserve_refund(
                    uow, intent, value, reason, refund_id=refund_id, journal_id=journal_id, now=now
                )
                return intent, refund

            intent, refund = await ctx.storage.run(reserve)
            assert intent.provider_reference is not None  # a PROCESSED intent has a charge
            try:
                result = await self.provider.refund(intent.provider_reference, refund.amount)
            except CardError as exc:
                await ctx.storage.run(self._refund_failed(refund, exc))
                raise
            # Any other failure (a timeout: ProviderError) may have moved the money: the refund
            # stays pending with its reservation, counted as refunded, until reconciled.
            if result.status is CardProviderStatus.REFUND_PENDING:
                # The provider's event about this reference settles it, either way.
                return await ctx.storage.run(
                    lambda uow: finish(
                        uow, idempotency, refund_in_progress(uow, refund, result.reference)
                    )
                )
            return await ctx.storage.run(
                self._refund_succeeded(refund, idempotency, result.reference)
            )

    def reserve_refund(
        self,
        uow: UnitOfWork,
        intent: PaymentIntent,
        value: int,
        reason: str | None,
        *,
        refund_id: str,
        journal_id: str,
        now: datetime,
    ) -> Refund:
        """Reserve a ``pending`` refund of ``value`` out of the locked ``PROCESSED`` intent's
        settlement (``refund.created``), in the caller's transaction; checked by the caller."""
        ctx = self._ctx
        company_id = intent.company_id
        # Differenced against what earlier refunds actually took, so the shares add up to the
        # processing amount even after a refund failed in between.
        share = max(
            0,
            processing_share(intent, intent.amount_refunded + value) - intent.processing_refunded,
        )
        journal = Journal(
            journal_id,
            refund_legs(
                company_id, intent.processing_currency, share, intent.billing_currency, value
            ),
            operation="refund",
            company_id=company_id,
        )
        uow.ledger.apply(journal, now)
        refund = Refund(
            id=refund_id,
            company_id=company_id,
            payment_intent_id=intent.id,
            amount=value,
            currency=intent.billing_currency,
            reason=reason,
            status=RefundStatus.PENDING,
            failure_reason=None,
            created_at=now,
            processing_amount=share,
            pending_ids=tuple(journal.leg_id(i) for i in range(len(journal.legs))),
        )
        uow.records.add(refund)
        uow.intents.update(
            intent.model_copy(
                update={
                    "amount_refunded": intent.amount_refunded + value,
                    "processing_refunded": intent.processing_refunded + share,
                    "refund_ids": (*intent.refund_ids, refund_id),
                }
            )
        )
        ctx.event(uow, EventType.REFUND_CREATED, refund)
        return refund

    def _refund_succeeded(
        self,
        refund: Refund,
        idempotency: IdempotencyTicket[Refund] | None,
        provider_reference: str | None = None,
    ) -> Callable[[UnitOfWork], Refund]:
        # The provider's refund event may have settled it meanwhile (another process).
        return lambda uow: finish(
            uow, idempotency, refund_succeeded(self, uow, refund, provider_reference)
        )

    def _refund_failed(self, refund: Refund, error: CardError) -> Callable[[UnitOfWork], None]:
        def write(uow: UnitOfWork) -> None:
            refund_failed(self, uow, refund, error.failure_reason or error.code)

        return write

    async def get_refund(self, company_id: int, refund_id: str) -> Refund:
        """The company's refund, or :class:`NotFound`."""
        return await self._ctx.read_record(Refund, company_id, refund_id, "refund", "refund_id")

    async def refunds(self, company_id: int, intent_id: int) -> _Refunds:
        """Every refund of the company's intent, newest first."""
        intent = await self.get(company_id, intent_id)

        def read(uow: UnitOfWork) -> _Refunds:
            found = (uow.records.get(Refund, r, company_id) for r in reversed(intent.refund_ids))
            return [refund for refund in found if refund is not None]

        return await self._ctx.storage.run(read, write=False)

    # --- shared -------------------------------------------------------------------------------

    def _locked(self, uow: UnitOfWork, seen: PaymentIntent) -> PaymentIntent:
        """The intent locked for this transaction, refused if it moved since ``seen`` was read
        (another process got there first)."""
        current = uow.intents.get(seen.id, seen.company_id, for_update=True)
        if current is None:  # pragma: no cover - intents are never deleted
            raise NotFound(f"No such payment intent: {seen.id}", param="payment_intent_id")
        if (current.status, current.provider_reference, current.latest_transaction_id) != (
            seen.status,
            seen.provider_reference,
            seen.latest_transaction_id,
        ):
            raise IllegalTransition(
                f"Payment intent {seen.id} changed while this request ran; it is now "
                f"{current.status.value}",
                code="payment_intent_changed",
            )
        return current

    async def _undo(self, reference: str, captured: int | None) -> None:
        """Best effort: release a hold (``captured`` ``None``) or refund a charge the service
        could not record. Logged, never raised: the caller is already failing."""
        try:
            if captured is None:
                await self.provider.void(reference)
            elif self.provider.refunds_supported():
                await self.provider.refund(reference, captured)
            else:
                # Named in full: someone has to refund it by hand at the provider.
                log.error(
                    "could not undo provider charge %s of %d after a lost race: the card "
                    "provider has no refunds; refund it at the provider",
                    reference,
                    captured,
                )
        except TreasuryError:
            log.exception("could not undo provider charge %s after a lost race", reference)

    def _ledger(
        self,
        uow: UnitOfWork,
        owner: PaymentIntent | Refund,
        legs: Iterable[Leg],
        now: datetime | None = None,
        operation: str = "card",
    ) -> None:
        legs = tuple(legs)
        if legs:
            journal = Journal(
                self._ctx.ids.new_id("jr"), legs, operation=operation, company_id=owner.company_id
            )
            uow.ledger.apply(journal, now or self._ctx.clock.now())

    def _schedule(
        self, uow: UnitOfWork, kind: str, resource_id: str, owner: PaymentIntent, due: datetime
    ) -> None:
        uow.jobs.schedule(
            Job(
                id=self._ctx.ids.new_id("job"),
                kind=kind,
                resource_id=resource_id,
                company_id=owner.company_id,
                due_at=due,
            )
        )

    def _after_capture(self, uow: UnitOfWork, intent: PaymentIntent, now: datetime) -> None:
        """Captured money is paid out after the payout delay; a card the provider knows will
        be disputed opens its chargeback after the chargeback delay."""
        key = intent_job_key(intent.id)
        self._schedule(uow, PAYOUT, key, intent, now + self.delay(PAYOUT))
        reference = intent.provider_reference
        if reference is not None and self.provider.chargeback_outcome(reference) is not None:
            self._schedule(uow, CHARGEBACK_OPEN, key, intent, now + self.delay(CHARGEBACK_OPEN))

    def _intent_event(self, uow: UnitOfWork, intent: PaymentIntent, type_: EventType) -> None:
        uow.outbox.add(
            Event(
                id=self._ctx.ids.new_id("evt"),
                type=type_,
                company_id=intent.company_id,
                created_at=self._ctx.clock.now(),
                data={"object": webhook_object(intent)},
            )
        )

    def _intent_events(
        self, uow: UnitOfWork, moved: Transition, stored: PaymentIntent | None = None
    ) -> None:
        for type_ in moved.events:
            self._intent_event(uow, stored or moved.intent, type_)

    def _transaction_events(self, uow: UnitOfWork, txn: Transaction, outcome: EventType) -> None:
        uow.records.add(txn)
        self._ctx.event(uow, EventType.TRANSACTION_CREATED, txn)
        self._ctx.event(uow, outcome, txn)


def attempt_key(intent: PaymentIntent) -> str:
    """The key of the intent's next payment attempt, for the card provider.

    Stable until an attempt's outcome is recorded: a decline or a 3-D Secure challenge records
    a transaction (the next attempt, maybe with another card, gets a new key), while a
    :class:`ProviderError` records nothing, so the retry reuses the key and the provider can
    answer with the first outcome instead of charging twice. Made from the lookup id, which
    is random, rather than the intent id, which another treasury sharing the provider account
    (a test database, a restored backup) reuses; hashed because the lookup id is a secret.
    """
    seed = f"{intent.payment_intent_lookup_id}:{intent.latest_transaction_id or ''}"
    return hashlib.sha256(seed.encode()).hexdigest()[:40]


def challenge_return_path(intent: PaymentIntent) -> str:
    """Where the card provider's 3-D Secure page sends the customer back (the hosted pages'
    ``GET /pay/{lookup_id}/challenge/return``), relative to the server's base URL."""
    return f"/pay/{intent.payment_intent_lookup_id}/challenge/return"


def _takes_return_urls(provider: CardProvider) -> bool:
    # Looked up, as the attempt keys' flag is: providers written before it take no return_url.
    flag = getattr(provider, "return_urls_supported", None)
    return callable(flag) and flag() is True


def _takes_attempt_keys(provider: CardProvider) -> bool:
    # Looked up rather than part of the protocol: providers written before attempt keys
    # existed neither have the flag nor take the keyword.
    flag = getattr(provider, "attempt_keys_supported", None)
    return callable(flag) and flag() is True


#: What a lookup id can look like (the check runs before any query, on every poll).
_LOOKUP_ID = re.compile(r"pil_[A-Za-z0-9_-]{4,60}")


def _is_lookup_id(value: str) -> bool:
    return isinstance(value, str) and _LOOKUP_ID.fullmatch(value) is not None


def _safe_last4(card: CardData | SavedCardReference) -> str | None:
    if isinstance(card, SavedCardReference):
        return card.last4
    digits = "".join(c for c in card.number if c.isdigit())
    return digits[-4:] if len(digits) >= 12 else None
