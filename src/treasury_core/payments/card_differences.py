"""Where the card provider and the treasury disagree, or could not be made to agree yet.

A :class:`CardDifference` is the operator's (company :data:`OPERATOR`), like a bank break: it
names a merchant's intent but is a fact about the platform's account at the provider. Each is
kept once per subject and kind (its id is built from them, :meth:`CardDifference.id_for`), so a
reconciliation run or a resolution job that finds the same thing again changes the figures of
the one record rather than adding another. It is ``open`` while the disagreement lasts and
``resolved`` once a later look finds agreement (or, for a difference repaired at once, from the
start); ``treasury.card.reconciliation.difference`` announces it when it opens.

Rules:

- ``charge_adopted``: the provider held a charge for an intent still waiting for payment; it was
  recorded on the intent (resolved at once: the records agree now).
- ``orphan_charge``: the provider held money for an intent paid by another charge, cancelled, or
  for other amounts; the hold was released or the capture refunded at the provider. Resolved
  when a later run finds the charge holding nothing.
- ``captured_differs`` / ``refunded_differs``: the charge the intent uses has another captured
  or refunded amount at the provider than here. Never repaired by itself: an operator looks.
- ``refund_in_doubt`` / ``charge_in_doubt``: a call whose answer was lost could not be resolved
  (the provider cannot be asked, or did not answer the last try). Resolved once its outcome is
  recorded (a provider event, a later reconciliation run).
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from treasury_core.metadata import MetadataField
from treasury_core.movements.records import TreasuryRecord
from treasury_core.serialization import Timestamp


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class CardDifferenceKind(StrEnum):
    """What the card provider and the treasury disagree about (see the module docstring)."""

    CHARGE_ADOPTED = "charge_adopted"
    ORPHAN_CHARGE = "orphan_charge"
    CAPTURED_DIFFERS = "captured_differs"
    REFUNDED_DIFFERS = "refunded_differs"
    REFUND_IN_DOUBT = "refund_in_doubt"
    CHARGE_IN_DOUBT = "charge_in_doubt"

    @property
    def description(self) -> str:
        """What it means, in words for people (the dashboard's)."""
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    CardDifferenceKind.CHARGE_ADOPTED: "a charge at the provider for an intent waiting for "
    "payment, recorded on the intent",
    CardDifferenceKind.ORPHAN_CHARGE: "money held at the provider for an intent paid otherwise "
    "or cancelled, released or refunded there",
    CardDifferenceKind.CAPTURED_DIFFERS: "the provider captured another amount than recorded",
    CardDifferenceKind.REFUNDED_DIFFERS: "the provider refunded another amount than recorded",
    CardDifferenceKind.REFUND_IN_DOUBT: "a refund whose answer was lost, not yet resolved",
    CardDifferenceKind.CHARGE_IN_DOUBT: "a payment attempt whose answer was lost, not yet resolved",
}


class CardDifferenceStatus(StrEnum):
    """``open`` while the disagreement lasts, ``resolved`` once agreement is found."""

    OPEN = "open"
    RESOLVED = "resolved"


class CardDifferenceRecord(_Frozen):
    """A difference as the operator's event and dashboard show it.

    ``merchant_company_id`` and ``payment_intent_id`` name the merchant's intent concerned,
    ``refund_id`` its refund (for ``refund_in_doubt``), ``provider_reference`` the provider's
    charge. Amounts, when the kind compares amounts, are minor units of ``currency``: what the
    provider holds and what the treasury recorded.
    """

    id: str
    object: Literal["card_difference"] = "card_difference"
    kind: CardDifferenceKind
    status: CardDifferenceStatus
    merchant_company_id: int | None = None
    payment_intent_id: int | None = None
    refund_id: str | None = None
    provider_reference: str | None = None
    #: The key of the payment attempt, for ``charge_in_doubt``: what the provider is asked.
    attempt_key: str | None = None
    currency: str | None = None
    provider_amount: int | None = None
    recorded_amount: int | None = None
    #: Why, in words: what was found and what was done about it.
    detail: str
    created_at: Timestamp
    resolved_at: Timestamp | None = None


class CardDifference(TreasuryRecord, CardDifferenceRecord):
    """A stored difference, announced by ``treasury.card.reconciliation.difference``."""

    prefix: ClassVar[str] = "ccd"

    company_id: int
    metadata: MetadataField = {}

    @staticmethod
    def id_for(kind: CardDifferenceKind, subject: str) -> str:
        """The record id of the difference of ``kind`` about ``subject`` (the provider's charge
        reference, a refund's id, or a charge attempt's job resource)."""
        digest = hashlib.sha256(f"{kind.value}\x1f{subject}".encode()).hexdigest()
        return f"{CardDifference.prefix}_{digest[:40]}"


class ReconciliationMarkView(_Frozen):
    """When card reconciliation last ran (internal: never served)."""

    id: str
    last_run_at: Timestamp
    created_at: Timestamp


class ReconciliationMark(TreasuryRecord, ReconciliationMarkView):
    """The one record saying when card reconciliation last ran, so that several workers over
    one database run it once per period between them."""

    prefix: ClassVar[str] = "ccm"

    company_id: int
    metadata: MetadataField = {}

    #: Its id: there is one.
    ID: ClassVar[str] = "ccm_card_reconciliation"
