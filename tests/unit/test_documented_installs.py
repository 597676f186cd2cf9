"""Each documented install runs its documented calls, checked inside the development environment.

The development environment holds every extra, so a module that an install leaves out would
still import here. Each test runs the calls in a fresh interpreter whose ``sitecustomize``
makes unimportable every module of a distribution outside what the install would bring: the
requirements of ``treasury-core[<extras>]`` as pyproject.toml declares them, followed
transitively through the installed distributions' metadata. ``tools/check_installs.py`` does
the same for real in CI, from the built wheel in fresh virtual environments; this is the quick
check that runs with the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib import metadata, util
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ROOT / "tools" / "install_checks"
EXAMPLES = ROOT / "examples"

# Installed first, the modules it finds are checked against the allowed distributions. A
# distribution that is not installed here cannot be imported anyway, so only the installed
# ones need mapping; names no distribution claims (the standard library, the editable
# treasury_* roots) stay importable.
SITECUSTOMIZE = """
import importlib.abc
import importlib.metadata
import os
import sys

_ALLOWED = set(os.environ["TREASURY_TEST_ALLOWED_DISTRIBUTIONS"].split(","))
_OWNERS = importlib.metadata.packages_distributions()


def _normal(name):
    return name.lower().replace("_", "-").replace(".", "-")


class _OutsideTheInstall(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        owners = {_normal(d) for d in _OWNERS.get(fullname.partition(".")[0], ())}
        if owners and not owners & _ALLOWED:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (not in this install: {sorted(owners)})",
                name=fullname,
            )
        return None


sys.meta_path.insert(0, _OutsideTheInstall())
"""


def _requires(name: str) -> list[str]:
    """``name``'s requirements: treasury-core's from pyproject.toml, others' from metadata.

    The project's own are read from the source, not from the editable install's metadata,
    which is only as new as the last ``pip install -e``.
    """
    if name == "treasury-core":
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        extras = project["optional-dependencies"].items()
        return list(project["dependencies"]) + [
            _only_for(raw, extra) for extra, raws in extras for raw in raws
        ]
    return metadata.distribution(name).requires or []


def _only_for(raw: str, extra: str) -> str:
    """``raw`` as the wheel's metadata writes a requirement of ``extra``."""
    requirement, _, marker = raw.partition(";")
    if marker.strip():
        return f"{requirement}; ({marker.strip()}) and extra == '{extra}'"
    return f"{requirement}; extra == '{extra}'"


def requirements_closure(roots: dict[str, set[str]]) -> set[str]:
    """The distributions ``pip install`` would bring for ``roots`` (name -> extras).

    Names are normalised (PEP 503). A requirement whose distribution is not installed here is
    kept by name but not followed (nothing of it can be imported anyway).
    """
    todo = [(canonicalize_name(name), extra) for name, extras in roots.items() for extra in extras]
    todo += [(canonicalize_name(name), "") for name in roots]
    seen: set[tuple[str, str]] = set()
    names: set[str] = set()
    while todo:
        name, extra = todo.pop()
        if (name, extra) in seen:
            continue
        seen.add((name, extra))
        names.add(name)
        try:
            requires = _requires(name)
        except metadata.PackageNotFoundError:
            continue
        for raw in requires:
            requirement = Requirement(raw)
            marker = requirement.marker
            # Evaluated with the extra being followed: "" leaves out every extra's requirements.
            if marker is not None and not marker.evaluate({"extra": extra}):
                continue
            required = canonicalize_name(requirement.name)
            todo.append((required, ""))
            todo.extend((required, wanted) for wanted in requirement.extras)
    return names


def run_in_install(
    tmp_path: Path, roots: dict[str, set[str]], args: list[str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """Run ``python *args`` with only ``roots``' requirements importable; fails on non-zero."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "TREASURY_TEST_ALLOWED_DISTRIBUTIONS": ",".join(sorted(requirements_closure(roots))),
        # pytest would load every plugin installed here; a user's install has only the ones
        # its requirements bring, and the treasury plugin is loaded by name below.
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    result = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_the_blocker_blocks_what_an_install_lacks(tmp_path: Path) -> None:
    """Without this, every other test here would pass vacuously."""
    script = "import aiohttp"
    with pytest.raises(AssertionError, match="not in this install"):
        run_in_install(tmp_path, {"treasury-core": set()}, ["-c", script], tmp_path)
    run_in_install(tmp_path, {"treasury-core": {"server"}}, ["-c", script], tmp_path)
    assert "sqlalchemy" in requirements_closure({"treasury-core": {"sql"}})
    assert "aiohttp" not in requirements_closure({"treasury-core": {"sql"}})


def test_core_calls_without_extras(tmp_path: Path) -> None:
    """deposits.create, bank accounts, withdrawals, virtual accounts, FX on memory://."""
    result = run_in_install(
        tmp_path, {"treasury-core": set()}, [str(CHECKS / "core_calls.py")], tmp_path
    )
    assert result.stdout.splitlines()[-1] == "core calls: ok"


def test_pytest_fixtures_without_extras(tmp_path: Path) -> None:
    """treasury_memory needs no extra (docs/guides/pytest-plugin.md): with pytest alone."""
    # Copied out of the tree, so that pytest reads no configuration of this project's.
    tests = tmp_path / "test_pytest_fixtures.py"
    tests.write_text((CHECKS / tests.name).read_text())
    args = ["-m", "pytest", "-p", "treasury_pytest.plugin", "-p", "no:cacheprovider", "-q"]
    args += ["-k", "memory"]
    result = run_in_install(
        tmp_path, {"treasury-core": set(), "pytest": set()}, [*args, tests.name], tmp_path
    )
    assert "1 passed" in result.stdout


# The core install used with an SQL URL: the error names the extra to install (issue 36, item 7).
SQL_URL_WITHOUT_THE_EXTRA = """
import sys
from treasury_core import TreasuryConfig, bootstrap

try:
    bootstrap(TreasuryConfig(database_url=sys.argv[1]))
except ModuleNotFoundError as exc:
    print(exc)
else:
    sys.exit("bootstrap worked without SQLAlchemy")
"""


@pytest.mark.parametrize(
    ("url", "extra"),
    [("sqlite:///t.db", "sql"), ("postgresql://u:p@127.0.0.1:1/db", "postgres")],
)
def test_an_sql_url_without_the_sql_extra_names_it(tmp_path: Path, url: str, extra: str) -> None:
    result = run_in_install(
        tmp_path, {"treasury-core": set()}, ["-c", SQL_URL_WITHOUT_THE_EXTRA, url], tmp_path
    )
    assert result.stdout.strip() == (
        f"SQLite and PostgreSQL storage need SQLAlchemy: pip install 'treasury-core[{extra}]'"
    )
    assert not (tmp_path / "t.db").exists()


@pytest.mark.parametrize("example", ["async_services.py", "sync_backend.py"])
def test_examples_with_the_sql_extra(tmp_path: Path, example: str) -> None:
    """docs/guides/embedding.md: 'treasury-core[sql]' for the core and SQLite storage."""
    run_in_install(tmp_path, {"treasury-core": {"sql"}}, [str(EXAMPLES / example)], ROOT)


def _check_installs_module() -> ModuleType:
    """tools/check_installs.py, which is a script, not a package."""
    spec = util.spec_from_file_location("check_installs", ROOT / "tools" / "check_installs.py")
    assert spec is not None and spec.loader is not None
    module = util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_embedding_guide_programs_with_the_sql_extra(tmp_path: Path) -> None:
    """The guide's complete programs, picked as tools/check_installs.py picks them."""
    guide = ROOT / "docs" / "guides" / "embedding.md"
    runnable, fragments = _check_installs_module().guide_snippets(guide.read_text())
    assert len(runnable) == 5 and len(fragments) == 2  # a block added to the guide: decide which
    for number, code in enumerate(runnable):
        program = tmp_path / f"snippet{number}.py"
        program.write_text(code)
        run_in_install(tmp_path, {"treasury-core": {"sql"}}, [str(program)], tmp_path)


def test_property_testing_example_without_extras(tmp_path: Path) -> None:
    """docs/guides/property-testing.md: the kit needs no extra, only Hypothesis beside it."""
    for source in (EXAMPLES / "property_testing").glob("*.py"):
        (tmp_path / source.name).write_text(source.read_text())
    # The machine on the shop's first storage fails by design (tests/examples_property).
    args = ["-m", "pytest", "-p", "no:cacheprovider", "-q", "-k", "not TestShopLedger", "."]
    roots: dict[str, set[str]] = {"treasury-core": set(), "pytest": set(), "hypothesis": set()}
    result = run_in_install(tmp_path, roots, args, tmp_path)
    assert "2 passed" in result.stdout
