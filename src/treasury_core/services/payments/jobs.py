"""The payments service's jobs on the clock: hold expiry, payouts and chargebacks.

Each handler runs in the job's own transaction: it locks the intent (then the record, if any)
before claiming the job, as every other path that changes an intent locks it first; it does
nothing when the work is no longer due (so running a job twice changes nothing), and finishes the
job either way. The exception is :meth:`PaymentJobs.release_hold`, which calls the card provider
and so runs outside any transaction, after the expiry that scheduled it committed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from treasury_core.errors import CardError, TreasuryError
from treasury_core.jobs import Job
from treasury_core.ledger import ExpirePending, Leg, PostPending
from treasury_core.movements.records import MovementError
from treasury_core.notifications.events import EventType
from treasury_core.payments.intents import IntentStatus, PaymentIntent
from treasury_core.payments.ledger import payout_legs, settlement_account
from treasury_core.payments.records import Chargeback, ChargebackStatus, Payout, PayoutStatus
from treasury_core.payments.states import Trigger, transition
from treasury_core.ports import CardProvider, UnitOfWork
from treasury_core.services.adapters import Adapters
from treasury_core.services.jobs import JobHandler, OutsideJobHandler
from treasury_core.services.payments.chargebacks import (
    apply_legs,
    open_chargeback,
    resolve_chargeback,
)
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.provider_resolution import ProviderResolution
from treasury_core.services.payments.vocabulary import (
    CHARGEBACK_OPEN,
    CHARGEBACK_RESOLVE,
    EXPIRE_AUTHORIZATION,
    PAYOUT,
    PAYOUT_APPLY,
    RELEASE_HOLD,
)
from treasury_core.wallets import Wallet

_WALLET_PAGE = 100

log = logging.getLogger("treasury.payments")

#: How many times a hold's release at the provider is tried, and the delays between tries
#: (doubling from the first to the cap; business time, as every job's).
RELEASE_ATTEMPTS = 10
RELEASE_FIRST_RETRY = timedelta(minutes=1)
RELEASE_MAX_RETRY = timedelta(hours=6)
#: The longest ``resource_id`` storage keeps.
MAX_RESOURCE_ID = 64


class PaymentJobs:
    """The handlers of the payment jobs; :meth:`handlers` is what the runner needs.

    ``context`` gives storage, ids, the clock and events; ``steps`` the payments service's
    shared intent steps; ``provider`` releases holds and foretells chargebacks;
    ``resolution`` runs the jobs asking the provider what a lost call did.
    """

    def __init__(
        self,
        *,
        context: Adapters,
        steps: IntentSteps,
        provider: CardProvider,
        resolution: ProviderResolution,
    ) -> None:
        self._ctx = context
        self._steps = steps
        self._provider = provider
        #: The jobs asking the card provider what a call whose answer was lost did.
        self.resolution = resolution

    def handlers(self) -> dict[str, JobHandler]:
        """Job kind → handler, for :meth:`~treasury_core.services.jobs.JobRunner.register_all`."""
        return {
            EXPIRE_AUTHORIZATION: self.expire_authorization,
            PAYOUT: self.payout,
            PAYOUT_APPLY: self.payout_apply,
            CHARGEBACK_OPEN: self.chargeback_open,
            CHARGEBACK_RESOLVE: self.chargeback_resolve,
        }

    # --- helpers ------------------------------------------------------------------------------

    def _intent(self, uow: UnitOfWork, job: Job) -> PaymentIntent | None:
        prefix = "pi:"
        if not job.resource_id.startswith(prefix) or not job.resource_id[3:].isdigit():
            return None
        return uow.intents.get(int(job.resource_id[3:]), job.company_id, for_update=True)

    def _apply(
        self,
        uow: UnitOfWork,
        company_id: int,
        legs: tuple[Leg, ...],
        op: str,
        source_id: str | None = None,
    ) -> str:
        return apply_legs(self._steps, uow, company_id, legs, op, source_id)

    def _claimed(self, uow: UnitOfWork, job: Job, work: Callable[[], None]) -> bool:
        if uow.jobs.claim(job.id) is None:
            return False
        work()
        uow.jobs.finish(job.id)
        return True

    # --- hold expiry --------------------------------------------------------------------------

    def expire_authorization(self, uow: UnitOfWork, job: Job) -> bool:
        """``AUTHORIZED`` past ``authorization_expires_at`` → ``CANCELLED`` (``expired``); the
        ledger hold expires, and a ``release_hold`` job is scheduled to void the hold at the card
        provider once this has committed. An intent no longer authorized (or re-authorized
        later) is left."""
        intent = self._intent(uow, job)

        def work() -> None:
            now = self._ctx.clock.now()
            if (
                intent is None
                or intent.status is not IntentStatus.AUTHORIZED
                or intent.authorization_expires_at is None
                or now < intent.authorization_expires_at
            ):
                return
            moved = transition(intent, Trigger.EXPIRE, now=now)
            legs = tuple(ExpirePending(p) for p in intent.hold_pending_ids)
            if legs:
                self._apply(uow, intent.company_id, legs, "authorization_expiry")
            stored = moved.intent.model_copy(update={"hold_pending_ids": ()})
            uow.intents.update(stored)
            self._steps.intent_events(uow, moved, stored)
            if intent.provider_reference is not None:
                self._schedule_release(uow, intent.company_id, intent.provider_reference, 0, now)

        return self._claimed(uow, job, work)

    def _schedule_release(
        self, uow: UnitOfWork, company_id: int, reference: str, attempt: int, due: datetime
    ) -> None:
        """Void the hold at the provider once this transaction committed (:meth:`release_hold`).

        In the same transaction as the expiry, so a committed expiry always has its release
        to do, and the release never holds up the expiry."""
        resource_id = f"{attempt}:{reference}"
        if len(resource_id) > MAX_RESOURCE_ID:
            # A job could not be stored; the provider's own expiry releases the hold instead.
            log.error(
                "hold %s not released at the card provider: its reference is too long for a job",
                reference,
            )
            return
        job_id = self._ctx.ids.new_id("job")
        uow.jobs.schedule(Job(job_id, RELEASE_HOLD, resource_id, company_id, due))

    async def release_hold(self, job: Job) -> bool:
        """Void at the card provider the hold an expiry released here (job ``release_hold``).

        Runs outside any transaction, after the expiry committed. Voiding twice is harmless,
        so two runners doing it is too. A refusal (a :class:`CardError`: the charge was
        captured at the provider after all, or the provider does not know it) is logged as an
        error and not retried; any other failure is logged and retried with doubling delays,
        up to :data:`RELEASE_ATTEMPTS` tries.
        """
        attempt_text, _, reference = job.resource_id.partition(":")
        attempt = int(attempt_text) if attempt_text.isdigit() else RELEASE_ATTEMPTS
        retry = False
        try:
            await self._provider.void(reference)
        except CardError as refused:
            log.error(
                "could not release expired hold %s at the card provider (%s); check it there",
                reference,
                refused.failure_reason,
            )
        except Exception as exc:
            retry = attempt + 1 < RELEASE_ATTEMPTS
            log.warning(
                "releasing expired hold %s at the card provider failed (try %d of %d: %s)%s",
                reference,
                attempt + 1,
                RELEASE_ATTEMPTS,
                exc.message if isinstance(exc, TreasuryError) else type(exc).__name__,
                "; will retry" if retry else "; giving up, release it at the provider",
                # Our errors carry our own message; anything else is a bug: its traceback.
                exc_info=not isinstance(exc, TreasuryError),
            )

        def finish(uow: UnitOfWork) -> bool:
            if uow.jobs.claim(job.id) is None:
                return False  # another runner finished it
            if retry:
                delay = min(RELEASE_FIRST_RETRY * 2**attempt, RELEASE_MAX_RETRY)
                due = self._ctx.clock.now() + delay
                self._schedule_release(uow, job.company_id, reference, attempt + 1, due)
            uow.jobs.finish(job.id)
            return True

        return await self._ctx.storage.run(finish)

    def outside_handlers(self) -> dict[str, OutsideJobHandler]:
        """Job kind → handler run outside transactions, for
        :meth:`~treasury_core.services.jobs.JobRunner.register_outside` (the resolution jobs of
        :mod:`~treasury_core.services.payments.provider_resolution` among them)."""
        return {RELEASE_HOLD: self.release_hold, **self.resolution.outside_handlers()}

    # --- payouts ------------------------------------------------------------------------------

    def _payout_wallet(self, uow: UnitOfWork, company_id: int, currency: str) -> Wallet | None:
        """The company's oldest wallet in ``currency`` (wallets list newest first)."""
        oldest: Wallet | None = None
        after: str | None = None
        while True:
            page = uow.wallets.list(company_id, _WALLET_PAGE, after)
            for wallet in page:
                if wallet.currency == currency:
                    oldest = wallet
            if len(page) < _WALLET_PAGE:
                return oldest
            after = page[-1].id

    def payout(self, uow: UnitOfWork, job: Job) -> bool:
        """Pay the captured intent's settled funds into the company's wallet of its processing
        currency: what the intent brought in net of refunds and chargebacks, at most what the
        settlement balance has available. ``payout.created`` and ``.confirmed`` fire now;
        ``.applied`` and ``.completed`` when the payout is applied. Without a wallet in that
        currency the payout fails (``payout.failed``) and the money stays in settlement."""
        intent = self._intent(uow, job)

        def work() -> None:
            if intent is None or intent.status is not IntentStatus.PROCESSED:
                return
            ctx = self._ctx
            currency = intent.processing_currency
            account = uow.ledger.get_account(settlement_account(intent.company_id, currency).id)
            available = 0 if account is None else account.available_balance
            amount = min(intent.processing_unpaid, available)
            if amount <= 0:
                return
            now = ctx.clock.now()
            wallet = self._payout_wallet(uow, intent.company_id, currency)
            payout = Payout(
                id=ctx.ids.new_id(Payout.prefix),
                company_id=intent.company_id,
                payment_intent_id=intent.id,
                wallet_id=None if wallet is None else wallet.id,
                amount=amount,
                currency=currency,
                status=PayoutStatus.PENDING,
                error=None,
                created_at=now,
            )
            if wallet is None:
                failed = payout.model_copy(
                    update={
                        "status": PayoutStatus.FAILED,
                        "error": MovementError(
                            code="no_wallet",
                            message=f"The company has no {currency} wallet to pay out into",
                        ),
                    }
                )
                ctx.events.add_announced(uow, failed, EventType.PAYOUT_CREATED)
                ctx.events.write(uow, EventType.PAYOUT_FAILED, failed)
                return
            legs = payout_legs(intent.company_id, currency, amount, wallet.id)
            journal_id = self._apply(uow, intent.company_id, legs, "payout", payout.id)
            payout = payout.model_copy(update={"pending_ids": (f"{journal_id}.0",)})
            uow.records.add(payout)
            uow.intents.update(
                intent.model_copy(
                    update={"processing_paid_out": intent.processing_paid_out + amount}
                )
            )
            ctx.events.write(uow, EventType.PAYOUT_CREATED, payout)
            ctx.events.write(uow, EventType.PAYOUT_CONFIRMED, payout)
            due = job.due_at + self._steps.delay(PAYOUT_APPLY)
            self._steps.schedule(uow, PAYOUT_APPLY, payout.id, intent, due)

        return self._claimed(uow, job, work)

    def payout_apply(self, uow: UnitOfWork, job: Job) -> bool:
        """Post a pending payout into the wallet: ``payout.applied``, ``payout.completed``."""
        payout = uow.records.get(Payout, job.resource_id, job.company_id, for_update=True)

        def work() -> None:
            if payout is None or payout.status is not PayoutStatus.PENDING:
                return
            legs = tuple(PostPending(p) for p in payout.pending_ids)
            self._apply(uow, payout.company_id, legs, "payout_apply", payout.id)
            done = payout.model_copy(update={"status": PayoutStatus.COMPLETED})
            uow.records.update(done)
            self._ctx.events.write(uow, EventType.PAYOUT_APPLIED, done)
            self._ctx.events.write(uow, EventType.PAYOUT_COMPLETED, done)

        return self._claimed(uow, job, work)

    # --- chargebacks --------------------------------------------------------------------------

    def chargeback_open(self, uow: UnitOfWork, job: Job) -> bool:
        """The card network disputes what remains of the charge: hold it out of settlement
        (``chargeback.created``) until the dispute is decided."""
        intent = self._intent(uow, job)

        def work() -> None:
            if intent is None or intent.status is not IntentStatus.PROCESSED:
                return
            reference = intent.provider_reference
            outcome = None if reference is None else self._provider.chargeback_outcome(reference)
            amount = intent.amount_refundable
            if outcome is None or amount <= 0:
                return
            # The evidence window: the merchant may answer until the dispute is decided.
            due = job.due_at + self._steps.delay(CHARGEBACK_RESOLVE)
            _, chargeback = open_chargeback(
                self._steps, uow, intent, amount, outcome=outcome, evidence_due_by=due
            )
            self._steps.schedule(uow, CHARGEBACK_RESOLVE, chargeback.id, intent, due)

        return self._claimed(uow, job, work)

    def chargeback_resolve(self, uow: UnitOfWork, job: Job) -> bool:
        """Decide an open chargeback: won releases the held amount (``chargeback.completed``,
        ``.reversed``), lost posts it to the card network (``chargeback.failed``)."""
        seen = uow.records.get(Chargeback, job.resource_id, job.company_id)
        # Intent first, then the record: the order every path that changes an intent uses.
        intent = (
            None
            if seen is None
            else uow.intents.get(seen.payment_intent_id, job.company_id, for_update=True)
        )
        chargeback = uow.records.get(Chargeback, job.resource_id, job.company_id, for_update=True)

        def work() -> None:
            if (
                chargeback is None
                or intent is None
                or chargeback.status is not (ChargebackStatus.OPEN)
            ):
                return
            resolve_chargeback(self._steps, uow, intent, chargeback, chargeback.outcome, job.due_at)

        return self._claimed(uow, job, work)
