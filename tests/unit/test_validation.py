import json
from datetime import date

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from treasury_core.errors import ValidationFailed
from treasury_core.interface.errors import error_body
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.validation import Name, is_resource_id
from treasury_core.wallets import CreateWalletRequest


@pytest.mark.parametrize("name", ["a\x00b", "a\ud800b", "tab\there", "line\nbreak", "\x7f"])
def test_names_refuse_control_characters_and_surrogates(name: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        CreateWalletRequest(name=name, currency_id="USD")
    assert caught.value.param == "name"


def test_descriptions_allow_line_breaks_but_not_nul() -> None:
    assert (
        CreateWalletRequest(name="n", currency_id="USD", description="a\nb\tc").description
        == "a\nb\tc"
    )
    with pytest.raises(ValidationFailed) as caught:
        CreateWalletRequest(name="n", currency_id="USD", description="a\x00")
    assert caught.value.param == "description"


def test_built_from_python_a_request_is_refused_as_the_http_app_refuses_it() -> None:
    with pytest.raises(ValidationFailed) as caught:
        CreateWalletRequest(name="n", currency_id="USD", metadata={"note": 5})  # type: ignore[dict-item]
    assert error_body(caught.value) == {
        "error": {
            "type": "invalid_request_error",
            "code": "parameter_invalid",
            "message": "Invalid metadata.note: Input should be a valid string",
            "param": "metadata.note",
        }
    }
    # The cause keeps every problem pydantic found.
    assert isinstance(caught.value.__cause__, ValidationError)


def test_parsing_a_request_keeps_pydantic_and_json_mode() -> None:
    # The HTTP app reads bodies with these: they must still validate JSON as JSON (a date as
    # text, in strict mode) and report pydantic's own error, which it reads whole.
    body = (
        '{"account_id": 1, "billing_amount": 5, "billing_currency": "USD", '
        '"payment_type": "Card Payment", "checkin_date": "2026-03-01"}'
    )
    parsed = CreateIntentRequest.model_validate_json(body, strict=True)
    assert parsed.checkin_date == date(2026, 3, 1)
    with pytest.raises(ValidationError):
        CreateWalletRequest.model_validate_json('{"name": 5}', strict=True)
    with pytest.raises(ValidationError):
        CreateWalletRequest.model_validate({"name": 5})


def test_names_are_trimmed_and_unicode_is_welcome() -> None:
    assert (
        CreateWalletRequest(name="  Caisse d’épargne 💶 ", currency_id="EUR").name
        == "Caisse d’épargne 💶"
    )


@pytest.mark.parametrize(
    ("value", "prefix", "expected"),
    [
        ("wal_01jd3k", "wal", True),
        ("wal_01jd3k", None, True),
        ("trf_01jd3k", "wal", False),
        ("wal_", "wal", False),
        ("wal_\x00", "wal", False),
        ("wal_" + "a" * 65, "wal", False),
        ("WAL_abc", "wal", False),
        (5, "wal", False),
    ],
)
def test_resource_id_shape(value: object, prefix: str | None, expected: bool) -> None:
    assert is_resource_id(value, prefix) is expected


#: The bidirectional embeddings, overrides and isolates: each makes text display in another
#: order than it is stored ("Trojan Source"), so a name could read as someone else's.
#: Unicode's Bidi_Control property (PropList.txt), written out here rather than taken from the
#: code under test.
BIDI_CONTROLS = [
    chr(c) for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
]

#: Request fields that hold codes, ids, numbers or enumerations: never shown as text. Every
#: other string field of a request body is free text and must refuse bidirectional controls.
NOT_FREE_TEXT = frozenset(
    {
        "billing_currency",
        "card_number",
        "card_token",
        "currency_id",
        "cvc",
        "from_currency_id",
        "from_wallet_id",
        "outcome",
        "payment_type",
        "capture_method",
        "processing_currency",
        "source_currency",
        "to_currency_id",
        "to_wallet_id",
        "wallet_id",
        "bank_account_id",
        "events",
    }
)


def _request_models() -> list[type[BaseModel]]:
    from treasury_aiohttp.api import cards as card_handlers
    from treasury_aiohttp.api import movements as treasury_handlers
    from treasury_aiohttp.api import notifications as notification_handlers
    from treasury_aiohttp.api import payments as payment_handlers
    from treasury_aiohttp.api import sandbox as sandbox_handlers
    from treasury_aiohttp.api import wallets as handlers

    routes = (
        handlers.ROUTES
        + treasury_handlers.ROUTES
        + payment_handlers.ROUTES
        + card_handlers.ROUTES
        + notification_handlers.ROUTES
        + sandbox_handlers.ROUTES
    )
    return sorted({route.body for route in routes if route.body is not None}, key=str)


def _text_fields() -> list[tuple[type[BaseModel], str]]:
    return [
        (model, name)
        for model in _request_models()
        for name in model.model_fields
        if name not in NOT_FREE_TEXT
        and "string" in json.dumps(model.model_json_schema()["properties"][name])
    ]


def test_the_free_text_fields_are_found() -> None:
    names = {name for _, name in _text_fields()}
    assert {"name", "description", "merchant_reference", "customer", "bank_name"} <= names


@pytest.mark.parametrize(
    ("model", "field"), _text_fields(), ids=lambda x: getattr(x, "__name__", x)
)
@pytest.mark.parametrize("control", BIDI_CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
def test_every_free_text_field_refuses_bidirectional_controls(
    model: type[BaseModel], field: str, control: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate({field: f"evil{control}txt.exe"})
    refusals = [error for error in caught.value.errors() if error["loc"][:1] == (field,)]
    assert refusals, f"{model.__name__}.{field} accepted U+{ord(control):04X}"


@pytest.mark.parametrize("value", ["Acme\n", "\tAcme", "Acme\u2028", "\u202eAcme "])
def test_a_name_is_checked_before_it_is_trimmed(value: str) -> None:
    # The document's pattern refuses these; trimming first would store them as "Acme".
    with pytest.raises(ValidationError):
        TypeAdapter(Name).validate_python(value, strict=True)


def test_a_name_is_trimmed_of_spaces() -> None:
    assert TypeAdapter(Name).validate_python("  Acme Ltd  ", strict=True) == "Acme Ltd"
