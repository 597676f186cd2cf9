"""The core stays pure: importing every treasury_core module pulls in no I/O framework."""

import subprocess
import sys

SCRIPT = """
import importlib, pkgutil, sys
import treasury_core
for module in pkgutil.walk_packages(treasury_core.__path__, "treasury_core."):
    if module.name.rsplit(".", 1)[-1] in ("machine", "strategies"):
        continue  # treasury_core.testing's Hypothesis kit needs hypothesis, nothing else
    importlib.import_module(module.name)
io = ("sqlalchemy", "aiohttp", "psycopg", "alembic", "click")
bad = sorted(m for m in sys.modules if m.split(".")[0] in io)
print(",".join(bad))
"""


def test_treasury_core_imports_no_io_frameworks() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


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
