"""An intent's record JSON is rendered once per intent instance and never answered stale."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from treasury_core.memo import InstanceMemo
from treasury_core.payments import IntentStatus, PaymentIntent
from treasury_core.payments import intents as intents_module

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(autouse=True)
def empty_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each test starts from an empty memo: one left nearly full by earlier tests would be
    # cleared half way through a test.
    monkeypatch.setattr(intents_module, "_RENDERED", InstanceMemo())


def intent(lookup_id: str = "pil_abcdefgh", **fields: object) -> PaymentIntent:
    return PaymentIntent.model_validate(
        {
            "id": 7,
            "company_id": 3,
            "account_id": 9,
            "billing_amount": 12_500,
            "billing_currency": "USD",
            "payment_intent_lookup_id": lookup_id,
            "created_at": T0,
            **fields,
        }
    )


def test_the_json_is_the_records_json() -> None:
    one = intent(merchant_reference="booking-17")
    assert one.record_json() == one.record().model_dump_json().encode()
    assert json.loads(one.record_json())["merchant_reference"] == "booking-17"


def test_one_instance_is_rendered_once() -> None:
    one = intent()
    assert one.record_json() is one.record_json()


def test_a_changed_intent_renders_its_change() -> None:
    before = intent(status=IntentStatus.PROCESSED)
    rendered_before = before.record_json()
    after = before.model_copy(update={"amount_refunded": 500})
    assert json.loads(after.record_json())["amount_refunded"] == 500
    assert json.loads(before.record_json())["amount_refunded"] == 0
    assert before.record_json() is rendered_before


def test_the_memo_is_bounded_and_stays_right() -> None:
    bound = intents_module._RENDERED.max_entries
    many = [intent(f"pil_{n:08d}") for n in range(bound + 10)]
    for one in many:
        assert json.loads(one.record_json())["payment_intent_lookup_id"] == (
            one.payment_intent_lookup_id
        )
        assert len(intents_module._RENDERED) <= bound
    # Whatever was dropped renders again, the same.
    first = many[0]
    assert json.loads(first.record_json())["payment_intent_lookup_id"] == "pil_00000000"
