"""The wheel ships only treasury_* import names, with py.typed and the migrations."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_top_level_names_are_all_treasury(tmp_path: Path) -> None:
    builders = pytest.importorskip("hatchling.builders.wheel", reason="hatchling builds the wheel")
    builder = builders.WheelBuilder(str(ROOT))
    wheel = Path(next(iter(builder.build(directory=str(tmp_path), versions=["standard"]))))
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {
        "treasury_core",
        "treasury_sqlalchemy",
        "treasury_system",
        "treasury_sandbox",
        "treasury_vault",
        "treasury_ecb",
        "treasury_stripe",
        "treasury_bankfiles",
        "treasury_redis",
        "treasury_aiohttp",
        "treasury_pytest",
    }
    for package in top:
        assert f"{package}/py.typed" in names
    assert "treasury_sqlalchemy/migrations/versions/0001_initial_schema.py" in names
    assert "treasury_sqlalchemy/migrations/versions/0002_treasury_records_and_jobs.py" in names
    assert "treasury_sqlalchemy/migrations/script.py.mako" in names
    # The hosted pages need their templates and stylesheet at run time.
    assert "treasury_aiohttp/templates/pay.html" in names
    assert "treasury_aiohttp/static/hosted.css" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "treasury = treasury_aiohttp.cli.commands:main" in text
    assert "[treasury]" in text


def test_sdist_ships_the_license_and_no_ci_or_benchmarks(tmp_path: Path) -> None:
    builders = pytest.importorskip("hatchling.builders.sdist", reason="hatchling builds the sdist")
    builder = builders.SdistBuilder(str(ROOT))
    sdist = Path(next(iter(builder.build(directory=str(tmp_path), versions=["standard"]))))
    with tarfile.open(sdist) as archive:
        # Every member sits under one "treasury_core-<version>/" directory.
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert "LICENSE" in names
    assert "pyproject.toml" in names
    assert "src/treasury_core/__init__.py" in names
    assert not {n for n in names if n.startswith((".ci/", "bench/", "build/"))}
    assert not {n for n in names if n.endswith(".whl")}


def test_version_comes_from_the_package_metadata() -> None:
    from importlib.metadata import version

    import treasury_core

    assert treasury_core.__version__ == version("treasury-core")
