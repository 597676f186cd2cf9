"""A Hypothesis state machine that holds the payments service to the state table of part 3.1.

:class:`PaymentsMachine` wires a sandbox treasury (the sandbox card provider and FX rates, a
:class:`~treasury_core.testing.fakes.clock.FakeClock` for business and wall time,
:class:`~treasury_core.testing.fakes.clock.SequentialIds`) on a storage the caller supplies, opens
one
company, and then mixes, through ``treasury.payments`` directly:

- creating intents (automatic or manual capture, a few currencies including JPY and KWD, some
  with a ``processing_currency`` other than the billing currency; manual capture on a
  ``Tokenization`` intent, which must be refused);
- paying them with every card of the sandbox card table (declines, the 3-D Secure card and its
  challenge passed or failed, the card whose captures are refused, the one whose hold vanishes,
  the two that are disputed later);
- capture, cancel-authorization and refunds (all that remains, part of it, or too much);
- clock advances through ``treasury.sandbox.advance`` (small steps, a day or two, past the 7-day
  hold, and to just before, at and after an authorization's expiry), which run every due job:
  hold expiry, payouts and chargebacks;
- new wallets, so that payouts of captured money have somewhere to land.

:class:`ModelIntent` is the reference: per intent its state, cancellation reason, hold window,
refunded and disputed amounts, how many of each intent event must have fired, and the ledger
pending movements of every authorization hold with the terminal state each must reach. The
machine predicts every outcome from the table and the card number (a decline leaves the intent
where it was; the ``0341`` card's capture is refused and the intent stays ``AUTHORIZED``; the
``0259`` card's capture cancels it with reason ``expired``; 7 days without capture cancel it with
reason ``expired``; …) and every refusal (the error class and ``code``, or the ``failure_reason``
of a card error). After every step it checks:

- :func:`~treasury_core.testing.invariants.check_invariants` (the ledger invariants);
- every stored intent equals the model: status, ``cancellation_reason``, ``authorized_at`` and
  ``authorization_expires_at``, ``amount_refunded``, ``amount_disputed``;
- captured never exceeds authorized: an intent's holds reserve exactly its billing (and
  processing) amount, and what is captured is what was held;
- ``amount_refunded`` is the sum of the intent's non-failed refunds, and at most what was
  captured (invariant 10);
- each hold's pending movements end exactly once, in the state the model expects (posted by a
  capture, voided by a cancel or a vanished hold, expired by the expiry job), and the only
  pending holds in the ledger are those of ``AUTHORIZED`` intents and open chargebacks;
- each intent event fired as often as the table says: ``.created`` once, ``.authorized`` once per
  successful authorization, ``.succeeded`` at most once (exactly when ``PROCESSED``),
  ``.cancelled`` once per cancellation, ``.payment_failed`` once per decline, ``.processing`` once
  per 3-D Secure challenge; refund and chargeback events once per refund and chargeback step;
- payouts add up: an intent's non-failed payouts are its ``processing_paid_out``, and each
  wallet's posted and pending credits are its completed and pending payouts;
- after a refused call (a :class:`~treasury_core.errors.TreasuryError` other than a card
  decline), that nothing changed: ledger, intents, records, events, jobs (invariant 8).

To test your own storage, subclass and override :meth:`PaymentsMachine.make_storage` (a migrated,
empty storage, or a context manager yielding one), or use :func:`payments_machine` /
:func:`payments_machine_test_case` with a factory.

This module needs Hypothesis (a test dependency).
"""

from __future__ import annotations

import unittest
from collections import Counter
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, ClassVar, TypeVar

import hypothesis
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from treasury_core.bootstrap import Treasury, bootstrap
from treasury_core.config import TreasuryConfig
from treasury_core.errors import CardError, NotFound, TreasuryError, ValidationFailed
from treasury_core.ledger import PendingCategory, PendingMovement, PendingStatus
from treasury_core.ledger.invariants import LedgerSnapshot, check_invariants, read_ledger
from treasury_core.notifications.events import Event, EventType
from treasury_core.payments.intents import (
    CancellationReason,
    CaptureMethod,
    IntentFilter,
    IntentStatus,
    PaymentIntent,
    PaymentType,
)
from treasury_core.payments.minimums import min_amount
from treasury_core.payments.records import (
    Chargeback,
    ChargebackStatus,
    Payout,
    PayoutStatus,
    Refund,
    RefundStatus,
    Transaction,
)
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.payments.states import IllegalTransition
from treasury_core.ports.card_provider import CardData
from treasury_core.ports.storage import UnitOfWork
from treasury_core.testing.machines.base import (
    ServiceMachine,
    StorageFactory,
    bind_storage,
    storage_test_case,
)
from treasury_core.testing.machines.payments_model import (
    CARDS,
    INTENT_EVENTS,
    RECORD_EVENTS,
    REFUND_AMOUNTS,
    UNEXPECTED_STATE,
    E,
    ModelCard,
    ModelHold,
    ModelIntent,
    Refusal,
    assert_unchanged,
    cancelled,
    capture_refusal,
    chargeback_step,
    is_authorized,
    is_challenged,
    is_payable,
    is_refundable,
    refund_refusal,
)
from treasury_core.wallets import CreateWalletRequest

__all__ = [
    "CARDS",
    "ModelCard",
    "ModelHold",
    "ModelIntent",
    "PaymentsMachine",
    "payments_machine",
    "payments_machine_test_case",
]

T = TypeVar("T")


class PaymentsMachine(ServiceMachine):
    """Random payment-intent operations through the service, checked against :class:`ModelIntent`.

    Subclass and override :meth:`make_storage` (or use :func:`payments_machine`) to run it on
    your storage; :meth:`make_config` and :meth:`make_treasury` change the wiring (a test can
    swap ``treasury.payments`` for a subclass there); tune the class attributes below.
    """

    #: Billing and processing currencies (JPY has no decimals, KWD three).
    currency_pool: ClassVar[tuple[str, ...]] = ("EUR", "JPY", "KWD", "USD")
    #: The cards customers pay with, and what the machine predicts for each: the sandbox's
    #: table by default; a run against another card provider names that provider's test cards.
    cards: ClassVar[tuple[ModelCard, ...]] = CARDS
    #: Largest generated billing amount, in minor units.
    max_amount: ClassVar[int] = 100_000
    #: Most intents and wallets a run creates.
    max_intents: ClassVar[int] = 5
    max_wallets: ClassVar[int] = 4
    #: The service's delays (decisions.md sandbox defaults and the simulated card network).
    chargeback_open_delay: ClassVar[timedelta] = timedelta(days=1)
    chargeback_resolve_delay: ClassVar[timedelta] = timedelta(days=1)

    def __init__(self) -> None:
        super().__init__()
        self.now = self.clock.now()
        self.intents: dict[int, ModelIntent] = {}
        self.wallets: dict[str, str] = {}  # wallet id → currency
        self.company_id = 0
        self.account_id = 0
        self._treasury: Treasury | None = None

    # Hooks --------------------------------------------------------------------------------------

    def make_config(self) -> TreasuryConfig:
        """Sandbox mode, the sandbox card provider and FX rates."""
        return TreasuryConfig(database_url="memory://", sandbox=True)

    def make_treasury(self, config: TreasuryConfig) -> Treasury:
        """Wire the treasury on the run's storage, fake clock (business and wall) and ids."""
        return bootstrap(
            config,
            storage=self.storage,
            clock=self.clock,
            wall_clock=self.clock,
            ids=self.ids,
            migrate=False,
        )

    def authenticate(self, intent: ModelIntent, passed: bool) -> None:
        """Where the card provider hosts 3-D Secure, play the customer there before the
        challenge is answered (``passed`` or not). The sandbox needs nothing: the answer is the
        challenge page's."""

    @property
    def treasury(self) -> Treasury:
        """The wired treasury (after the first step)."""
        assert self._treasury is not None, "the treasury is wired by the initialize rule"
        return self._treasury

    # Rules --------------------------------------------------------------------------------------

    @initialize(data=st.data())
    def open_company(self, data: st.DataObject) -> None:
        """One company with its merchant account; perhaps a wallet already."""
        with_wallet = data.draw(st.sampled_from([None, *self.currency_pool]), label="wallet")
        self._treasury = self.make_treasury(self.make_config())
        created = self._call("create company", lambda: self.treasury.companies.create_company("Co"))
        self.company_id = created.company.id
        self.account_id = created.merchant_account.id
        if with_wallet is not None:
            self._create_wallet(with_wallet)

    @precondition(lambda self: len(self.wallets) < self.max_wallets)
    @rule(data=st.data())
    def create_wallet(self, data: st.DataObject) -> None:
        """A wallet that payouts in its currency can land in."""
        self._create_wallet(data.draw(st.sampled_from(self.currency_pool), label="currency"))

    @precondition(lambda self: len(self.intents) < self.max_intents)
    @rule(
        data=st.data(),
        method=st.sampled_from(CaptureMethod),
        tokenization=st.sampled_from([False, False, False, True]),
    )
    def create_intent(self, data: st.DataObject, method: CaptureMethod, tokenization: bool) -> None:
        """An intent in a billing currency, sometimes processed in another one."""
        billing = data.draw(st.sampled_from(self.currency_pool), label="billing_currency")
        processing = data.draw(
            st.none() | st.sampled_from(self.currency_pool), label="processing_currency"
        )
        cross = processing is not None and processing != billing
        # No cross-currency amount that converts to nothing, nothing below the minimum charge.
        minimum = min_amount(billing, self.treasury.config.min_amounts)
        low = max(100 if cross else 1, minimum)
        amount = data.draw(
            st.sampled_from([low, self.max_amount]) | st.integers(low, self.max_amount),
            label="billing_amount",
        )
        payment_type = PaymentType.TOKENIZATION if tokenization else PaymentType.CARD_PAYMENT
        request = CreateIntentRequest(
            account_id=self.account_id,
            billing_amount=amount,
            billing_currency=billing,
            payment_type=payment_type,
            capture_method=method,
            processing_currency=processing,
            merchant_reference=f"order-{len(self.intents) + 1}",
        )
        refusal: Refusal | None = None
        if tokenization and method is CaptureMethod.MANUAL:
            refusal = (ValidationFailed, "capture_method_not_supported")
        company = self.company_id
        created = self._expect(
            f"create {method.value} {amount} {billing}->{processing}",
            lambda: self.treasury.payments.create(company, request),
            refusal,
        )
        if created is None:
            return
        assert created.status is IntentStatus.INITIALIZED
        assert created.processing_currency == (processing or billing)
        if not cross:
            assert created.processing_amount == amount
        model = ModelIntent(
            id=created.id,
            lookup_id=created.payment_intent_lookup_id,
            method=method,
            billing_amount=amount,
            billing_currency=billing,
            processing_amount=created.processing_amount,
            processing_currency=created.processing_currency,
        )
        model.events[E.PAYMENT_INTENT_CREATED] += 1
        self.intents[created.id] = model

    @precondition(lambda self: self._some(is_payable))
    @rule(data=st.data())
    def pay(self, data: st.DataObject) -> None:
        """The customer pays a payable intent with one of :attr:`cards`."""
        intent = self._draw_intent(data, is_payable)
        self._pay(intent, data.draw(st.sampled_from(self.cards), label="card"))

    def _pay(self, intent: ModelIntent, card: ModelCard) -> None:
        refusal = None if is_payable(intent) else UNEXPECTED_STATE
        declined = card.declined
        if refusal is None and intent.method is CaptureMethod.AUTOMATIC and card.behaviour == "cd":
            declined = "capture_declined"  # a sale is a capture: refused at once
        lookup = intent.lookup_id
        cvc = "1234" if card.number.startswith("37") else "123"
        card_data = CardData(card.number, 12, 2045, cvc, "Test Customer")
        outcome = self._expect(
            f"pay {intent.id} with {card.number}",
            lambda: self.treasury.payments.pay(lookup, card_data),
            refusal,
            declined=None if refusal else declined,
        )
        if refusal is not None:
            return
        if declined is not None:
            intent.events[E.PAYMENT_INTENT_PAYMENT_FAILED] += 1
            intent.challenge = False
            return
        assert outcome is not None
        if card.three_d_secure:
            assert outcome.transaction.status == "requires_action"
            intent.events[E.PAYMENT_INTENT_PROCESSING] += 1
            intent.challenge = True
            return
        self._paid(intent, card.behaviour)

    @precondition(lambda self: self._some(is_challenged))
    @rule(data=st.data(), passed=st.booleans())
    def complete_challenge(self, data: st.DataObject, passed: bool) -> None:
        """The customer passes or fails a pending 3-D Secure challenge."""
        self._complete_challenge(self._draw_intent(data, is_challenged), passed)

    def _complete_challenge(self, intent: ModelIntent, passed: bool) -> None:
        refusal: Refusal | None = None
        if not intent.challenge:
            refusal = (IllegalTransition, "no_action_required")
        lookup = intent.lookup_id
        if refusal is None:
            self.authenticate(intent, passed)
        self._expect(
            f"{'pass' if passed else 'fail'} challenge of {intent.id}",
            lambda: self.treasury.payments.complete_challenge(lookup, passed=passed),
            refusal,
            declined=None if refusal or passed else "authentication_failed",
        )
        if refusal is not None:
            return
        intent.challenge = False
        if passed:
            self._paid(intent, "ok")
        else:
            intent.events[E.PAYMENT_INTENT_PAYMENT_FAILED] += 1

    @precondition(lambda self: self._some(is_authorized))
    @rule(data=st.data())
    def capture(self, data: st.DataObject) -> None:
        """Capture the full amount of an authorized intent."""
        self._capture(self._draw_intent(data, is_authorized))

    def _capture(self, intent: ModelIntent) -> None:
        refusal = capture_refusal(intent, self.now)
        declined = None
        if refusal is None and intent.behaviour == "cd":
            declined = "capture_declined"
        elif refusal is None and intent.behaviour == "hg":
            declined = "authorization_expired"
        company, intent_id = self.company_id, intent.id
        self._expect(
            f"capture {intent.id}",
            lambda: self.treasury.payments.capture(company, intent_id),
            refusal,
            declined=declined,
        )
        if refusal is not None or intent.behaviour == "cd":
            return  # refused, or declined by the provider: the intent stays AUTHORIZED
        if intent.behaviour == "hg":
            cancelled(intent, CancellationReason.EXPIRED, PendingStatus.VOIDED)
            return
        intent.status = IntentStatus.PROCESSED
        intent.captured_at = self.now
        intent.holds[-1].expected = PendingStatus.POSTED
        intent.events[E.PAYMENT_INTENT_SUCCEEDED] += 1

    @precondition(lambda self: self._some(is_authorized))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        """Cancel an authorization (void the hold)."""
        self._cancel(self._draw_intent(data, is_authorized))

    def _cancel(self, intent: ModelIntent) -> None:
        # Refused as a capture would be: past the deadline the hold is gone.
        refusal = capture_refusal(intent, self.now)
        company, intent_id = self.company_id, intent.id
        self._expect(
            f"cancel {intent.id}",
            lambda: self.treasury.payments.cancel(company, intent_id),
            refusal,
        )
        if refusal is None:
            cancelled(intent, CancellationReason.VOIDED, PendingStatus.VOIDED)

    @precondition(lambda self: self._some(is_refundable))
    @rule(data=st.data(), how=st.sampled_from(REFUND_AMOUNTS))
    def refund(self, data: st.DataObject, how: str) -> None:
        """Refund all that remains of a captured intent, part of it, exactly it, or more."""
        self._refund(data, self._draw_intent(data, is_refundable), how)

    @precondition(lambda self: self.intents)
    @rule(
        data=st.data(),
        action=st.sampled_from(["pay", "pass", "fail", "capture", "cancel", "refund", "unknown"]),
        how=st.sampled_from(REFUND_AMOUNTS),
    )
    def act_on_any_intent(self, data: st.DataObject, action: str, how: str) -> None:
        """Any call on any intent, whatever its state: the refusals of the table."""
        intent = self._draw_intent(data)
        if action == "pay":
            self._pay(intent, data.draw(st.sampled_from(self.cards), label="card"))
        elif action in ("pass", "fail"):
            self._complete_challenge(intent, action == "pass")
        elif action == "capture":
            self._capture(intent)
        elif action == "cancel":
            self._cancel(intent)
        elif action == "refund":
            self._refund(data, intent, how)
        else:
            self._unknown_intent(data.draw(st.sampled_from(["capture", "cancel", "refund"])))

    def _unknown_intent(self, how: str) -> None:
        """An intent id that does not exist: 404, nothing changes."""
        payments, company, missing = self.treasury.payments, self.company_id, 2**31 - 1
        calls: dict[str, Callable[[], Coroutine[Any, Any, object]]] = {
            "capture": lambda: payments.capture(company, missing),
            "cancel": lambda: payments.cancel(company, missing),
            "refund": lambda: payments.refund(company, missing),
        }
        self._expect(f"{how} unknown intent", calls[how], (NotFound, "resource_missing"))

    def _refund(self, data: st.DataObject, intent: ModelIntent, how: str) -> None:
        remaining = intent.refundable
        amount: int | None = {
            "all": None,
            "remaining": remaining,
            "too_much": remaining + 1,
            "huge": self.max_amount * 10,
        }.get(how)
        if how == "some":
            amount = data.draw(st.integers(1, max(remaining, 1)), label="refund amount")
        if amount is not None and amount <= 0:
            amount = 1
        refusal = refund_refusal(intent, amount)
        company, intent_id = self.company_id, intent.id
        refund = self._expect(
            f"refund {amount} of {intent.id}",
            lambda: self.treasury.payments.refund(company, intent_id, amount=amount),
            refusal,
        )
        if refusal is not None:
            return
        assert refund is not None
        want = remaining if amount is None else amount
        assert refund.amount == want, f"refund of {intent.id} is {refund.amount}, not {want}"
        assert refund.status is RefundStatus.SUCCEEDED
        intent.refunded += want
        intent.events[E.REFUND_CREATED] += 1

    @rule(
        seconds=st.sampled_from(
            [1, 60, 3600, 24 * 3600, 2 * 24 * 3600 + 3600, 7 * 24 * 3600, 8 * 24 * 3600]
        )
        | st.integers(1, 10 * 24 * 3600)
    )
    def advance_clock(self, seconds: int) -> None:
        """Move business time on; every due job runs."""
        self._advance(seconds)

    @precondition(
        lambda self: any(i.status is IntentStatus.AUTHORIZED for i in self.intents.values())
    )
    @rule(data=st.data(), offset=st.sampled_from([-1, 0, 1]))
    def advance_to_expiry(self, data: st.DataObject, offset: int) -> None:
        """To just before, exactly at, or just after an authorization's expiry."""
        authorized = [i for i in self.intents.values() if i.status is IntentStatus.AUTHORIZED]
        intent = data.draw(st.sampled_from(sorted(authorized, key=lambda i: i.id)))
        assert intent.expires_at is not None
        seconds = int((intent.expires_at - self.now).total_seconds()) + offset
        self._advance(max(seconds, 1))

    # Checks -------------------------------------------------------------------------------------

    @invariant()
    def service_matches_model(self) -> None:
        """The ledger invariants, then every intent, hold, refund, event and payout."""
        if self._treasury is None:
            return
        check_invariants(self.storage)
        company = self.company_id

        def read(uow: UnitOfWork) -> tuple[Any, ...]:
            wallets = {w: uow.ledger.get_account(w) for w in self.wallets}
            return (
                uow.intents.list(company, IntentFilter(), 10_000, None),
                uow.outbox.list(),
                list(uow.ledger.pendings()),
                uow.records.list(Refund, company, 10_000, None),
                uow.records.list(Chargeback, company, 10_000, None),
                uow.records.list(Payout, company, 10_000, None),
                wallets,
            )

        stored, events, pendings, refunds, chargebacks, payouts, wallets = self.storage.run_sync(
            read, write=False, snapshot=True
        )
        by_id: dict[int, PaymentIntent] = {i.id: i for i in stored}
        assert set(by_id) == set(self.intents), f"stored intents {sorted(by_id)}"
        pending_by_id: dict[str, PendingMovement] = {p.id: p for p in pendings}
        for model in self.intents.values():
            intent = by_id[model.id]
            self._check_intent(model, intent)
            self._check_holds(model, intent, pending_by_id)
            mine = [r for r in refunds if r.payment_intent_id == model.id]
            refunded = sum(r.amount for r in mine if r.status is not RefundStatus.FAILED)
            assert refunded == intent.amount_refunded, (
                f"intent {model.id}: refunds add up to {refunded}, "
                f"amount_refunded is {intent.amount_refunded}"
            )
            assert intent.amount_refunded <= intent.amount_captured, f"{model.id} over-refunded"
            assert intent.amount_captured <= intent.billing_amount
        self._check_events(events)
        self._check_pending_holds(pendings, chargebacks)
        self._check_payouts(by_id, payouts, wallets)

    def _check_intent(self, model: ModelIntent, intent: PaymentIntent) -> None:
        what = f"intent {model.id}"
        have = (
            intent.status,
            intent.cancellation_reason,
            intent.authorized_at,
            intent.authorization_expires_at,
            intent.amount_refunded,
            intent.amount_disputed,
            intent.captured_at,
        )
        want = (
            model.status,
            model.reason,
            model.authorized_at,
            model.expires_at,
            model.refunded,
            model.disputed,
            model.captured_at,
        )
        assert have == want, f"{what} is {have}, the model expects {want}"
        assert (intent.billing_amount, intent.billing_currency) == (
            model.billing_amount,
            model.billing_currency,
        ), f"{what} changed its billing amount"
        current = model.holds[-1].pending_ids if model.status is IntentStatus.AUTHORIZED else ()
        assert intent.hold_pending_ids == current, (
            f"{what} holds {intent.hold_pending_ids}, the model expects {current}"
        )

    def _check_holds(
        self, model: ModelIntent, intent: PaymentIntent, pendings: dict[str, PendingMovement]
    ) -> None:
        """Each authorization's hold reserved exactly the intent's amounts and ended once."""
        for n, hold in enumerate(model.holds):
            billing = processing = 0
            for pending_id in hold.pending_ids:
                pending = pendings.get(pending_id)
                assert pending is not None, f"intent {model.id}: hold {pending_id} is gone"
                assert pending.status is hold.expected, (
                    f"intent {model.id}: hold {n} ({pending_id}) is {pending.status.value}, "
                    f"the model expects {hold.expected.value}"
                )
                assert pending.category is PendingCategory.HOLD
                if pending.debit_account_id == f"world:{intent.billing_currency}":
                    billing += pending.amount
                if pending.credit_account_id.startswith("settlement:"):
                    processing += pending.amount
            assert (billing, processing) == (intent.billing_amount, intent.processing_amount), (
                f"intent {model.id}: hold {n} reserves {billing}/{processing}, not "
                f"{intent.billing_amount}/{intent.processing_amount}"
            )

    def _check_pending_holds(
        self, pendings: list[PendingMovement], chargebacks: list[Chargeback]
    ) -> None:
        """The ledger's open holds are exactly the authorized intents' and open chargebacks'."""
        open_holds = {
            p.id
            for p in pendings
            if p.status is PendingStatus.PENDING and p.category is PendingCategory.HOLD
        }
        expected = {
            pending_id
            for model in self.intents.values()
            if model.status is IntentStatus.AUTHORIZED
            for pending_id in model.holds[-1].pending_ids
        }
        expected |= {
            pending_id
            for chargeback in chargebacks
            if chargeback.status is ChargebackStatus.OPEN
            for pending_id in chargeback.pending_ids
        }
        assert open_holds == expected, f"open holds {open_holds}, expected {expected}"

    def _check_events(self, events: list[Event]) -> None:
        """Each intent and record event fired exactly as often as the model says."""
        have: Counter[tuple[int, EventType]] = Counter()
        for event in events:
            obj = event.data.get("object", {})
            if event.type in INTENT_EVENTS:
                assert isinstance(obj["id"], str), f"{event.type} carries a non-string id"
                have[(int(obj["id"]), event.type)] += 1
            elif event.type in RECORD_EVENTS:
                have[(obj["payment_intent_id"], event.type)] += 1
        want: Counter[tuple[int, EventType]] = Counter()
        for model in self.intents.values():
            for type_, count in model.events.items():
                want[(model.id, type_)] += count
        assert +have == +want, f"events {sorted(have.items())}, model {sorted(want.items())}"

    def _check_payouts(
        self, intents: dict[int, PaymentIntent], payouts: list[Payout], wallets: dict[str, Any]
    ) -> None:
        """Payouts add up per intent and per wallet, in the intent's processing currency."""
        paid: Counter[int] = Counter()
        posted: Counter[str] = Counter()
        pending: Counter[str] = Counter()
        for payout in payouts:
            intent = intents[payout.payment_intent_id]
            assert payout.currency == intent.processing_currency
            if payout.status is PayoutStatus.FAILED:
                assert payout.wallet_id is None
                continue
            assert payout.wallet_id is not None
            assert self.wallets[payout.wallet_id] == payout.currency
            paid[intent.id] += payout.amount
            target = posted if payout.status is PayoutStatus.COMPLETED else pending
            target[payout.wallet_id] += payout.amount
        for intent in intents.values():
            assert intent.processing_paid_out == paid[intent.id], (
                f"intent {intent.id}: paid out {intent.processing_paid_out}, "
                f"payouts add up to {paid[intent.id]}"
            )
            assert intent.processing_paid_out <= intent.processing_amount
        for wallet_id, account in wallets.items():
            balance = 0 if account is None else account.credits_posted - account.debits_posted
            incoming = 0 if account is None else account.credits_pending
            assert (balance, incoming) == (posted[wallet_id], pending[wallet_id]), (
                f"wallet {wallet_id}: {balance} posted, {incoming} pending; payouts say "
                f"{posted[wallet_id]}, {pending[wallet_id]}"
            )

    # Model moves --------------------------------------------------------------------------------

    def _paid(self, intent: ModelIntent, behaviour: str) -> None:
        """A successful payment: a sale (automatic) or a fresh hold (manual)."""
        intent.behaviour = behaviour
        intent.challenge = False  # the latest attempt is this one
        if intent.method is CaptureMethod.AUTOMATIC:
            intent.status = IntentStatus.PROCESSED
            intent.captured_at = self.now
            intent.events[E.PAYMENT_INTENT_SUCCEEDED] += 1
            return
        intent.status = IntentStatus.AUTHORIZED
        intent.reason = None
        intent.authorized_at = self.now
        intent.events[E.PAYMENT_INTENT_AUTHORIZED] += 1
        stored = self.storage.run_sync(lambda uow: uow.intents.get(intent.id, None), write=False)
        assert stored is not None
        intent.holds.append(ModelHold(stored.hold_pending_ids))

    def _advance(self, seconds: int) -> None:
        """Advance the service and the model; the model runs what falls due."""
        now = self._call(f"advance {seconds} s", lambda: self.treasury.sandbox.advance(seconds))
        self.now += timedelta(seconds=seconds)
        assert now == self.now, f"advance({seconds}) answered {now}, the model {self.now}"
        for intent in self.intents.values():
            expires = intent.expires_at
            if intent.status is IntentStatus.AUTHORIZED and expires and self.now >= expires:
                cancelled(intent, CancellationReason.EXPIRED, PendingStatus.EXPIRED)
            chargeback_step(
                intent, self.now, self.chargeback_open_delay, self.chargeback_resolve_delay
            )

    def _create_wallet(self, currency: str) -> None:
        request = CreateWalletRequest(name=f"Payouts {currency}", currency_id=currency)
        company = self.company_id
        wallet = self._call(
            f"create {currency} wallet", lambda: self.treasury.wallets.create(company, request)
        )
        self.wallets[wallet.id] = currency

    def _some(self, which: Callable[[ModelIntent], bool]) -> bool:
        return any(which(i) for i in self.intents.values())

    def _draw_intent(
        self, data: st.DataObject, which: Callable[[ModelIntent], bool] | None = None
    ) -> ModelIntent:
        """An intent for which ``which`` holds (any intent without it)."""
        ids = [i for i in sorted(self.intents) if which is None or which(self.intents[i])]
        return self.intents[data.draw(st.sampled_from(ids), label="intent")]

    def _call(self, what: str, call: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run a call the model accepts; a refusal fails the test."""
        try:
            return self.loop.run_until_complete(call())
        except TreasuryError as error:
            raise AssertionError(f"{what} was refused with {error!r}; the model accepts it") from (
                error
            )

    def _expect(
        self,
        what: str,
        call: Callable[[], Coroutine[Any, Any, T]],
        refusal: Refusal | None,
        *,
        declined: str | None = None,
    ) -> T | None:
        """Run a call; it must be refused exactly when (and how) the model says.

        ``refusal``: the call must raise that class with that code and change nothing.
        ``declined``: it must raise a :class:`CardError` with that ``failure_reason`` (a decline
        is recorded, so it does change the stored state). Otherwise it must succeed.
        """
        if refusal is None and declined is None:
            return self._call(what, call)
        before = self._state() if refusal is not None else None
        try:
            result = self.loop.run_until_complete(call())
        except TreasuryError as error:
            caught = error
        else:
            raise AssertionError(
                f"{what} was accepted ({result!r}); the model expects {refusal or declined}"
            )
        if refusal is not None:
            kind, code = refusal
            wrong = f"{what} was refused with {caught!r}, the model expects {refusal}"
            assert isinstance(caught, kind), wrong
            assert caught.code == code, wrong
            after = self._state()
            assert before is not None
            assert_unchanged(before, after, what)
            return None
        assert isinstance(caught, CardError), f"{what} raised {caught!r}, not a card error"
        assert caught.failure_reason == declined, (
            f"{what} was declined with {caught.failure_reason!r}, the model expects {declined!r}"
        )
        return None

    def _state(self) -> tuple[LedgerSnapshot, tuple[object, ...]]:
        """Everything a refused call must leave alone: ledger, intents, records, events, jobs."""
        ledger = read_ledger(self.storage)
        company = self.company_id
        horizon = self.now + timedelta(days=3650)

        def read(uow: UnitOfWork) -> tuple[object, ...]:
            return (
                uow.intents.list(company, IntentFilter(), 10_000, None),
                [
                    uow.records.list(kind, company, 10_000, None)
                    for kind in (Transaction, Refund, Chargeback, Payout)
                ],
                uow.outbox.list(),
                uow.jobs.due(horizon, 10_000),
            )

        return ledger, self.storage.run_sync(read, write=False, snapshot=True)


def payments_machine(
    factory: StorageFactory, *, name: str = "PaymentsMachineForStorage"
) -> type[PaymentsMachine]:
    """A :class:`PaymentsMachine` subclass whose runs use ``factory()`` for storage.

    Run it with :func:`hypothesis.stateful.run_state_machine_as_test`, or take its ``TestCase``.
    """
    return bind_storage(PaymentsMachine, factory, name)


def payments_machine_test_case(
    factory: StorageFactory,
    *,
    settings: hypothesis.settings | None = None,
    name: str = "PaymentsMachineForStorage",
) -> type[unittest.TestCase]:
    """A ``unittest.TestCase`` class running :class:`PaymentsMachine` on ``factory()`` storages.

    Assign it to a module-level name starting with ``Test`` for pytest or unittest to collect.
    """
    return storage_test_case(PaymentsMachine, factory, settings, name)
