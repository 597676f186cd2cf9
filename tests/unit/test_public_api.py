import treasury_core
import treasury_core.ledger
import treasury_core.ports
import treasury_core.testing


def test_all_is_sorted_and_complete() -> None:
    for module in (treasury_core, treasury_core.ledger, treasury_core.ports, treasury_core.testing):
        assert module.__all__ == sorted(module.__all__), module.__name__
        for name in module.__all__:
            assert getattr(module, name) is not None


def test_public_callables_are_documented() -> None:
    for name in treasury_core.__all__:
        item = getattr(treasury_core, name)
        assert (item.__doc__ or "").strip(), f"{name} has no docstring"


def test_error_body_shape() -> None:
    error = treasury_core.UnknownCurrency("Unknown currency: XXX", param="currency_id")
    assert error.to_body() == {
        "error": {
            "type": "invalid_request_error",
            "code": "unknown_currency",
            "message": "Unknown currency: XXX",
            "param": "currency_id",
        }
    }
    assert error.http_status == 400
    card = treasury_core.CardError("declined", failure_reason="capture_declined")
    assert card.to_body()["error"]["failure_reason"] == "capture_declined"
    assert card.http_status == 402
