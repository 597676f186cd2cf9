"""The filters of the record lists (decisions.md, "Every record readable; real filters").

A list of deposits, withdrawals, transfers, bank accounts, virtual accounts, refunds,
chargebacks, payouts or saved cards takes a :class:`RecordFilter`. Each filter field stands for
one or more fields of the listed record (:data:`FILTER_FIELDS`); a record passes a filter field
when any of those fields equals the value (``wallet_id`` of a transfer is either of its wallets,
``currency`` of a movement either of its currencies). A filter that does not apply to a kind is
refused before it reaches storage: the HTTP layer declares per list which parameters exist.

Storage adapters must agree with :meth:`RecordFilter.matches`, which is the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from treasury_core.cards.tokens import PaymentMethodToken
from treasury_core.errors import ValidationFailed
from treasury_core.metadata import metadata_matches
from treasury_core.movements.records import (
    BankAccount,
    Deposit,
    MovementStatus,
    Transfer,
    TreasuryRecord,
    VirtualAccount,
    Withdrawal,
)
from treasury_core.payments.records import (
    Chargeback,
    ChargebackStatus,
    Payout,
    PayoutStatus,
    Refund,
    RefundStatus,
)

#: The status a deleted record keeps (bank accounts, saved cards): it is never listed or read.
DELETED: Final = "deleted"


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """Which records of a kind a list returns; ``None`` means any.

    ``created_gte`` is inclusive and ``created_lt`` exclusive, as for intents.
    """

    status: str | None = None
    created_gte: datetime | None = None
    created_lt: datetime | None = None
    wallet_id: str | None = None
    currency: str | None = None
    payment_intent_id: int | None = None
    bank_account_id: str | None = None
    customer_email: str | None = None
    #: ``metadata[key]=value`` pairs the record's metadata must all hold.
    metadata: Mapping[str, str] | None = None

    def field_filters(self) -> dict[str, Any]:
        """The record-field filters that are set (everything but status, the time window and
        metadata)."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in _COLUMN_FILTERS and getattr(self, f.name) is not None
        }

    def matches(self, record: TreasuryRecord) -> bool:
        """Whether ``record`` passes every filter (deleted records never do)."""
        if record.status_value == DELETED:
            return False
        if self.status is not None and record.status_value != self.status:
            return False
        if self.created_gte is not None and record.created_at < self.created_gte:
            return False
        if self.created_lt is not None and record.created_at >= self.created_lt:
            return False
        if not metadata_matches(record.metadata, self.metadata):
            return False
        attributes = FILTER_FIELDS.get(type(record).prefix, {})
        for name, wanted in self.field_filters().items():
            names = attributes.get(name)
            if names is None or not any(getattr(record, a, None) == wanted for a in names):
                return False
        return True


#: The filters that are not fields of the record: columns, and the metadata family.
_COLUMN_FILTERS = frozenset({"status", "created_gte", "created_lt", "metadata"})

#: Per kind (its id prefix): each filter field and the record fields it matches.
FILTER_FIELDS: Final[dict[str, dict[str, tuple[str, ...]]]] = {
    Deposit.prefix: {
        "wallet_id": ("wallet_id",),
        "currency": ("from_currency_id", "to_currency_id"),
    },
    Withdrawal.prefix: {
        "wallet_id": ("wallet_id",),
        "currency": ("from_currency_id", "to_currency_id"),
        "bank_account_id": ("bank_account_id",),
    },
    Transfer.prefix: {
        "wallet_id": ("from_wallet_id", "to_wallet_id"),
        "currency": ("from_currency_id", "to_currency_id"),
    },
    BankAccount.prefix: {"currency": ("currency_id",)},
    VirtualAccount.prefix: {"wallet_id": ("wallet_id",), "currency": ("source_currency",)},
    Refund.prefix: {"payment_intent_id": ("payment_intent_id",), "currency": ("currency",)},
    Chargeback.prefix: {"payment_intent_id": ("payment_intent_id",), "currency": ("currency",)},
    Payout.prefix: {
        "payment_intent_id": ("payment_intent_id",),
        "wallet_id": ("wallet_id",),
        "currency": ("currency",),
    },
    PaymentMethodToken.prefix: {"customer_email": ("customer_email",)},
}

#: The kinds a record list reads, each with the statuses its list can be filtered by.
STATUSES: Final[dict[type[TreasuryRecord], tuple[str, ...]]] = {
    Deposit: tuple(MovementStatus),
    Withdrawal: tuple(MovementStatus),
    Transfer: tuple(MovementStatus),
    BankAccount: ("active",),
    VirtualAccount: ("active",),
    Refund: tuple(RefundStatus),
    Chargeback: tuple(ChargebackStatus),
    Payout: tuple(PayoutStatus),
    PaymentMethodToken: ("active",),
}


def checked_filter(kind: type[TreasuryRecord], filters: RecordFilter) -> RecordFilter:
    """``filters`` if ``kind`` is listed and every filter applies to it; else
    :class:`ValidationFailed` naming the kinds that are listed, or the first filter that does
    not apply (or the status values ``kind`` has)."""
    statuses = STATUSES.get(kind)
    if statuses is None:
        # Any class can reach here from Python (an Event, say); name what a list can read.
        listed = ", ".join(k.__name__ for k in STATUSES)
        name = getattr(kind, "__name__", repr(kind))
        raise ValidationFailed(f"records.list reads {listed}; not {name}", param="kind")
    if filters.status is not None:
        allowed = [str(s.value if isinstance(s, StrEnum) else s) for s in statuses]
        if filters.status not in allowed:
            raise ValidationFailed(f"status must be one of {', '.join(allowed)}", param="status")
    for bound in ("created_gte", "created_lt"):
        value = getattr(filters, bound)
        if value is not None and value.utcoffset() is None:
            raise ValidationFailed(f"{bound} must carry a UTC offset", param=bound)
    applicable = FILTER_FIELDS.get(kind.prefix, {})
    for name in filters.field_filters():
        if name not in applicable:
            raise ValidationFailed(
                f"Received unknown parameter: {name}", code="parameter_unknown", param=name
            )
    return filters
