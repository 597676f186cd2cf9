"""Creating an intent and charging a card: the attempt, its decline, success or 3-D Secure
challenge, as each is recorded."""

from __future__ import annotations

from treasury_core.errors import (
    CardError,
    InvalidRequestError,
    NotFound,
    ProviderDidNotAct,
    ProviderError,
    ValidationFailed,
)
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.jobs import Job
from treasury_core.ledger import Journal
from treasury_core.metadata import checked_metadata
from treasury_core.notifications.events import EventType
from treasury_core.payments.expiry import check_link_open, link_expiry
from treasury_core.payments.intents import (
    CaptureMethod,
    IntentStatus,
    PaymentIntent,
    check_create_rules,
)
from treasury_core.payments.ledger import card_payment_legs, settlement_account
from treasury_core.payments.minimums import check_min_amount
from treasury_core.payments.records import (
    Transaction,
    TransactionStatus,
    TransactionType,
)
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.payments.states import (
    TRANSITIONS,
    IllegalTransition,
    Trigger,
    transition,
)
from treasury_core.ports import CardProvider, UnitOfWork
from treasury_core.ports.card_provider import (
    CallOwner,
    CardData,
    CardProviderResult,
    CardProviderStatus,
    SavedCardReference,
    answers_lookups,
    keeps_saved_cards,
    takes_keyed_calls,
)
from treasury_core.ports.hosted_pages import HostedPages
from treasury_core.services.adapters import Adapters
from treasury_core.services.amount_limits import check_amount
from treasury_core.services.idempotency import bind, finish
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.links import schedule_link_expiry
from treasury_core.services.payments.saved_cards import checked_card
from treasury_core.services.payments.vocabulary import (
    ATTEMPT_IN_DOUBT,
    EXPIRE_AUTHORIZATION,
    RESOLVE_CHARGE,
    PaymentOutcome,
    SavedCards,
    attempt_key,
    call_owner,
    charge_attempt_resource,
    check_publishable_create,
    intent_job_key,
    intent_of_resource,
    intent_resource,
    log,
    new_lookup_id,
    owner_tag,
    safe_last4,
    unsupported,
)
from treasury_core.validation import is_resource_id


class Charging:
    """Create and pay, and record what a charge attempt did (for
    :class:`~treasury_core.services.payments.PaymentService`).

    ``context`` gives currencies, settings, FX quotes, storage, ids and the clock; ``steps``
    the shared intent steps; ``provider`` is charged; ``saved_cards`` finds a ``card_token``'s
    card (without it no token is known); ``hosted_pages`` says where the 3-D Secure page sends
    the customer back.
    """

    def __init__(
        self,
        *,
        context: Adapters,
        steps: IntentSteps,
        provider: CardProvider,
        hosted_pages: HostedPages,
        saved_cards: SavedCards | None = None,
    ) -> None:
        self._ctx = context
        self._steps = steps
        self.provider = provider
        self.hosted_pages = hosted_pages
        self.saved_cards = saved_cards
        # What a create has already checked, so the hot path skips two reads (see ``create``).
        self._known_accounts: set[tuple[int, int]] = set()
        self._known_settlements: set[str] = set()

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
        if idempotency is not None and idempotency.resource is not None:
            resumed = await self._resume_create(company_id, request, idempotency)
            if resumed is not None:
                return resumed
        check_create_rules(request.payment_type, request.capture_method)
        if request.capture_method is CaptureMethod.MANUAL:
            self._steps.check_manual_capture(param="capture_method")
        billing = ctx.currencies.get(request.billing_currency, param="billing_currency").code
        processing = billing
        if request.processing_currency is not None:
            processing = ctx.currencies.get(
                request.processing_currency, param="processing_currency"
            ).code
        check_amount(request.billing_amount, "billing_amount", ctx.config.max_amount)
        check_min_amount(request.billing_amount, billing, ctx.config.min_amounts)
        card = await self._saved_card(company_id, request.card_token)
        try:
            _, processing_amount = await self._steps.quotes.quote(
                billing, processing, request.billing_amount
            )
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
            self._steps.intent_events(uow, moved)
            if card is not None:
                # The charge follows outside this transaction; if its answer is lost, the
                # client's retry with the same key resumes this intent (one charge, one key).
                bind(uow, idempotency, intent_resource(stored.id))
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

    async def _resume_create(
        self,
        company_id: int,
        request: CreateIntentRequest,
        idempotency: IdempotencyTicket[PaymentIntent],
    ) -> PaymentIntent | None:
        """The retry of a create-and-charge whose answer was lost: the intent it created,
        charged again under the same attempt key if still unpaid (a provider keeping keys
        answers with the first charge), else answered as it stands. ``None`` when the key names
        no intent of this company (the request then starts afresh)."""
        intent_id = intent_of_resource(idempotency.resource)
        if intent_id is None:
            return None
        intent = await self._ctx.storage.run(
            lambda uow: uow.intents.get(intent_id, company_id), write=False
        )
        if intent is None:
            return None
        if intent.status is IntentStatus.INITIALIZED and request.card_token is not None:
            card = await self._saved_card(company_id, request.card_token)
            assert card is not None  # a token was given
            outcome = await self._attempt(intent, card, idempotency=idempotency)
            return outcome.intent
        return await self._ctx.storage.run(lambda uow: finish(uow, idempotency, intent))

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
            raise unsupported(
                "This card was saved with a card provider that keeps cards itself; the current "
                "card provider cannot charge it",
                "card_token",
            )
        if isinstance(card, CardData) and keeps:
            raise unsupported(
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
        intent = await self._steps.get_by_lookup_id(None, lookup_id)
        # Checked before anything is recorded: a typo is the customer's to fix (400), not a
        # payment attempt the provider declined.
        card = checked_card(card, self._ctx.clock.now().date())
        return await self._attempt(intent, card)

    async def _attempt(
        self,
        intent: PaymentIntent,
        card: CardData | SavedCardReference,
        *,
        idempotency: IdempotencyTicket[PaymentIntent] | None = None,
    ) -> PaymentOutcome:
        async with self._steps.lock(intent.id):
            intent = await self._steps.get(intent.company_id, intent.id)
            self._steps.check_payable(intent)
            check_link_open(intent, self._ctx.clock.now())
            capture = intent.capture_method is CaptureMethod.AUTOMATIC
            if not capture:
                # An intent made before the provider lost the capability: a hold nobody can
                # capture would only wait for its expiry.
                self._steps.check_manual_capture()
            await self._abandon_challenge(intent)
            kind = TransactionType.SALE if capture else TransactionType.AUTHORIZATION
            key = attempt_key(intent)
            # Our record's name, on what the provider makes: found there later even if this
            # call's answer is lost.
            owner = {"owner": call_owner(intent)} if takes_keyed_calls(self.provider) else {}
            try:
                if isinstance(card, SavedCardReference):
                    if not keeps_saved_cards(self.provider):  # checked by _saved_card
                        raise unsupported("The card provider cannot charge this saved card")
                    result = await self.provider.authorize_saved(
                        card,
                        intent.billing_amount,
                        intent.billing_currency,
                        capture=capture,
                        attempt_key=key,
                        **owner,
                    )
                elif self.provider.attempt_keys_supported() or owner:
                    result = await self.provider.authorize(
                        card,
                        intent.billing_amount,
                        intent.billing_currency,
                        capture=capture,
                        attempt_key=key,
                        **owner,
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
            except ProviderDidNotAct as exc:
                # Nothing was made; the attempt key stays, so a retry is this same attempt.
                raise exc.leaving("payment_intent", intent.id, intent.status.value) from None
            except ProviderError as exc:
                # The provider may hold a charge we never heard of: ask it, from a job, under
                # the attempt's key (the retry of this attempt reuses the key, too).
                await self._ctx.storage.run(
                    lambda uow: self._schedule_charge_resolution(uow, intent, key)
                )
                raise exc.leaving("payment_intent", intent.id, intent.status.value) from None
            except InvalidRequestError as exc:
                if exc.code != ATTEMPT_IN_DOUBT or not answers_lookups(self.provider):
                    raise
                # Another card under the key of an attempt whose answer was lost: ask what the
                # first did before anything else.
                found = await self.provider.find_charge(key)
                if found is None:
                    raise
                adopted = await self._adopt(intent, found, None, None)
                if adopted is None:
                    raise
                return adopted
            if result.requires_action:
                if not self.provider.three_d_secure_supported():
                    # The provider broke its own contract; nothing here could finish the
                    # challenge (complete_action is not called on such a provider).
                    await self._steps.undo(result.reference, None)
                    raise ProviderError(
                        "The card provider asked for 3-D Secure, which it says it does not support"
                    )
                return await self._record_challenge(intent, kind, result, card, idempotency)
            return await self.record_success(intent, kind, result, card.last4, idempotency)

    def _schedule_charge_resolution(self, uow: UnitOfWork, intent: PaymentIntent, key: str) -> None:
        """A job asking the provider what the attempt ``key`` on ``intent`` made (see
        :data:`RESOLVE_CHARGE`), due at once; none for a provider that cannot be asked (its
        events and the customer's retry under the same key settle it)."""
        if not answers_lookups(self.provider):
            return
        uow.jobs.schedule(
            Job(
                id=self._ctx.ids.new_id("job"),
                kind=RESOLVE_CHARGE,
                resource_id=charge_attempt_resource(intent.id, key),
                company_id=intent.company_id,
                due_at=self._ctx.clock.now(),
            )
        )

    async def adopt_charge(
        self,
        company_id: int,
        intent_id: int,
        result: CardProviderResult,
        *,
        amount: int | None = None,
        currency: str | None = None,
        owner: CallOwner | None = None,
    ) -> PaymentIntent | None:
        """Record a charge the provider holds for this intent, found after its answer was lost
        (by a lookup, a provider event naming the intent, or reconciliation).

        ``owner`` is what the charge names as its owner when it was found by that (an event,
        reconciliation) rather than by our attempt's key: unless its ``tag`` is this intent's,
        the charge is another treasury's, made on the same provider account under the same
        ids, and is left alone (logged; ``None``).

        Recorded as a successful attempt would be (or as a 3-D Secure challenge, for
        ``requires_action``) when the intent still waits for payment and the charge matches it
        (``amount`` and ``currency`` when given; a capture for an automatic intent, a hold for a
        manual one). Otherwise the charge is an orphan nobody will follow: a hold is voided, a
        capture refunded, at the provider. The intent as stored when recorded (or already
        recorded with this reference), ``None`` when undone or there was nothing to do.
        """
        async with self._steps.lock(intent_id):
            intent = await self._steps.get(company_id, intent_id)
            if owner is not None and owner.tag != owner_tag(intent):
                log.warning(
                    "charge %s names payment intent %s of company %s but not its tag: another "
                    "treasury's on the same provider account; left alone",
                    result.reference,
                    intent_id,
                    company_id,
                )
                return None
            outcome = await self._adopt(intent, result, amount, currency)
            return None if outcome is None else outcome.intent

    async def _adopt(
        self,
        intent: PaymentIntent,
        result: CardProviderResult,
        amount: int | None,
        currency: str | None,
    ) -> PaymentOutcome | None:
        """:meth:`adopt_charge` with the intent's lock held."""
        status = result.status
        if intent.provider_reference == result.reference:
            return None  # recorded already (by the call, an event or an earlier lookup)
        waiting = await self.waiting_challenge(intent)
        if waiting is not None and waiting.provider_reference == result.reference:
            return None  # the challenge this charge is waiting on is recorded
        expected = (
            CardProviderStatus.CAPTURED
            if intent.capture_method is CaptureMethod.AUTOMATIC
            else CardProviderStatus.AUTHORIZED
        )
        matches = (amount is None or amount == intent.billing_amount) and (
            currency is None or currency == intent.billing_currency
        )
        payable = (intent.capture_method, intent.status, Trigger.PAY_SUCCEEDED) in TRANSITIONS
        if payable and matches and status in (expected, CardProviderStatus.REQUIRES_ACTION):
            kind = (
                TransactionType.SALE
                if intent.capture_method is CaptureMethod.AUTOMATIC
                else TransactionType.AUTHORIZATION
            )
            try:
                if status is CardProviderStatus.REQUIRES_ACTION:
                    await self._abandon_challenge(intent)
                    intent = await self._steps.get(intent.company_id, intent.id)
                    return await self._record_challenge(intent, kind, result, None, None)
                return await self.record_success(intent, kind, result, result.last4, None)
            except IllegalTransition:
                return None  # moved meanwhile; _record_success undid the charge
        log.warning(
            "card provider holds charge %s (%s) for payment intent %s, which cannot take it; "
            "undoing it there",
            result.reference,
            status.value,
            intent.id,
        )
        if status in (CardProviderStatus.AUTHORIZED, CardProviderStatus.REQUIRES_ACTION):
            await self._steps.undo(result.reference, None)
        elif status is CardProviderStatus.CAPTURED:
            await self._steps.undo(
                result.reference, intent.billing_amount if amount is None else amount
            )
        return None

    async def _record_decline(
        self,
        intent: PaymentIntent,
        kind: TransactionType,
        declined: CardError,
        card: CardData | SavedCardReference,
    ) -> None:
        now = self._ctx.clock.now()
        txn = self._steps.transaction(
            intent, kind, TransactionStatus.FAILED, last4=safe_last4(card), error=declined
        )

        def write(uow: UnitOfWork) -> None:
            current = self._steps.locked(uow, intent)
            moved = transition(current, Trigger.PAY_DECLINED, now=now)
            stored = moved.intent.model_copy(update={"latest_transaction_id": txn.id})
            uow.intents.update(stored)
            self._steps.transaction_events(uow, txn, EventType.TRANSACTION_FAILED)
            self._steps.intent_events(uow, moved, stored)

        await self._ctx.storage.run(write)

    async def _record_challenge(
        self,
        intent: PaymentIntent,
        kind: TransactionType,
        result: CardProviderResult,
        card: CardData | SavedCardReference | None,
        idempotency: IdempotencyTicket[PaymentIntent] | None,
    ) -> PaymentOutcome:
        txn = self._steps.transaction(
            intent,
            kind,
            TransactionStatus.REQUIRES_ACTION,
            brand=result.brand,
            last4=result.last4 or (None if card is None else safe_last4(card)),
            reference=result.reference,
        ).model_copy(update={"action_url": result.action_url})

        def write(uow: UnitOfWork) -> PaymentOutcome:
            current = self._steps.locked(uow, intent)
            stored = current.model_copy(update={"latest_transaction_id": txn.id})
            uow.intents.update(stored)
            self._steps.transaction_events(uow, txn, EventType.TRANSACTION_REQUIRES_ACTION)
            self._steps.intent_event(uow, stored, EventType.PAYMENT_INTENT_PROCESSING)
            finish(uow, idempotency, stored)
            return PaymentOutcome(stored, txn)

        try:
            return await self._ctx.storage.run(write)
        except IllegalTransition:
            await self._steps.undo(result.reference, None)
            raise

    async def record_success(
        self,
        intent: PaymentIntent,
        kind: TransactionType,
        result: CardProviderResult,
        last4: str | None,
        idempotency: IdempotencyTicket[PaymentIntent] | None,
        *,
        pending: Transaction | None = None,
    ) -> PaymentOutcome:
        """Record a charge ``result`` on ``intent`` (authorized, or captured for a sale): the
        ledger legs, the attempt (``pending``, a 3-D Secure attempt finished, when given), the
        events and the jobs. An intent that moved meanwhile gets the charge undone, unless the
        provider's event about it recorded it already."""
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
            txn = self._steps.transaction(
                intent,
                kind,
                TransactionStatus.COMPLETED,
                brand=result.brand,
                last4=result.last4 or last4,
                reference=result.reference,
            )

        def write(uow: UnitOfWork) -> PaymentOutcome:
            current = self._steps.locked(uow, intent)
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
                ctx.events.write(uow, EventType.TRANSACTION_COMPLETED, txn)
            else:
                self._steps.transaction_events(uow, txn, EventType.TRANSACTION_COMPLETED)
            self._steps.intent_events(uow, moved, stored)
            key = intent_job_key(current.id)
            if captured:
                self._steps.after_capture(uow, stored, now)
            else:
                assert stored.authorization_expires_at is not None  # just authorized
                self._steps.schedule(
                    uow, EXPIRE_AUTHORIZATION, key, stored, stored.authorization_expires_at
                )
            finish(uow, idempotency, stored)
            return PaymentOutcome(stored, txn)

        try:
            return await ctx.storage.run(write)
        except IllegalTransition:
            recorded = await self._steps.recorded_elsewhere(
                intent, result.reference, captured=captured
            )
            if recorded is not None:
                # The provider's event about this very charge got there first: it is recorded.
                return PaymentOutcome(recorded, txn)
            # Another process paid this intent meanwhile: give the customer's money back.
            await self._steps.undo(result.reference, intent.billing_amount if captured else None)
            raise

    def _challenge_return(self, intent: PaymentIntent) -> dict[str, str]:
        """``return_url`` for ``authorize``, for a provider that takes it and a server that
        knows its public address (config ``public_url``); otherwise nothing."""
        base = self._ctx.config.public_url
        if not base or not self.provider.return_urls_supported():
            return {}
        path = self.hosted_pages.challenge_return_path(intent.payment_intent_lookup_id)
        return {"return_url": base.rstrip("/") + path}

    async def waiting_challenge(self, intent: PaymentIntent) -> Transaction | None:
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

    async def _abandon_challenge(self, intent: PaymentIntent) -> None:
        """A new attempt replaces one still waiting for 3-D Secure: release it at the provider
        and record it as failed, so no challenge is left open behind the customer's back."""
        txn = await self.waiting_challenge(intent)
        if txn is None:
            return
        assert txn.provider_reference is not None  # a requires_action attempt keeps one
        await self._steps.undo(txn.provider_reference, None)
        failed = txn.failed("superseded", "A newer payment attempt replaced this one")

        def write(uow: UnitOfWork) -> None:
            current = uow.records.get(Transaction, txn.id, txn.company_id, for_update=True)
            if current is not None and current.status is TransactionStatus.REQUIRES_ACTION:
                uow.records.update(failed)
                self._ctx.events.write(uow, EventType.TRANSACTION_FAILED, failed)

        await self._ctx.storage.run(write)
