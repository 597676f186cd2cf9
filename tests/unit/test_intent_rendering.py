"""The server renders an intent's record JSON once per intent instance and never answers it
stale; the core's own ``record_json`` remembers nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from treasury_aiohttp import rendering
from treasury_aiohttp.memo import InstanceMemo
from treasury_aiohttp.rendering import intent_json
from treasury_core.interface.projections import record_json
from treasury_core.interface.records import PaymentIntentRecord
from treasury_core.payments import IntentStatus, PaymentIntent

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(autouse=True)
def empty_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each test starts from an empty memo: one left nearly full by earlier tests would be
    # cleared half way through a test.
    monkeypatch.setattr(rendering, "_INTENTS", InstanceMemo())


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
    assert intent_json(one) == PaymentIntentRecord.of(one).model_dump_json().encode()
    assert record_json(one) == intent_json(one)
    assert json.loads(intent_json(one))["merchant_reference"] == "booking-17"


def test_one_instance_is_rendered_once() -> None:
    one = intent()
    assert intent_json(one) is intent_json(one)


def test_a_changed_intent_renders_its_change() -> None:
    before = intent(status=IntentStatus.PROCESSED)
    rendered_before = intent_json(before)
    after = before.model_copy(update={"amount_refunded": 500})
    assert json.loads(intent_json(after))["amount_refunded"] == 500
    assert json.loads(intent_json(before))["amount_refunded"] == 0
    assert intent_json(before) is rendered_before


def test_the_memo_is_bounded_and_stays_right() -> None:
    bound = rendering._INTENTS.max_entries
    many = [intent(f"pil_{n:08d}") for n in range(bound + 10)]
    for one in many:
        assert json.loads(intent_json(one))["payment_intent_lookup_id"] == (
            one.payment_intent_lookup_id
        )
        assert len(rendering._INTENTS) <= bound
    # Whatever was dropped renders again, the same.
    first = many[0]
    assert json.loads(intent_json(first))["payment_intent_lookup_id"] == "pil_00000000"


def test_the_core_remembers_no_rendering() -> None:
    one = intent()
    assert record_json(one) is not record_json(one)
