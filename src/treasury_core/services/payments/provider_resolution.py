"""The jobs that ask the card provider what a call whose answer was lost did, and record it.

A plain :class:`~treasury_core.errors.ProviderError` from a money-moving call (a timeout, a
connection dropped after the provider acted) leaves its record in doubt: the payments service
keeps it so and schedules one of these jobs, due at once, in the same transaction. Each runs
outside any transaction (:data:`~treasury_core.services.movements.settlement.OutsideJobHandler`):
it asks
the provider (:class:`~treasury_core.ports.card_provider.CardProviderLookups`), then records
the answer and finishes the job in one transaction of its own.

``resolve_refund`` (resource: the refund's id)
    A refund no longer ``pending`` is done. Otherwise :meth:`find_refund` with the refund's key:
    ``refunded`` succeeds it, ``refund_pending`` keeps it pending with the provider's reference
    (the provider's event about it settles it), ``refund_failed`` fails it and ``None`` (the
    provider made no refund) fails it with :data:`NOT_MADE`; a failed refund gives its
    reservation back, and ``treasury.refund.updated`` tells of every change.
``resolve_charge`` (resource ``"pi:{intent id}:{attempt key}"``, ``charge_attempt_resource``)
    :meth:`find_charge` with the attempt's key: a charge found is handed to
    ``PaymentService.adopt_charge``, which records it on an intent still waiting for payment
    and undoes it at the provider otherwise. ``None`` is asked again after 1, 2 and 4 minutes
    (a provider's search may lag behind its charges: Stripe's by up to a minute) before it is
    taken as "nothing was made".

A failure while asking is asked again with doubling delays (:data:`FIRST_RETRY` up to
:data:`MAX_RETRY`), :data:`ASKS` times in all; after the last, and at once for a provider
that cannot be asked, the record is left as it is (a refund pending, its reservation held) and
reported: an error in the log and a ``refund_in_doubt`` or ``charge_in_doubt``
:class:`~treasury_core.payments.card_differences.CardDifference` for the operator, which card
reconciliation and the provider's events resolve later.

A retry is a new job of the same kind whose resource is ``"{ask}:{resource}"``. Two runners may
both ask before one claims the job; asking is harmless and recording is idempotent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from treasury_core.errors import ProviderError, TreasuryError
from treasury_core.jobs import Job
from treasury_core.payments.card_differences import CardDifferenceKind
from treasury_core.payments.intents import PaymentIntent
from treasury_core.payments.records import Refund, RefundStatus
from treasury_core.ports import CardProvider, UnitOfWork
from treasury_core.ports.card_provider import (
    CardProviderLookups,
    CardProviderResult,
    CardProviderStatus,
    answers_lookups,
)
from treasury_core.services.adapters import Adapters
from treasury_core.services.jobs import OutsideJobHandler
from treasury_core.services.payments.card_differences import (
    Found,
    note_difference,
    resolve_difference,
)
from treasury_core.services.payments.charging import Charging
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.refund_outcomes import (
    refund_failed,
    refund_in_progress,
    refund_succeeded,
)
from treasury_core.services.payments.vocabulary import (
    RESOLVE_CHARGE,
    RESOLVE_REFUND,
    charge_attempt_resource,
    refund_key,
)

log = logging.getLogger("treasury.payments")

#: How many times a question is asked when the provider fails to answer it, and the delays
#: between (doubling from the first to the cap; business time, as every job's).
ASKS = 8
FIRST_RETRY = timedelta(minutes=1)
MAX_RETRY = timedelta(hours=1)
#: How many times ``find_charge`` or ``find_refund`` must find nothing before nothing is taken
#: as made: asked at once, then after 1, 2 and 4 minutes (a call our side gave up on may still
#: be running at the provider, and a provider's search may lag).
NOT_FOUND_ASKS = 4
#: The ``failure_reason`` of a refund the provider says it never made.
NOT_MADE = "not_made_by_provider"
#: The ``failure_reason`` of a refund the provider refused after its answer was lost.
FAILED_AT_PROVIDER = "refund_failed"
#: The longest ``resource_id`` storage keeps.
MAX_RESOURCE_ID = 64

_S = CardProviderStatus
#: What ``find_charge`` answers about a charge that holds, or may come to hold, money.
_ADOPTABLE = frozenset({_S.AUTHORIZED, _S.CAPTURED, _S.REQUIRES_ACTION})


def split_resource(resource_id: str) -> tuple[int, str]:
    """``(ask, resource)`` of a resolution job: how many asks came before this one (0 for the
    job the payments service scheduled), and the resource it is about."""
    head, sep, rest = resource_id.partition(":")
    if sep and head.isascii() and head.isdigit():
        return int(head), rest
    return 0, resource_id


def parse_charge_resource(resource: str) -> tuple[int, str] | None:
    """``(intent id, attempt key)`` of a ``resolve_charge`` resource, ``None`` if malformed."""
    prefix, _, rest = resource.partition(":")
    intent_text, _, key = rest.partition(":")
    if prefix != "pi" or not (intent_text.isascii() and intent_text.isdigit()) or not key:
        return None
    return int(intent_text), key


@dataclass(frozen=True, slots=True)
class Settled:
    """What one answer about a refund did to it."""

    refund: Refund
    #: Where it stands now: ``succeeded``, ``failed``, ``in_progress`` (pending at the
    #: provider, its reference known) or ``unchanged``.
    outcome: str


def settle_refund_by_answer(
    steps: IntentSteps, uow: UnitOfWork, refund: Refund, found: CardProviderResult | None
) -> Settled:
    """Record what the provider answered about the pending ``refund`` (``find_refund``), in
    the caller's transaction, and resolve its ``refund_in_doubt`` difference if it has one."""
    ctx = steps.context
    if found is None:
        stored = refund_failed(steps, uow, refund, NOT_MADE)
        how = "the provider made no refund"
    elif found.status is _S.REFUNDED:
        stored = refund_succeeded(steps, uow, refund, found.reference)
        how = f"refunded by the provider as {found.reference}"
    elif found.status is _S.REFUND_PENDING:
        stored = refund_in_progress(uow, refund, found.reference)
        how = f"pending at the provider as {found.reference}"
    elif found.status is _S.REFUND_FAILED:
        stored = refund_failed(steps, uow, refund, FAILED_AT_PROVIDER)
        if stored.status is RefundStatus.FAILED and stored.provider_reference is None:
            # Kept so that the provider's later events about this refund find it.
            stored = stored.model_copy(update={"provider_reference": found.reference})
            uow.records.update(stored)
        how = f"failed at the provider as {found.reference}"
    else:
        log.error(
            "refund %s: the card provider answered %s for it; left pending",
            refund.id,
            found.status.value,
        )
        return Settled(refund, "unchanged")
    if stored.status is RefundStatus.PENDING:
        outcome = "in_progress" if stored.provider_reference is not None else "unchanged"
    else:
        outcome = stored.status.value
    resolve_difference(ctx, uow, CardDifferenceKind.REFUND_IN_DOUBT, refund.id, how)
    return Settled(stored, outcome)


def refund_in_doubt(refund: Refund, detail: str, reference: str | None = None) -> Found:
    """The operator's record of a refund whose outcome could not be learnt."""
    return Found(
        kind=CardDifferenceKind.REFUND_IN_DOUBT,
        subject=refund.id,
        detail=detail,
        merchant_company_id=refund.company_id,
        payment_intent_id=refund.payment_intent_id,
        refund_id=refund.id,
        provider_reference=reference,
        currency=refund.currency,
        recorded_amount=refund.amount,
    )


def charge_in_doubt(company_id: int, intent_id: int, key: str, detail: str) -> Found:
    """The operator's record of the payment attempt with ``key`` whose outcome could not be
    learnt (its subject: the attempt's job resource)."""
    return Found(
        kind=CardDifferenceKind.CHARGE_IN_DOUBT,
        subject=charge_attempt_resource(intent_id, key),
        detail=detail,
        merchant_company_id=company_id,
        payment_intent_id=intent_id,
        attempt_key=key,
    )


def _reason(exc: BaseException) -> str:
    return exc.message if isinstance(exc, TreasuryError) else type(exc).__name__


class ProviderResolution:
    """The resolution jobs (see the module docstring): ``provider`` is asked, ``charging``
    records a charge found, under the intent locks of ``steps``; ``context`` gives storage,
    ids and the clock."""

    def __init__(
        self,
        *,
        context: Adapters,
        steps: IntentSteps,
        provider: CardProvider,
        charging: Charging,
    ) -> None:
        self._ctx = context
        self._steps = steps
        self._provider = provider
        self._charging = charging

    def outside_handlers(self) -> dict[str, OutsideJobHandler]:
        """Job kind → handler, for the job runner's ``register_outside``."""
        return {RESOLVE_REFUND: self.resolve_refund, RESOLVE_CHARGE: self.resolve_charge}

    def _lookups(self) -> CardProviderLookups | None:
        provider = self._provider
        return provider if answers_lookups(provider) else None

    # --- finishing a job ----------------------------------------------------------------------

    async def _finish(
        self,
        job: Job,
        found: Found | None = None,
        *,
        retry_after: int | None = None,
    ) -> bool:
        """Claim and finish ``job`` in a transaction of its own, scheduling the next ask after
        ``retry_after`` asks, or (when it is not asked again) keeping ``found`` for the
        operator."""

        def write(uow: UnitOfWork) -> bool:
            if uow.jobs.claim(job.id) is None:
                return False  # another runner finished it
            self._after(uow, job, found, retry_after)
            uow.jobs.finish(job.id)
            return True

        return await self._ctx.storage.run(write)

    def _after(
        self, uow: UnitOfWork, job: Job, found: Found | None, retry_after: int | None
    ) -> None:
        if retry_after is not None:
            _, resource = split_resource(job.resource_id)
            delay = min(FIRST_RETRY * 2 ** (retry_after - 1), MAX_RETRY)
            due = self._ctx.clock.now() + delay
            resource_id = f"{retry_after}:{resource}"
            if len(resource_id) <= MAX_RESOURCE_ID:
                uow.jobs.schedule(
                    Job(self._ctx.ids.new_id("job"), job.kind, resource_id, job.company_id, due)
                )
                return
            log.error("%s %s: its resource is too long to ask again", job.kind, resource)
        if found is not None:
            note_difference(self._ctx, uow, found)

    def _retry_or_give_up(
        self, job: Job, ask: int, exc: BaseException, found: Found
    ) -> tuple[Found | None, int | None]:
        """After a failed ask: ask again later, or (after the last) keep ``found``."""
        again = ask + 1 < ASKS
        log.log(
            logging.WARNING if again else logging.ERROR,
            "asking the card provider about %s %s failed (try %d of %d: %s)%s",
            job.kind,
            split_resource(job.resource_id)[1],
            ask + 1,
            ASKS,
            _reason(exc),
            "; will ask again" if again else "; giving up: its outcome is in doubt",
            # Our errors carry our own message; anything else is a bug: its traceback.
            exc_info=not isinstance(exc, TreasuryError),
        )
        return (found, ask + 1) if again else (found, None)

    # --- refunds ------------------------------------------------------------------------------

    async def resolve_refund(self, job: Job) -> bool:
        """Ask what the refund whose answer was lost did, and settle it (job
        ``resolve_refund``; see the module docstring)."""
        ask, refund_id = split_resource(job.resource_id)

        def read(uow: UnitOfWork) -> tuple[Refund | None, PaymentIntent | None]:
            refund = uow.records.get(Refund, refund_id, job.company_id)
            if refund is None:
                return None, None
            return refund, uow.intents.get(refund.payment_intent_id, job.company_id)

        refund, intent = await self._ctx.storage.run(read, write=False)
        if refund is None or intent is None or refund.status is not RefundStatus.PENDING:
            return await self._finish(job)
        lookups = self._lookups()
        charge = intent.provider_reference
        if lookups is None or charge is None:
            log.warning(
                "refund %s: its answer was lost and the card provider cannot be asked; it stays "
                "pending until the provider's event about it",
                refund.id,
            )
            detail = "the card provider cannot be asked; waiting for its event about the refund"
            return await self._finish(job, refund_in_doubt(refund, detail))
        # The intent's lock, as every path that changes it takes: a client's retry of the same
        # refund waits for this answer rather than crossing it.
        async with self._steps.lock(intent.id):
            try:
                found = await lookups.find_refund(charge, refund_key(intent, refund.id))
            except Exception as exc:
                detail = f"the card provider did not answer {ASKS} questions about it"
                keep, retry = self._retry_or_give_up(job, ask, exc, refund_in_doubt(refund, detail))
                return await self._finish(job, keep, retry_after=retry)

            if found is None and ask + 1 < NOT_FOUND_ASKS:
                # Not yet "never made": the first call may still be running at the provider
                # (our side gave up at its timeout), and a search may lag.
                return await self._finish(job, retry_after=ask + 1)

            def write(uow: UnitOfWork) -> bool:
                if uow.jobs.claim(job.id) is None:
                    return False
                settled = settle_refund_by_answer(self._steps, uow, refund, found)
                log.info("refund %s resolved at the card provider: %s", refund.id, settled.outcome)
                uow.jobs.finish(job.id)
                return True

            return await self._ctx.storage.run(write)

    # --- charges ------------------------------------------------------------------------------

    async def resolve_charge(self, job: Job) -> bool:
        """Ask what the payment attempt whose answer was lost made, and hand a charge found to
        ``adopt_charge`` (job ``resolve_charge``; see the module docstring)."""
        ask, resource = split_resource(job.resource_id)
        parsed = parse_charge_resource(resource)
        if parsed is None:
            log.error("%s job %s names no attempt (%s); retired", job.kind, job.id, resource)
            return await self._finish(job)
        intent_id, key = parsed
        company = job.company_id
        lookups = self._lookups()
        if lookups is None:
            log.warning(
                "intent %d: a payment attempt's answer was lost and the card provider cannot be "
                "asked; the provider's events or reconciliation tell what it made",
                intent_id,
            )
            detail = "the card provider cannot be asked; waiting for its events"
            return await self._finish(job, charge_in_doubt(company, intent_id, key, detail))
        in_doubt = charge_in_doubt(
            company,
            intent_id,
            key,
            f"the card provider did not answer {ASKS} questions about the attempt",
        )
        try:
            found = await lookups.find_charge(key)
        except Exception as exc:
            keep, retry = self._retry_or_give_up(job, ask, exc, in_doubt)
            return await self._finish(job, keep, retry_after=retry)
        if found is None:
            if ask + 1 < NOT_FOUND_ASKS:
                return await self._finish(job, retry_after=ask + 1)
            log.info("intent %d: the attempt whose answer was lost made no charge", intent_id)
            return await self._settled(job, resource, "the provider made no charge")
        if found.status not in _ADOPTABLE:
            log.info(
                "intent %d: the attempt whose answer was lost made charge %s, now %s; nothing "
                "to record",
                intent_id,
                found.reference,
                found.status.value,
            )
            return await self._settled(job, resource, f"charge {found.reference} holds nothing")
        try:
            adopted = await self._charging.adopt_charge(company, intent_id, found)
        except ProviderError as exc:
            # Undoing an orphan at the provider failed: the charge is asked about again.
            keep, retry = self._retry_or_give_up(job, ask, exc, in_doubt)
            return await self._finish(job, keep, retry_after=retry)
        except TreasuryError as exc:
            log.error(
                "intent %d: charge %s made by an attempt whose answer was lost could not be "
                "recorded (%s); check it at the provider",
                intent_id,
                found.reference,
                exc.code,
            )
            return await self._finish(job, in_doubt)
        how = "recorded on the intent" if adopted is not None else "undone or already recorded"
        log.info("intent %d: charge %s %s", intent_id, found.reference, how)
        return await self._settled(job, resource, f"charge {found.reference} {how}")

    async def _settled(self, job: Job, resource: str, how: str) -> bool:
        def write(uow: UnitOfWork) -> bool:
            if uow.jobs.claim(job.id) is None:
                return False
            resolve_difference(self._ctx, uow, CardDifferenceKind.CHARGE_IN_DOUBT, resource, how)
            uow.jobs.finish(job.id)
            return True

        return await self._ctx.storage.run(write)
