"""The shipped storage contract as an adapter author meets it: their test files, run by pytest
through ``pytester``."""

from __future__ import annotations

import inspect

import pytest

from treasury_core.testing.contracts.storage import StorageContract

# pytest-asyncio warns in every run without it; users set it in their own configuration.
INI = """
[pytest]
asyncio_default_fixture_loop_scope = function
"""

CONTRACT_TESTS = sorted(name for name in dir(StorageContract) if name.startswith("test_"))

USER_TESTS = """
import pytest

from treasury_core.testing import MemoryStorage
from treasury_core.testing.contracts.storage import StorageContract


class TestMyStorage(StorageContract):
    @pytest.fixture
    def storage(self):
        s = MemoryStorage()
        yield s
        s.close()
"""

# A bug a SQL adapter can have: the wallet listing query forgot its company condition.
LEAKY_TESTS = """
from contextlib import contextmanager

import pytest

from treasury_core.testing import MemoryStorage
from treasury_core.testing.contracts.storage import StorageContract


class LeakyStorage(MemoryStorage):
    @contextmanager
    def transaction(self, *, write=True, snapshot=False):
        with super().transaction(write=write, snapshot=snapshot) as uow:
            wallets = self._state.wallets

            def list_every_company(company_id, limit, starting_after, *, metadata=None):
                rows = sorted(wallets.values(), key=lambda w: w.id, reverse=True)
                rows = [w for w in rows if (metadata or {}).items() <= w.metadata.items()]
                if starting_after is not None:
                    rows = [w for w in rows if w.id < starting_after]
                return rows[:limit]

            uow.wallets.list = list_every_company
            yield uow


class TestLeakyStorage(StorageContract):
    @pytest.fixture
    def storage(self):
        s = LeakyStorage()
        yield s
        s.close()
"""


@pytest.fixture
def user(pytester: pytest.Pytester) -> pytest.Pytester:
    """An adapter author's project, with an ini file."""
    pytester.makeini(INI)
    return pytester


def test_every_contract_test_takes_only_the_users_storage() -> None:
    # What the runs below count: a non-empty contract whose tests need no fixture but storage.
    assert len(CONTRACT_TESTS) >= 20
    for name in CONTRACT_TESTS:
        parameters = list(inspect.signature(getattr(StorageContract, name)).parameters)
        assert parameters == ["self", "storage"], name


def test_a_users_subclass_runs_the_whole_contract_and_passes(user: pytest.Pytester) -> None:
    user.makepyfile(test_my_storage=USER_TESTS)
    result = user.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=len(CONTRACT_TESTS))
    for name in CONTRACT_TESTS:
        result.stdout.fnmatch_lines([f"*TestMyStorage::{name} PASSED*"])


def test_a_broken_storage_fails_the_test_of_what_it_breaks(user: pytest.Pytester) -> None:
    user.makepyfile(test_leaky_storage=LEAKY_TESTS)
    result = user.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=len(CONTRACT_TESTS) - 1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*TestLeakyStorage::test_lists_are_newest_first_with_a_cursor FAILED*",
            # The failing line is the one about another company's (empty) list.
            "*uow.wallets.list(company + 99, 10, None)*",
        ]
    )


def test_a_parametrized_conftest_fixture_is_used_not_shadowed(user: pytest.Pytester) -> None:
    # The base class defines no storage fixture, so a conftest's reaches the subclass (as the
    # project's own parametrized one does), and importing the base class collects nothing.
    user.makeconftest(
        """
import pytest

from treasury_core.testing import MemoryStorage


@pytest.fixture(params=["first", "second"])
def storage():
    s = MemoryStorage()
    yield s
    s.close()
"""
    )
    user.makepyfile(
        test_two_storages="""
from treasury_core.testing.contracts.storage import StorageContract


class TestTwoStorages(StorageContract):
    pass
"""
    )
    result = user.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=2 * len(CONTRACT_TESTS))
    result.stdout.fnmatch_lines(
        ["*TestTwoStorages::test_a_journal_id_applies_once?second? PASSED*"]
    )


def test_without_a_storage_fixture_pytest_says_which_is_missing(user: pytest.Pytester) -> None:
    user.makepyfile(
        test_forgotten="""
from treasury_core.testing.contracts.storage import StorageContract


class TestForgotten(StorageContract):
    pass
"""
    )
    result = user.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=len(CONTRACT_TESTS))
    result.stdout.fnmatch_lines(["*fixture 'storage' not found*"])


def test_the_plugin_has_the_contracts_asserts_rewritten(user: pytest.Pytester) -> None:
    # In a fresh interpreter: this session imported the contract already, rewritten or not.
    user.makepyfile(test_leaky_storage=LEAKY_TESTS)
    shown = user.runpytest_subprocess(
        "-p", "no:cacheprovider", "-k", "test_lists_are_newest_first_with_a_cursor"
    )
    shown.assert_outcomes(failed=1)
    shown.stdout.fnmatch_lines(["*assert [[]Wallet(*] == []*"])
    bare = user.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:treasury", "-k", "test_lists_are_newest_first"
    )
    bare.assert_outcomes(failed=1)
    bare.stdout.no_fnmatch_line("*assert [[]Wallet(*] == []*")
