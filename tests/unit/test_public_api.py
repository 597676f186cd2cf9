"""The public surface: ``treasury_core``'s ``__all__`` is sorted, importable, documented, and
enough for the common calls without deep imports."""

import dataclasses
import inspect
import typing
from pathlib import Path

import treasury_core
import treasury_core.errors
import treasury_core.ledger
import treasury_core.ports
import treasury_core.testing
from treasury_core import Treasury
from treasury_core.errors import ErrorKind
from treasury_core.interface.errors import error_body

# The methods through which callers hand the services a request model.
_REQUEST_TAKERS = ("create", "register", "create_intent", "create_endpoint")


def test_all_is_sorted_and_complete() -> None:
    for module in (treasury_core, treasury_core.ledger, treasury_core.ports, treasury_core.testing):
        assert module.__all__ == sorted(module.__all__), module.__name__
        assert len(set(module.__all__)) == len(module.__all__), module.__name__
        for name in module.__all__:
            assert getattr(module, name) is not None


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from treasury_core import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == treasury_core.__all__


def test_public_names_are_the_librarys_own() -> None:
    # Re-exporting a third-party name would tie our stable surface to someone else's.
    for name in treasury_core.__all__:
        item = getattr(treasury_core, name)
        assert getattr(item, "__module__", "").startswith("treasury_core."), name


def _own_classes(cls: type) -> list[type]:
    """``cls`` and its bases defined in treasury_core (not pydantic's or the stdlib's)."""
    return [k for k in cls.__mro__ if k.__module__.startswith("treasury_core")]


def _undocumented_members(cls: type) -> list[str]:
    missing = []
    for klass in _own_classes(cls):
        for name, member in vars(klass).items():
            if name.startswith("_") and name not in ("__getattr__", "__enter__", "__exit__"):
                continue
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            if not (inspect.isfunction(member) or isinstance(member, property)):
                continue
            if not (member.__doc__ or "").strip():
                missing.append(f"{klass.__qualname__}.{name}")
    return missing


def test_public_callables_are_documented() -> None:
    for name in treasury_core.__all__:
        item = getattr(treasury_core, name)
        assert (item.__doc__ or "").strip(), f"{name} has no docstring"
        if inspect.isclass(item):
            assert _undocumented_members(item) == [], name


def _services() -> dict[str, type]:
    hints = typing.get_type_hints(Treasury)
    return {
        field.name: hints[field.name]
        for field in dataclasses.fields(Treasury)
        if inspect.isclass(hints[field.name])
        and hints[field.name].__module__.startswith("treasury_core.services")
    }


def test_every_service_method_reachable_from_treasury_is_documented() -> None:
    services = _services()
    # The services a caller of the interface uses, at least, are there.
    assert {"companies", "wallets", "deposits", "transfers", "payments", "cards"} <= set(services)
    for field, cls in services.items():
        assert (cls.__doc__ or "").strip(), field
        assert _undocumented_members(cls) == [], field


def test_the_request_models_of_the_services_are_exported() -> None:
    # A caller creating anything through a service needs no import deeper than treasury_core.
    seen = set()
    for field, cls in _services().items():
        for method_name in _REQUEST_TAKERS:
            method = getattr(cls, method_name, None)
            if method is None:
                continue
            request = typing.get_type_hints(method).get("request")
            if request is None:
                continue
            seen.add(request.__name__)
            assert getattr(treasury_core, request.__name__, None) is request, (
                f"treasury.{field}.{method_name} takes {request.__name__}, not exported"
            )
    assert {"CreateWalletRequest", "CreateTransferRequest", "CreateIntentRequest"} <= seen


def test_every_error_a_caller_can_handle_is_exported() -> None:
    defined = {
        obj
        for obj in vars(treasury_core.errors).values()
        if inspect.isclass(obj)
        and issubclass(obj, Exception)
        and obj.__module__ == "treasury_core.errors"
    }
    exported = {getattr(treasury_core, name) for name in treasury_core.__all__}
    assert defined <= exported, sorted(e.__name__ for e in defined - exported)
    for item in exported:
        if inspect.isclass(item) and issubclass(item, Exception):
            # One base to catch, except the bug signal that is deliberately outside it.
            assert issubclass(item, treasury_core.TreasuryError) or (
                item is treasury_core.LedgerInvariantViolation
            ), item.__name__


def test_the_package_ships_its_type_information() -> None:
    assert (Path(treasury_core.__file__).parent / "py.typed").is_file()


def test_error_body_shape() -> None:
    error = treasury_core.UnknownCurrency("Unknown currency: XXX", param="currency_id")
    assert error_body(error) == {
        "error": {
            "type": "invalid_request_error",
            "code": "unknown_currency",
            "message": "Unknown currency: XXX",
            "param": "currency_id",
        }
    }
    assert error.kind is ErrorKind.INVALID_REQUEST
    card = treasury_core.CardError("declined", failure_reason="capture_declined")
    assert error_body(card)["error"]["failure_reason"] == "capture_declined"
    assert card.kind is ErrorKind.DECLINED
