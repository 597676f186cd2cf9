"""The shipped card provider contract as an adapter author meets it: their test files, run by
pytest through ``pytester``, on a good provider and on providers each broken in one way."""

from __future__ import annotations

import pytest

from treasury_core.testing.contracts.card_provider import CardProviderContract

# pytest-asyncio warns in every run without it; users set it in their own configuration.
INI = """
[pytest]
asyncio_default_fixture_loop_scope = function
"""

CONTRACT_TESTS = sorted(name for name in dir(CardProviderContract) if name.startswith("test_"))
#: What the sandbox, which takes no keys and answers no lookups, has nothing to check for.
SKIPPED_BY_THE_SANDBOX = [
    "attempt_keys_supported() is off",
    "keyed_calls_supported() is off",
    "keyed_calls_supported() is off",
    "lookups_supported() is off",
    "lookups_supported() is off",
]

#: The sandbox provider with its test cards, as a subclass of the contract; ``PROVIDER`` is
#: replaced by the provider class under test.
USER_TESTS = """
import logging

import pytest

from treasury_core.errors import CardError
from treasury_core.ports.card_provider import CardData
from treasury_core.testing import FakeClock
from treasury_core.testing.contracts.card_provider import CardProviderContract
from treasury_sandbox.card_provider import SandboxCardProvider

{provider}


def card(number):
    return CardData(number, 12, 2040, "123")


class TestMyProvider(CardProviderContract):
    @pytest.fixture
    def card_provider(self):
        return MyProvider(FakeClock())

    @pytest.fixture
    def good_card(self):
        return card("4242424242424242")

    @pytest.fixture
    def declined_card(self):
        return card("4000000000000002")

    @pytest.fixture
    def three_d_secure_card(self):
        return card("4000000000003220")

    @pytest.fixture
    def hold_gone_card(self):
        return card("4000000000000259")
"""

GOOD = """
class MyProvider(SandboxCardProvider):
    pass
"""

#: Providers broken in one way each, and the contract tests that must fail for it (in the
#: contract's order).
BROKEN = {
    "logs the card number": (
        """
class MyProvider(SandboxCardProvider):
    async def authorize(self, card, amount, currency, *, capture, attempt_key=None):
        logging.getLogger("acme").debug("charging card %s", card.number)
        return await super().authorize(card, amount, currency, capture=capture)
""",
        ["test_card_data_never_appears_in_references_results_errors_or_logs"],
    ),
    "captures over the hold": (
        """
class MyProvider(SandboxCardProvider):
    async def capture(self, reference, amount):
        return await super().capture(reference, min(amount, 1_000))
""",
        ["test_manual_capture_in_part_and_never_over_the_hold"],
    ),
    "voids a voided hold with an error": (
        """
class MyProvider(SandboxCardProvider):
    async def void(self, reference):
        if reference.endswith("_v"):
            raise CardError("Already voided", failure_reason="already_voided")
        return await super().void(reference)
""",
        ["test_manual_capture_a_hold_is_voided_twice_harmlessly"],
    ),
    "refunds with its refund flags off": (
        """
class MyProvider(SandboxCardProvider):
    def refunds_supported(self):
        return False

    def partial_refunds_supported(self):
        return False
""",
        [
            "test_refunds_in_full_within_the_captured_amount",
            "test_partial_refunds_add_up_to_the_captured_amount",
        ],
    ),
    "challenges with 3-D Secure off": (
        """
class MyProvider(SandboxCardProvider):
    def three_d_secure_supported(self):
        return False
""",
        ["test_three_d_secure_challenge_then_complete"],
    ),
}


@pytest.fixture
def user(pytester: pytest.Pytester) -> pytest.Pytester:
    """An adapter author's project, with an ini file."""
    pytester.makeini(INI)
    return pytester


def test_a_users_subclass_runs_the_whole_contract_and_passes(user: pytest.Pytester) -> None:
    assert len(CONTRACT_TESTS) >= 18
    user.makepyfile(test_my_provider=USER_TESTS.format(provider=GOOD))
    result = user.runpytest("-p", "no:cacheprovider", "-v", "-rs")
    # The sandbox takes no keys and answers no lookups: those tests have nothing to check,
    # and say so.
    skipped = len(SKIPPED_BY_THE_SANDBOX)
    result.assert_outcomes(passed=len(CONTRACT_TESTS) - skipped, skipped=skipped)
    for reason in sorted(set(SKIPPED_BY_THE_SANDBOX)):
        result.stdout.fnmatch_lines([f"SKIPPED*{reason}*"])


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_a_broken_provider_fails_the_tests_of_what_it_breaks(
    user: pytest.Pytester, broken: str
) -> None:
    provider, failing = BROKEN[broken]
    user.makepyfile(test_my_provider=USER_TESTS.format(provider=provider))
    result = user.runpytest("-p", "no:cacheprovider", "-v")
    skipped = len(SKIPPED_BY_THE_SANDBOX)
    result.assert_outcomes(
        passed=len(CONTRACT_TESTS) - skipped - len(failing), failed=len(failing), skipped=skipped
    )
    result.stdout.fnmatch_lines([f"*TestMyProvider::{name} FAILED*" for name in failing])


#: The sandbox with keyed calls and lookups, kept in memory: a provider that remembers keys.
KEYED = """
from datetime import UTC, datetime

from treasury_core.ports.card_provider import ProviderCharge


class MyProvider(SandboxCardProvider):
    def __init__(self, clock):
        super().__init__(clock)
        self.attempts = {}  # attempt key -> its charge
        self.charges = {}  # each reference -> its charge (references change with its state)
        self.refunds = {}  # (charge, key) -> the refund's result

    def attempt_keys_supported(self):
        return True

    def keyed_calls_supported(self):
        return True

    def lookups_supported(self):
        return True

    def _now(self, charge, result):
        charge["result"] = result
        self.charges[result.reference] = charge
        return result

    async def authorize(self, card, amount, currency, *, capture, attempt_key=None, owner=None):
        if attempt_key in self.attempts:
            return self.attempts[attempt_key]["result"]
        result = await super().authorize(card, amount, currency, capture=capture)
        charge = {
            "id": len(self.charges), "key": attempt_key, "owner": owner, "amount": amount,
            "currency": currency, "captured": amount if capture else 0, "refunded": 0,
            "at": datetime.now(UTC),
        }
        if attempt_key is not None:
            self.attempts[attempt_key] = charge
        return self._now(charge, result)

    async def capture(self, reference, amount, *, key=None):
        result = await super().capture(reference, amount)
        self.charges[reference]["captured"] = amount
        return self._now(self.charges[reference], result)

    async def void(self, reference, *, key=None):
        return self._now(self.charges[reference], await super().void(reference))

    async def complete_action(self, reference):
        return self._now(self.charges[reference], await super().complete_action(reference))

    async def refund(self, reference, amount, *, key=None, owner=None):
        charge = self.charges[reference]
        if (charge["id"], key) in self.refunds:
            return self.refunds[charge["id"], key]
        result = await super().refund(reference, amount)
        charge["refunded"] += amount
        if key is not None:
            self.refunds[charge["id"], key] = result
        return result

    async def find_charge(self, attempt_key):
        charge = self.attempts.get(attempt_key)
        return None if charge is None else charge["result"]

    async def find_refund(self, reference, key):
        charge = self.charges.get(reference)
        return None if charge is None else self.refunds.get((charge["id"], key))

    async def recent_charges(self, since):
        charges = {charge["id"]: charge for charge in self.charges.values()}.values()
        return [
            ProviderCharge(
                c["result"].reference, c["owner"], c["key"], c["result"].status, c["amount"],
                c["currency"], c["captured"], c["refunded"], c["at"],
            )
            for c in charges
            if c["at"] >= since
        ]
"""

#: The keyed provider broken in one way each (a replacement of one of its lines), and the
#: contract tests that must fail for it.
BROKEN_KEYED = {
    "forgets its refund keys": (
        ('if (charge["id"], key) in self.refunds:', "if False:"),
        ["test_keyed_calls_repeated_with_their_key_make_nothing_twice"],
    ),
    "answers a charge as it first was": (
        ('charge["result"] = result', 'charge.setdefault("result", result)'),
        ["test_lookups_find_what_keyed_calls_made_and_nothing_else"],
    ),
    "lists charges without their owners": (
        ('c["result"].reference, c["owner"]', 'c["result"].reference, None'),
        ["test_lookups_list_recent_charges_with_their_owners"],
    ),
}


def _keyed_tests(provider: str) -> str:
    tests = USER_TESTS.format(provider=provider)
    return tests.replace(
        "class TestMyProvider(CardProviderContract):\n",
        "class TestMyProvider(CardProviderContract):\n    replays_keyed_calls = True\n",
    )


def test_a_provider_with_keyed_calls_and_lookups_runs_every_test(user: pytest.Pytester) -> None:
    user.makepyfile(test_my_provider=_keyed_tests(KEYED))
    result = user.runpytest("-p", "no:cacheprovider", "-v", "-rs")
    result.assert_outcomes(passed=len(CONTRACT_TESTS))


@pytest.mark.parametrize("broken", sorted(BROKEN_KEYED))
def test_a_broken_keyed_provider_fails_the_tests_of_what_it_breaks(
    user: pytest.Pytester, broken: str
) -> None:
    (line, replacement), failing = BROKEN_KEYED[broken]
    assert line in KEYED
    user.makepyfile(test_my_provider=_keyed_tests(KEYED.replace(line, replacement, 1)))
    result = user.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=len(CONTRACT_TESTS) - len(failing), failed=len(failing))
    result.stdout.fnmatch_lines([f"*TestMyProvider::{name} FAILED*" for name in failing])


def test_replayed_keys_are_checked_only_when_the_suite_says_so(user: pytest.Pytester) -> None:
    (line, replacement), _ = BROKEN_KEYED["forgets its refund keys"]
    user.makepyfile(test_my_provider=USER_TESTS.format(provider=KEYED.replace(line, replacement)))
    result = user.runpytest("-p", "no:cacheprovider", "-v", "-rs")
    result.assert_outcomes(passed=len(CONTRACT_TESTS) - 1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*replays_keyed_calls is not set*"])


def test_without_the_fixtures_pytest_says_which_is_missing(user: pytest.Pytester) -> None:
    user.makepyfile(
        test_forgotten="""
from treasury_core.testing.contracts.card_provider import CardProviderContract


class TestForgotten(CardProviderContract):
    pass
"""
    )
    result = user.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=len(CONTRACT_TESTS))
    result.stdout.fnmatch_lines(["*fixture 'card_provider' not found*"])


def test_a_provider_announcing_3_d_secure_needs_its_test_card(user: pytest.Pytester) -> None:
    tests = USER_TESTS.format(provider=GOOD).replace("def three_d_secure_card", "def unused")
    user.makepyfile(test_my_provider=tests)
    result = user.runpytest("-p", "no:cacheprovider", "-k", "three_d_secure")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*define a three_d_secure_card fixture*"])


def test_the_contract_and_the_sales_only_provider_are_in_the_kit() -> None:
    import treasury_core.testing as kit
    from treasury_core.testing.fakes.card_providers import SalesOnlyCardProvider

    assert kit.CardProviderContract is CardProviderContract
    assert kit.SalesOnlyCardProvider is SalesOnlyCardProvider


def test_the_plugin_has_the_contracts_asserts_rewritten(user: pytest.Pytester) -> None:
    # In a fresh interpreter: this session imported the contract already, rewritten or not.
    provider, _ = BROKEN["logs the card number"]
    user.makepyfile(test_my_provider=USER_TESTS.format(provider=provider))
    selected = ("-p", "no:cacheprovider", "-k", "card_data_never_appears")
    shown = user.runpytest_subprocess(*selected)
    shown.assert_outcomes(failed=1)
    shown.stdout.fnmatch_lines(["*assert [[]*DEBUG*] == []*"])
    bare = user.runpytest_subprocess(*selected, "-p", "no:treasury")
    bare.assert_outcomes(failed=1)
    bare.stdout.no_fnmatch_line("*assert [[]*DEBUG*] == []*")


def test_an_optional_fixture_that_cannot_be_built_is_an_error_not_a_skip(
    user: pytest.Pytester,
) -> None:
    tests = USER_TESTS.format(provider=GOOD).replace(
        '    def hold_gone_card(self):\n        return card("4000000000000259")',
        "    def lose_hold(self, nope):\n        return nope",
    )
    assert "def lose_hold" in tests
    user.makepyfile(test_my_provider=tests)
    result = user.runpytest("-p", "no:cacheprovider", "-k", "hold_gone")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*fixture 'nope' not found*"])
