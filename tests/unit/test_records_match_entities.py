"""Each interface record declares its entity's fields again, so that the wire contract does
not move when an entity changes (docs/decisions.md). This test keeps the two from drifting
apart silently: every record built from an entity has the entity's fields, of the same types,
in the same order, except the ones listed below with the reason."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from treasury_core.interface.projections import RECORDS
from treasury_core.interface.records import Projection

#: Fields a record shows that its entity does not hold, and why.
WIRE_ADDS: dict[str, dict[str, str]] = {
    "BankAccountRecord": {"last4": "derived from the account number, which the wire masks"},
    "TokenIntentRecord": {
        "object": "the wire's type tag",
        "latest_version": "built by the service from the status and the provider's URLs",
    },
    "WebhookEndpointRecord": {
        "object": "the wire's type tag",
        "secret": "shown only in the answer that created the endpoint",
    },
}

#: Fields a record shows with another type than its entity's, and why.
WIRE_RETYPES: dict[str, dict[str, str]] = {
    "WebhookEndpointRecord": {
        "events": "a JSON array on the wire, a tuple in the entity",
        "previous_secret_expires_at": "written as the wire's ISO 8601 timestamp",
    },
}


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    return {name: field.annotation for name, field in model.model_fields.items()}


def _projected() -> list[tuple[type[BaseModel], type[BaseModel]]]:
    return [(kind, record) for kind, record in RECORDS.items() if issubclass(record, Projection)]


def test_every_projected_record_is_checked() -> None:
    assert len(_projected()) >= 13


def test_a_record_has_its_entitys_fields_and_types() -> None:
    for kind, record in _projected():
        adds = WIRE_ADDS.get(record.__name__, {})
        retypes = WIRE_RETYPES.get(record.__name__, {})
        entity, wire = _fields(kind), _fields(record)
        assert set(wire) - set(entity) == set(adds), record.__name__
        for name, annotation in wire.items():
            if name in adds or name in retypes:
                continue
            assert annotation == entity[name], f"{record.__name__}.{name}"
        for name in retypes:
            assert wire[name] != entity[name], f"{record.__name__}.{name} no longer differs"


def test_a_copied_record_keeps_its_entitys_field_order() -> None:
    # record_json writes the entity's own fields of the record's names, in the entity's order:
    # the same bytes as the record only while the order is the same.
    for kind, record in _projected():
        if record.__name__ in WIRE_ADDS:
            continue
        shared = [name for name in kind.model_fields if name in record.model_fields]
        assert shared == list(record.model_fields), record.__name__
