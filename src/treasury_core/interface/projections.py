"""From an entity to what the interface says of it: its record, its JSON, an event's
``data.object``.

The services never render anything: :func:`event_object` is the ``payload`` the composition
root (:func:`treasury_core.bootstrap`) gives the services' event factory, so an event written
in a service's transaction carries exactly the record the API returns.

Rules:
- An intent event's ``data.object`` is the intent as the API returns it, except that ``id`` is
  a string (part 2.1: "string in webhook payloads").
- Any other record's ``data.object`` is its interface record, JSON-ready.
- A kind without an interface record (the operator's bank files and safeguarding records, the
  card reconciliation's) renders the fields of its domain view, as the CLI shows them.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel

from treasury_core.cards.tokens import PaymentMethodToken, TokenIntent
from treasury_core.interface.records import (
    BankAccountRecord,
    ChargebackRecord,
    DepositRecord,
    PaymentIntentRecord,
    PaymentMethodTokenRecord,
    PayoutRecord,
    Projection,
    RefundRecord,
    TokenIntentRecord,
    TransactionRecord,
    TransferRecord,
    VirtualAccountRecord,
    WebhookEndpointRecord,
    WithdrawalRecord,
)
from treasury_core.movements.bank_files import (
    BankExport,
    BankExportRecord,
    BankStatementLine,
    StatementLineRecord,
)
from treasury_core.movements.records import (
    BankAccount,
    Deposit,
    Transfer,
    TreasuryRecord,
    VirtualAccount,
    Withdrawal,
)
from treasury_core.movements.safeguarding import (
    BankBreak,
    BankComparison,
    BankComparisonRecord,
    BankDay,
    BankDayRecord,
    BankMirror,
    BankMirrorRecord,
    BreakRecord,
    StatedBalance,
    StatedBalanceRecord,
)
from treasury_core.notifications.endpoints import WebhookEndpoint
from treasury_core.payments.card_differences import (
    CardDifference,
    CardDifferenceRecord,
    ReconciliationMark,
    ReconciliationMarkView,
)
from treasury_core.payments.intents import PaymentIntent
from treasury_core.payments.records import (
    Chargeback,
    Payout,
    ProviderEventReceipt,
    ProviderEventView,
    Refund,
    Transaction,
)

#: Each stored kind and the model of its record.
RECORDS: Final[dict[type[BaseModel], type[BaseModel]]] = {
    PaymentIntent: PaymentIntentRecord,
    Deposit: DepositRecord,
    Withdrawal: WithdrawalRecord,
    Transfer: TransferRecord,
    BankAccount: BankAccountRecord,
    VirtualAccount: VirtualAccountRecord,
    Transaction: TransactionRecord,
    Refund: RefundRecord,
    Chargeback: ChargebackRecord,
    Payout: PayoutRecord,
    TokenIntent: TokenIntentRecord,
    PaymentMethodToken: PaymentMethodTokenRecord,
    WebhookEndpoint: WebhookEndpointRecord,
    BankExport: BankExportRecord,
    BankStatementLine: StatementLineRecord,
    BankMirror: BankMirrorRecord,
    BankDay: BankDayRecord,
    StatedBalance: StatedBalanceRecord,
    BankComparison: BankComparisonRecord,
    BankBreak: BreakRecord,
    CardDifference: CardDifferenceRecord,
    ReconciliationMark: ReconciliationMarkView,
    ProviderEventReceipt: ProviderEventView,
}


def _copies(model: type[BaseModel]) -> bool:
    # A record that takes the entity's fields of its names as they are: the entity's own
    # serializer, told to write just those, renders the same bytes without building it.
    return issubclass(model, Projection) and model.of.__func__ is Projection.of.__func__  # type: ignore[attr-defined]


#: The kinds whose record is their fields of the record's names, and those names.
_COPIED: Final[dict[type[BaseModel], set[str]]] = {
    kind: set(model.model_fields) for kind, model in RECORDS.items() if _copies(model)
}


def _model(entity: BaseModel) -> type[BaseModel]:
    try:
        return RECORDS[type(entity)]
    except KeyError:
        raise TypeError(f"no interface record for {type(entity).__name__}") from None


def record_of(entity: TreasuryRecord | PaymentIntent) -> BaseModel:
    """The interface's record of ``entity`` (any stored kind)."""
    model = _model(entity)
    if issubclass(model, Projection):
        return model.of(entity)
    # A kind without an interface record of its own: its domain view, validated as before.
    return model.model_validate(entity.model_dump(include=set(model.model_fields)))


def record_json(entity: TreasuryRecord | PaymentIntent) -> bytes:
    """The interface's record of ``entity`` as JSON bytes (what an API response carries)."""
    fields = _COPIED.get(type(entity))
    if fields is not None:
        return entity.__pydantic_serializer__.to_json(entity, include=fields)
    record = record_of(entity)
    return record.__pydantic_serializer__.to_json(record)


def record_dict(entity: TreasuryRecord | PaymentIntent) -> dict[str, Any]:
    """The interface's record of ``entity``, JSON-ready."""
    fields = _COPIED.get(type(entity))
    if fields is not None:
        return entity.model_dump(mode="json", include=fields)
    return record_of(entity).model_dump(mode="json")


_INTENT_FIELDS: Final = set(PaymentIntentRecord.model_fields)


def webhook_object(intent: PaymentIntent) -> dict[str, Any]:
    """``data.object`` of an intent event: the API's intent with ``id`` as a string."""
    # The entity's first fields are the record's, of the same types: dumping just those
    # renders exactly what the record would, without building it.
    body = intent.model_dump(mode="json", include=_INTENT_FIELDS)
    body["id"] = str(intent.id)
    return body


def event_object(entity: BaseModel) -> dict[str, Any]:
    """The ``data.object`` of an event about ``entity``: what the API returns of it (an intent's
    ``id`` as a string)."""
    if isinstance(entity, PaymentIntent):
        return webhook_object(entity)
    if not isinstance(entity, TreasuryRecord):
        raise TypeError(f"no event object for {type(entity).__name__}")
    return record_dict(entity)
