"""A stand-in for ``PaymentService.adopt_charge`` until the payments service's own lands.

Only what the resolution jobs, the provider-event service and card reconciliation need to run
their tests; the real one replaces this module whole.
"""

from __future__ import annotations

from treasury_core.payments.intents import CaptureMethod, IntentStatus, PaymentIntent
from treasury_core.payments.records import TransactionType
from treasury_core.payments.states import IllegalTransition
from treasury_core.ports.card_provider import CardData, CardProviderResult, CardProviderStatus
from treasury_core.services.payments.challenges import Challenges

#: No card is known for a charge found at the provider; its result carries brand and last4.
_UNKNOWN_CARD = CardData(number="", expiry_month=1, expiry_year=2000)


class Adoption(Challenges):
    """Recording a charge the provider holds for an intent (stand-in)."""

    async def adopt_charge(
        self,
        company_id: int,
        intent_id: int,
        result: CardProviderResult,
        *,
        amount: int | None = None,
        currency: str | None = None,
    ) -> PaymentIntent | None:
        """Record ``result`` on the intent if it still waits for payment with these amounts,
        as a successful attempt (or a 3-D Secure challenge) would be; otherwise undo it at the
        provider. The intent as stored when adopted, ``None`` when undone or nothing to do."""
        async with self._lock(intent_id):
            intent = await self.get(company_id, intent_id)
            if (
                intent.provider_reference == result.reference
                or result.status is CardProviderStatus.VOIDED
            ):
                return None
            capture = intent.capture_method is CaptureMethod.AUTOMATIC
            captured = result.status is CardProviderStatus.CAPTURED
            fits = (
                intent.status is IntentStatus.INITIALIZED
                and amount in (None, intent.billing_amount)
                and currency in (None, intent.billing_currency)
                and (result.requires_action or captured == capture)
            )
            if fits:
                kind = TransactionType.SALE if capture else TransactionType.AUTHORIZATION
                try:
                    if result.requires_action:
                        outcome = await self._record_challenge(
                            intent, kind, result, _UNKNOWN_CARD, None
                        )
                    else:
                        outcome = await self._record_success(
                            intent, kind, result, result.last4, None
                        )
                except IllegalTransition:
                    return None  # moved meanwhile; the charge was undone
                return outcome.intent
            await self._undo(
                result.reference, (amount or intent.billing_amount) if captured else None
            )
            return None
