"""The wire stays outside the domain: no entity subclasses an interface record, and neither the
domain nor the services import :mod:`treasury_core.interface`.

Only the composition root (``bootstrap``, which gives the services' event factory the
interface's projection), the public face (``treasury_core/__init__``) and the users' testing kit
(which checks events against what the interface renders) may import it.
"""

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

from pydantic import BaseModel

import treasury_core
import treasury_core.interface.records
from treasury_core.interface.projections import RECORDS

CORE = Path(treasury_core.__file__).resolve().parent
INTERFACE = "treasury_core.interface"
#: What may import the wire layer, besides the layer itself.
ALLOWED = ("treasury_core", "treasury_core.bootstrap", "treasury_core.testing")


def _module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                raise AssertionError(f"{path}: relative import")
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _may_import_the_wire(module: str) -> bool:
    if module == INTERFACE or module.startswith(INTERFACE + "."):
        return True
    return module in ALLOWED or module.startswith("treasury_core.testing.")


def test_domain_and_services_import_nothing_from_the_wire() -> None:
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        module = _module_name(path)
        if _may_import_the_wire(module):
            continue
        wire = sorted(
            name for name in _imports(path) if name == INTERFACE or name.startswith(INTERFACE + ".")
        )
        if wire:
            offenders.append(f"{module}: {', '.join(wire)}")
    assert offenders == []


def _wire_classes() -> set[type]:
    found: set[type] = set()
    package = importlib.import_module(INTERFACE)
    for info in pkgutil.walk_packages(package.__path__, INTERFACE + "."):
        module = importlib.import_module(info.name)
        found.update(
            cls
            for _, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == info.name
        )
    return found


def _core_models() -> set[type[BaseModel]]:
    for info in pkgutil.walk_packages(treasury_core.__path__, "treasury_core."):
        importlib.import_module(info.name)

    def below(cls: type[BaseModel]) -> set[type[BaseModel]]:
        found = set()
        for sub in cls.__subclasses__():
            found |= {sub} | below(sub)
        return found

    return {
        cls
        for cls in below(BaseModel)
        if cls.__module__.startswith("treasury_core.")
        and not cls.__module__.startswith(INTERFACE + ".")
    }


def test_no_entity_subclasses_a_wire_class() -> None:
    wire = _wire_classes()
    assert treasury_core.interface.records.DepositRecord in wire
    offenders = sorted(
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _core_models()
        if any(base in wire for base in cls.__mro__)
    )
    assert offenders == []


def test_every_stored_kind_renders_and_the_served_ones_through_the_wire() -> None:
    from treasury_core.movements.records import Deposit, TreasuryRecord
    from treasury_core.payments import PaymentIntent

    kinds = {cls for cls in _core_models() if issubclass(cls, TreasuryRecord)}
    assert kinds - {TreasuryRecord} <= set(RECORDS)
    served = {kind for kind, record in RECORDS.items() if record in _wire_classes()}
    assert {Deposit, PaymentIntent} <= served


def test_a_copied_record_finds_each_of_its_fields_on_its_entity() -> None:
    # Records built by Projection.of (and the fast paths that serialize the entity with the
    # record's field names) take each field from the entity: a name missing there would be
    # left out of the JSON in silence.
    from treasury_core.interface.records import Projection

    for kind, record in RECORDS.items():
        if issubclass(record, Projection) and record.of.__func__ is Projection.of.__func__:  # type: ignore[attr-defined]
            assert set(record.model_fields) <= set(kind.model_fields), kind
