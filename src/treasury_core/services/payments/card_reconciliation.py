"""Card reconciliation: the card provider's recent charges against the treasury's records.

A resolution job settles each call whose answer was lost, and the provider's events name our
records; this is the net under both, for what neither caught (an event lost for good, a job
that gave up, a charge made while our process died). Each run asks the provider for every
charge made in the last ``card_reconciliation_window_seconds`` (``recent_charges``) and, for
each whose owner names an intent of that very company:

=============================================  ================================================
what the provider holds                        what is done
=============================================  ================================================
the intent's own hold, the intent cancelled    released at the provider (``orphan_charge``):
here                                           the release's call was lost for good
the intent's own charge                        its captured and refunded amounts are compared
                                               with ours (refunds still pending here may or may
                                               not be counted there); a difference is reported
                                               (``captured_differs``, ``refunded_differs``),
                                               never repaired by itself
another charge holding money, for an intent    handed to ``PaymentService.adopt_charge``:
waiting for payment                            recorded on the intent (``charge_adopted``)
another charge holding money, for an intent    handed to ``adopt_charge``, which releases the
paid otherwise, cancelled, or for other        hold or refunds the capture at the provider
amounts                                        (``orphan_charge``, open until a later run finds
                                               it holding nothing)
a charge with no owner, or naming no intent    ignored: made without us
=============================================  ================================================

Then every refund and attempt still in doubt (``refund_in_doubt``, ``charge_in_doubt``) is
asked about once more. Each finding is a
:class:`~treasury_core.payments.card_differences.CardDifference`, kept once per charge (or
record) and kind, announced by ``treasury.card.reconciliation.difference`` to the operator.

The worker runs :meth:`CardReconciliation.run_if_due` on each pass; the run's time is kept in
storage (:class:`~treasury_core.payments.card_differences.ReconciliationMark`), so that all the
workers over one database run it once per ``card_reconciliation_seconds`` of business time
between them. Calls to the provider are made outside transactions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from treasury_core.errors import TreasuryError
from treasury_core.movements.bank_files import OPERATOR
from treasury_core.payments.card_differences import (
    CardDifference,
    CardDifferenceKind,
    CardDifferenceStatus,
    ReconciliationMark,
)
from treasury_core.payments.intents import IntentStatus, PaymentIntent
from treasury_core.payments.records import Refund, RefundStatus
from treasury_core.ports import CardProvider, UnitOfWork
from treasury_core.ports.card_provider import (
    CardProviderLookups,
    CardProviderResult,
    CardProviderStatus,
    ProviderCharge,
    answers_lookups,
    takes_keyed_calls,
)
from treasury_core.services.adapters import Adapters
from treasury_core.services.payments.card_differences import (
    Found,
    note_difference,
    resolve_difference,
)
from treasury_core.services.payments.charging import Charging
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.provider_resolution import settle_refund_by_answer
from treasury_core.services.payments.vocabulary import (
    charge_attempt_resource,
    refund_key,
    void_key,
)

log = logging.getLogger("treasury.card_reconciliation")

_S = CardProviderStatus
_K = CardDifferenceKind
#: The most open differences one run asks about again.
IN_DOUBT_PER_RUN = 500


def holds_money(charge: ProviderCharge) -> bool:
    """Whether the customer's money is held or taken by ``charge`` (and not given back)."""
    if charge.status is _S.AUTHORIZED:
        return True
    return charge.status is _S.CAPTURED and charge.amount_captured > charge.amount_refunded


@dataclass
class ReconciliationReport:
    """What one run found and did."""

    #: Charges the provider listed.
    charges: int = 0
    #: Charges recorded on intents that waited for them.
    adopted: int = 0
    #: Charges undone at the provider (their intents were paid otherwise or cancelled).
    orphans: int = 0
    #: Charges whose amounts differ from ours (reported, not repaired).
    differing: int = 0
    #: Refunds and attempts in doubt whose outcome this run learnt.
    resolved: int = 0
    #: Why the run could not ask the provider, if it could not.
    failed: str | None = None
    #: Charges the run could not check (logged with their error).
    errors: list[str] = field(default_factory=list)


class CardReconciliation:
    """Compares the card provider's recent charges with our records (see the module).

    ``provider`` is asked, ``charging`` records a charge found for an intent that waits for
    one, under the intent locks of ``steps``; ``context`` gives storage, ids and the clock.
    ``every`` is how often :meth:`run_if_due` runs (``None``: never), ``window`` how far back
    a run looks.
    """

    def __init__(
        self,
        *,
        context: Adapters,
        steps: IntentSteps,
        provider: CardProvider,
        charging: Charging,
        every: timedelta | None,
        window: timedelta,
    ) -> None:
        self._ctx = context
        self._steps = steps
        self._provider = provider
        self._charging = charging
        self.every = every
        self.window = window
        # When this process next looks at the stored mark (business time): between looks,
        # run_if_due costs nothing.
        self._next_look: datetime | None = None

    def supported(self) -> bool:
        """Whether the card provider can be asked (``lookups_supported``)."""
        return answers_lookups(self._provider)

    # --- when -------------------------------------------------------------------------------

    async def run_if_due(self) -> ReconciliationReport | None:
        """Run once a period is up since the last run of any worker; ``None`` when not due
        (or reconciliation is off: ``every`` unset, or a provider that cannot be asked)."""
        every = self.every
        if every is None or not self.supported():
            return None
        now = self._ctx.clock.now()
        if self._next_look is not None and now < self._next_look:
            return None
        if not await self._claim(now, every):
            return None
        return await self.run()

    async def _claim(self, now: datetime, every: timedelta) -> bool:
        """Take this period's run for this process: the stored mark moves to ``now``."""

        def claim(uow: UnitOfWork) -> tuple[bool, datetime]:
            mark = uow.records.get(
                ReconciliationMark, ReconciliationMark.ID, OPERATOR, for_update=True
            )
            if mark is None:
                uow.records.add(
                    ReconciliationMark(
                        id=ReconciliationMark.ID,
                        company_id=OPERATOR,
                        last_run_at=now,
                        created_at=now,
                    )
                )
                return True, now + every
            if now < mark.last_run_at + every:
                return False, mark.last_run_at + every
            uow.records.update(mark.model_copy(update={"last_run_at": now}))
            return True, now + every

        try:
            claimed, self._next_look = await self._ctx.storage.run(claim)
        except Exception:
            # Two workers' first runs, at once, each adding the mark: the other one won.
            mark = await self._ctx.storage.run(
                lambda uow: uow.records.get(ReconciliationMark, ReconciliationMark.ID, OPERATOR),
                write=False,
            )
            if mark is None:
                raise
            self._next_look = mark.last_run_at + every
            return False
        return claimed

    # --- one run ----------------------------------------------------------------------------

    async def run(self) -> ReconciliationReport:
        """One run, now (see the module docstring)."""
        report = ReconciliationReport()
        provider = self._provider
        if not answers_lookups(provider):
            report.failed = "the card provider cannot be asked for its charges"
            return report
        since = self._ctx.clock.now() - self.window
        try:
            charges = await provider.recent_charges(since)
        except Exception as exc:
            report.failed = exc.message if isinstance(exc, TreasuryError) else type(exc).__name__
            log.warning(
                "card reconciliation: the card provider did not list its charges (%s); "
                "the next run asks again",
                report.failed,
                exc_info=not isinstance(exc, TreasuryError),
            )
            return report
        report.charges = len(charges)
        for charge in charges:
            try:
                await self._check(charge, report)
            except Exception as exc:
                # One charge that cannot be checked must not keep the others unchecked.
                log.exception("card reconciliation: checking charge %s failed", charge.reference)
                report.errors.append(f"{charge.reference}: {type(exc).__name__}")
        await self._ask_in_doubt(provider, report)
        log.info(
            "card reconciliation: %d charges since %s; %d adopted, %d orphans undone, "
            "%d with other amounts, %d in doubt resolved, %d not checked",
            report.charges,
            since.isoformat(),
            report.adopted,
            report.orphans,
            report.differing,
            report.resolved,
            len(report.errors),
        )
        return report

    async def _intent(self, company_id: int, intent_id: int) -> PaymentIntent | None:
        return await self._ctx.storage.run(
            lambda uow: uow.intents.get(intent_id, company_id), write=False
        )

    async def _check(self, charge: ProviderCharge, report: ReconciliationReport) -> None:
        owner = charge.owner
        if owner is None:
            return  # made without us (the provider's dashboard, another system)
        intent = await self._intent(owner.company_id, owner.payment_intent_id)
        if intent is None:
            log.info(
                "card reconciliation: charge %s names intent %d of company %d, which is not "
                "ours; ignored",
                charge.reference,
                owner.payment_intent_id,
                owner.company_id,
            )
            return
        if intent.provider_reference == charge.reference:
            if intent.status is IntentStatus.CANCELLED and charge.status is _S.AUTHORIZED:
                await self._release(intent, charge, report)
                return
            await self._ctx.storage.run(lambda uow: self._compare(uow, intent, charge, report))
            return
        if not holds_money(charge):
            await self._ctx.storage.run(
                lambda uow: resolve_difference(
                    self._ctx, uow, _K.ORPHAN_CHARGE, charge.reference, "it holds nothing"
                )
            )
            return
        await self._adopt_or_undo(intent, charge, report)

    async def _adopt_or_undo(
        self, intent: PaymentIntent, charge: ProviderCharge, report: ReconciliationReport
    ) -> None:
        found = CardProviderResult(reference=charge.reference, status=charge.status)
        failure = ""
        adopted = None
        try:
            adopted = await self._charging.adopt_charge(
                intent.company_id,
                intent.id,
                found,
                amount=charge.amount,
                currency=charge.currency,
                owner=charge.owner,
            )
        except TreasuryError as exc:
            failure = f"; undoing it failed ({exc.message}), the next run tries again"
        now = await self._intent(intent.company_id, intent.id)
        if adopted is None and now is not None and now.provider_reference == charge.reference:
            return  # recorded meanwhile by its job or event: nothing differs
        held = charge.amount_captured or charge.amount
        if adopted is not None:
            report.adopted += 1
            adoption = _found(
                _K.CHARGE_ADOPTED,
                intent,
                charge,
                f"the provider held {charge.status.value} charge {charge.reference} for the "
                "intent, which waited for payment; recorded on it",
                held,
                adopted.billing_amount,
            )

            def adopt(uow: UnitOfWork) -> None:
                note_difference(self._ctx, uow, adoption, resolved=True)
                if charge.attempt_key is not None:
                    resource = charge_attempt_resource(intent.id, charge.attempt_key)
                    resolve_difference(
                        self._ctx, uow, _K.CHARGE_IN_DOUBT, resource, "adopted by reconciliation"
                    )

            await self._ctx.storage.run(adopt)
            return
        report.orphans += 1
        undone = "its capture refunded" if charge.status is _S.CAPTURED else "its hold released"
        orphan = _found(
            _K.ORPHAN_CHARGE,
            intent,
            charge,
            f"{_why_orphan(intent, charge)}: {undone} at the provider{failure}",
            held,
            0,
        )
        await self._ctx.storage.run(lambda uow: note_difference(self._ctx, uow, orphan))

    async def _release(
        self, intent: PaymentIntent, charge: ProviderCharge, report: ReconciliationReport
    ) -> None:
        """The intent's hold was released here (its expiry, a cancel) but the provider still
        holds it (the release's call was lost for good): release it there too."""
        provider = self._provider
        failure = ""
        try:
            if takes_keyed_calls(provider):
                await provider.void(charge.reference, key=void_key(intent))  # type: ignore[call-arg]
            else:
                await provider.void(charge.reference)
        except TreasuryError as exc:
            failure = f"; releasing it failed ({exc.message}), the next run tries again"
        report.orphans += 1
        detail = (
            f"the intent is cancelled, the provider still held its hold: released there{failure}"
        )
        orphan = _found(_K.ORPHAN_CHARGE, intent, charge, detail, charge.amount, 0)
        await self._ctx.storage.run(lambda uow: note_difference(self._ctx, uow, orphan))

    def _compare(
        self,
        uow: UnitOfWork,
        intent: PaymentIntent,
        charge: ProviderCharge,
        report: ReconciliationReport,
    ) -> None:
        """The intent's own charge: captured and refunded amounts against ours."""
        if not holds_money(charge):
            resolve_difference(self._ctx, uow, _K.ORPHAN_CHARGE, charge.reference, "released")
        ours_captured = intent.billing_amount if intent.status is IntentStatus.PROCESSED else 0
        refunds = [uow.records.get(Refund, r, intent.company_id) for r in intent.refund_ids]
        succeeded = sum(r.amount for r in refunds if r and r.status is RefundStatus.SUCCEEDED)
        pending = sum(r.amount for r in refunds if r and r.status is RefundStatus.PENDING)
        same_currency = charge.currency == intent.billing_currency
        checks = (
            (
                _K.CAPTURED_DIFFERS,
                same_currency and charge.amount_captured == ours_captured,
                charge.amount_captured,
                ours_captured,
                f"the provider captured {charge.amount_captured} {charge.currency}; "
                f"recorded: {ours_captured} {intent.billing_currency}",
            ),
            (
                _K.REFUNDED_DIFFERS,
                same_currency and succeeded <= charge.amount_refunded <= succeeded + pending,
                charge.amount_refunded,
                succeeded,
                f"the provider refunded {charge.amount_refunded} {charge.currency}; recorded: "
                f"{succeeded} {intent.billing_currency} succeeded and {pending} pending",
            ),
        )
        for kind, agree, theirs, ours, detail in checks:
            if agree:
                resolve_difference(self._ctx, uow, kind, charge.reference, "the amounts agree")
                continue
            report.differing += 1
            note_difference(self._ctx, uow, _found(kind, intent, charge, detail, theirs, ours))

    # --- in doubt ---------------------------------------------------------------------------

    async def _ask_in_doubt(
        self, lookups: CardProviderLookups, report: ReconciliationReport
    ) -> None:
        """Ask once more about each refund and attempt still in doubt."""
        open_ = await self._ctx.storage.run(
            lambda uow: uow.records.with_status(
                CardDifference, CardDifferenceStatus.OPEN.value, IN_DOUBT_PER_RUN
            ),
            write=False,
        )
        for difference in open_:
            try:
                if difference.kind is _K.REFUND_IN_DOUBT:
                    report.resolved += await self._ask_refund(lookups, difference)
                elif difference.kind is _K.CHARGE_IN_DOUBT:
                    report.resolved += await self._ask_charge(lookups, difference)
            except Exception as exc:
                log.warning(
                    "card reconciliation: asking about %s %s failed (%s); the next run asks again",
                    difference.kind.value,
                    difference.refund_id or difference.payment_intent_id,
                    exc.message if isinstance(exc, TreasuryError) else type(exc).__name__,
                )

    async def _ask_refund(self, lookups: CardProviderLookups, difference: CardDifference) -> bool:
        company, refund_id = difference.merchant_company_id, difference.refund_id
        if company is None or refund_id is None:
            return False

        def read(uow: UnitOfWork) -> tuple[Refund | None, PaymentIntent | None]:
            refund = uow.records.get(Refund, refund_id, company)
            if refund is None:
                return None, None
            return refund, uow.intents.get(refund.payment_intent_id, company)

        refund, intent = await self._ctx.storage.run(read, write=False)
        if refund is None or intent is None or refund.status is not RefundStatus.PENDING:
            how = "the refund was settled meanwhile"
            return await self._ctx.storage.run(
                lambda uow: resolve_difference(self._ctx, uow, _K.REFUND_IN_DOUBT, refund_id, how)
            )
        reference = intent.provider_reference
        if reference is None:
            return False
        async with self._steps.lock(intent.id):
            found = await lookups.find_refund(reference, refund_key(intent, refund.id))
            settled = await self._ctx.storage.run(
                lambda uow: settle_refund_by_answer(self._steps, uow, refund, found)
            )
        return settled.outcome != "unchanged"

    async def _ask_charge(self, lookups: CardProviderLookups, difference: CardDifference) -> bool:
        company, intent_id = difference.merchant_company_id, difference.payment_intent_id
        key = difference.attempt_key
        if company is None or intent_id is None or key is None:
            return False
        found = await lookups.find_charge(key)
        how = "the provider made no charge"
        if found is not None and found.status in (_S.AUTHORIZED, _S.CAPTURED, _S.REQUIRES_ACTION):
            adopted = await self._charging.adopt_charge(company, intent_id, found)
            how = f"charge {found.reference} " + (
                "recorded on the intent" if adopted is not None else "undone or already recorded"
            )
        elif found is not None:
            how = f"charge {found.reference} holds nothing"
        resource = charge_attempt_resource(intent_id, key)
        return await self._ctx.storage.run(
            lambda uow: resolve_difference(self._ctx, uow, _K.CHARGE_IN_DOUBT, resource, how)
        )

    # --- what the operator sees -------------------------------------------------------------

    async def differences(
        self, status: CardDifferenceStatus | None = CardDifferenceStatus.OPEN, limit: int = 1000
    ) -> list[CardDifference]:
        """Differences, oldest first: the open ones, the resolved ones, or all (``None``)."""
        statuses = list(CardDifferenceStatus) if status is None else [status]

        def read(uow: UnitOfWork) -> list[CardDifference]:
            rows: list[CardDifference] = []
            for wanted in statuses:
                rows += uow.records.with_status(CardDifference, wanted.value, limit)
            return rows

        found = await self._ctx.storage.run(read, write=False)
        return sorted(found, key=lambda d: d.created_at)[:limit]

    async def refunds_awaiting_answer(self, limit: int = 1000) -> list[Refund]:
        """Refunds pending with no answer from the provider yet (no provider reference), of
        every company, oldest first: in flight, or in doubt while their job asks."""
        pending = await self._ctx.storage.run(
            lambda uow: uow.records.with_status(Refund, RefundStatus.PENDING.value, limit),
            write=False,
        )
        return [refund for refund in pending if refund.provider_reference is None]


def _found(
    kind: CardDifferenceKind,
    intent: PaymentIntent,
    charge: ProviderCharge,
    detail: str,
    theirs: int,
    ours: int,
) -> Found:
    return Found(
        kind=kind,
        subject=charge.reference,
        detail=detail,
        merchant_company_id=intent.company_id,
        payment_intent_id=intent.id,
        provider_reference=charge.reference,
        currency=charge.currency,
        provider_amount=theirs,
        recorded_amount=ours,
    )


def _why_orphan(intent: PaymentIntent, charge: ProviderCharge) -> str:
    if intent.status is IntentStatus.CANCELLED:
        return "the intent is cancelled"
    if intent.status is not IntentStatus.INITIALIZED:
        return f"the intent was paid by charge {intent.provider_reference}"
    return (
        f"the charge is for {charge.amount} {charge.currency}, the intent for "
        f"{intent.billing_amount} {intent.billing_currency}"
    )
