"""The core stays pure: no core module imports an I/O library or an adapter, and production code
never imports the testing kit."""

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

#: Libraries that do I/O (databases, HTTP, templates, card networks, rate files) and the
#: project's own adapters: none may be loaded by importing any module of treasury_core.
FORBIDDEN = (
    "aiohttp",
    "alembic",
    "click",
    "currency_converter",
    "httpx",
    "jinja2",
    "psycopg",
    "redis",
    "requests",
    "sqlalchemy",
    "stripe",
    "treasury_aiohttp",
    "treasury_ecb",
    "treasury_sandbox",
    "treasury_sqlalchemy",
    "treasury_stripe",
    "treasury_system",
    "treasury_vault",
)

SCRIPT = f"""
import importlib, pkgutil, sys
import treasury_core
for module in pkgutil.walk_packages(treasury_core.__path__, "treasury_core."):
    importlib.import_module(module.name)
bad = sorted(m for m in sys.modules if m.split(".")[0] in {FORBIDDEN!r})
print(",".join(bad))
"""


def test_no_core_module_imports_io_libraries_or_adapters() -> None:
    # Every module, the testing kit included: it runs inside users' test suites, which may
    # have none of the adapters' libraries installed.
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_production_code_never_imports_the_testing_kit() -> None:
    # Lazy imports inside functions count too, hence a parse rather than sys.modules. The
    # pytest plugin is a test aid and may use the kit.
    testing = SRC / "treasury_core" / "testing"
    offenders = sorted(
        f"{path.relative_to(SRC)}: {name}"
        for path in SRC.rglob("*.py")
        if testing not in path.parents and "treasury_pytest" not in path.parts
        for name in _imported_modules(path)
        if name == "treasury_core.testing" or name.startswith("treasury_core.testing.")
    )
    assert offenders == []


def test_no_core_module_imports_an_adapter_even_lazily() -> None:
    adapters = {name for name in FORBIDDEN if name.startswith("treasury_")}
    offenders = sorted(
        f"{path.relative_to(SRC)}: {name}"
        for path in (SRC / "treasury_core").rglob("*.py")
        for name in _imported_modules(path)
        if name.split(".")[0] in adapters
    )
    assert offenders == []


def test_bootstrap_of_memory_storage_imports_no_sqlalchemy() -> None:
    script = (
        "import sys; from treasury_core import bootstrap, TreasuryConfig;"
        "bootstrap(TreasuryConfig(database_url='memory://'));"
        "print('sqlalchemy' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_importing_the_core_does_not_load_the_environment_reader() -> None:
    # pydantic-settings (and python-dotenv with it) load only when config_from_env is used.
    script = (
        "import sys, treasury_core;"
        "from treasury_core import TreasuryConfig, bootstrap;"
        "bootstrap(TreasuryConfig(database_url='memory://'));"
        "before = 'pydantic_settings' in sys.modules;"
        "from treasury_core import config_from_env;"
        "config_from_env({});"
        "print(before, 'pydantic_settings' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False True"
