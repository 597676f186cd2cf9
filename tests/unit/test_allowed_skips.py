"""The skip check of tests/conftest.py: with every test service configured (or ``CI`` set), a
skip whose reason tests/allowed_skips.txt does not list fails the run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import (
    ALLOWED_SKIPS,
    ROOT,
    SERVICE_ENVS,
    allowed_skip_patterns,
    disallowed_skips,
)

#: A project whose conftest takes the suite's skip hooks.
CONFTEST = """
from tests.conftest import pytest_collectreport, pytest_runtest_logreport, pytest_sessionfinish
"""
TESTS = """
import pytest

def test_runs():
    pass

def test_skips():
    pytest.skip("the frobnicator is not installed")
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    for name in (*SERVICE_ENVS, "CI"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_some=TESTS)
    return pytester


def test_in_ci_a_skip_off_the_list_fails_the_run(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*skips not on tests/allowed_skips.txt*",
            "test_some.py::test_skips: the frobnicator is not installed",
        ]
    )


def test_with_every_service_configured_a_skip_off_the_list_fails_the_run(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in SERVICE_ENVS:
        monkeypatch.setenv(name, "configured")
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize("ci", ["", "false"])
def test_without_the_services_a_skip_is_only_reported(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("CI", ci)
    # One service alone is a developer's partial setup, not a full run.
    monkeypatch.setenv(SERVICE_ENVS[0], "configured")
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, skipped=1)


def test_a_listed_reason_passes_and_the_list_explains_every_pattern(tmp_path: Path) -> None:
    listed = tmp_path / "allowed.txt"
    listed.write_text("# The frobnicator has no Linux build.\nthe frobnicator *\n\n")
    patterns = allowed_skip_patterns(listed)
    assert patterns == ["the frobnicator *"]
    skipped = [("t::a", "the frobnicator is not installed"), ("t::b", "no PostgreSQL")]
    assert disallowed_skips(skipped, patterns) == [("t::b", "no PostgreSQL")]
    # A blank line ends an explanation: the pattern after it has none.
    listed.write_text("# Why.\n\nthe frobnicator *\n")
    with pytest.raises(pytest.UsageError, match="say why above"):
        allowed_skip_patterns(listed)
    # The suite's own list reads.
    assert isinstance(allowed_skip_patterns(ALLOWED_SKIPS), list)
