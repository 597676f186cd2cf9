"""What an Idempotency-Key or a resolution job may be bound to, read back: only our own shapes,
in ASCII digits, whatever else a stored string holds."""

from __future__ import annotations

import pytest

from treasury_core.services.payments.provider_resolution import (
    parse_charge_resource,
    split_resource,
)
from treasury_core.services.payments.vocabulary import intent_of_resource, intent_resource


def test_an_intent_resource_reads_back_its_id() -> None:
    assert intent_of_resource(intent_resource(42)) == 42


@pytest.mark.parametrize("resource", [None, "pi:", "pi:²", "pi:-1", "pi:1.5", "re_1", "cap:1"])
def test_anything_else_names_no_intent(resource: str | None) -> None:
    assert intent_of_resource(resource) is None


def test_a_resolution_resource_takes_ascii_digits_only() -> None:
    assert split_resource("3:re_1") == (3, "re_1")
    assert split_resource("²:re_1") == (0, "²:re_1")
    assert parse_charge_resource("pi:7:abc") == (7, "abc")
    assert parse_charge_resource("pi:²:abc") is None
