"""What a merchant sends to contest a chargeback: a few text fields named as
Stripe's dispute evidence names them, each at most :data:`MAX_EVIDENCE_TEXT` characters.

Evidence is kept on the chargeback and shown on it; it is accepted while the chargeback is
``open`` and before its ``evidence_due_by``. A later submission changes the fields it names and
keeps the others (``""`` clears one).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, model_validator

from treasury_core.validation import StrictRequest

#: The longest text one evidence field may hold.
MAX_EVIDENCE_TEXT = 5_000

_Text = Annotated[str, Field(max_length=MAX_EVIDENCE_TEXT)]


class ChargebackEvidence(StrictRequest):
    """Evidence against a chargeback; every field optional, at least one given."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    #: What was sold, in the merchant's words.
    product_description: _Text | None = None
    #: Who bought it, and the address they gave.
    customer_name: _Text | None = None
    customer_email_address: _Text | None = None
    #: Messages with the customer that show they received or accepted the goods.
    customer_communication: _Text | None = None
    #: The order's delivery: the carrier and the tracking number.
    shipping_carrier: _Text | None = None
    shipping_tracking_number: _Text | None = None
    #: Why the customer was not owed a refund.
    refund_refusal_explanation: _Text | None = None
    #: Anything else.
    uncategorized_text: _Text | None = None

    @model_validator(mode="after")
    def _something(self) -> ChargebackEvidence:
        if not self.model_fields_set:
            raise ValueError("give at least one evidence field")
        return self

    def merged_into(self, current: ChargebackEvidence | None) -> ChargebackEvidence:
        """``current`` with the fields given here set (``""`` clears one)."""
        fields = current.model_dump() if current is not None else {}
        for name in self.model_fields_set:
            value = getattr(self, name)
            fields[name] = value or None
        return ChargebackEvidence.model_construct(
            _fields_set={k for k, v in fields.items() if v is not None}, **fields
        )
