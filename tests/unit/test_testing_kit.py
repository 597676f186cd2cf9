"""The testing kit's public surface: lazy exports, wallet strategies, and the machine's hooks
for subclasses' own rules."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test
from pydantic import TypeAdapter

import treasury_core.testing as kit
from tests.conftest import examples, machine_settings
from treasury_core import TreasuryConfig, bootstrap
from treasury_core.errors import InsufficientFunds, LedgerRejected
from treasury_core.ledger import AccountKind, Move, PostPending
from treasury_core.testing.contracts import storage as contract
from treasury_core.testing.machines import ledger as machine
from treasury_core.testing.machines import payments as payments_machine
from treasury_core.testing.machines import treasury as treasury_machine
from treasury_core.testing.strategies import wallet_names, wallet_requests
from treasury_core.validation import Name
from treasury_core.wallets import CreateWalletRequest

# Importing the kit with Hypothesis hidden, the way a production install without the dev extra
# would: the eager names work, a machine fails naming the missing module.
_WITHOUT_HYPOTHESIS = """
import sys

class NoHypothesis:
    def find_spec(self, name, path=None, target=None):
        if name == "hypothesis" or name.startswith("hypothesis."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoHypothesis())
import treasury_core.testing as kit
from treasury_core.testing import MemoryStorage, check_invariants
check_invariants(MemoryStorage())
try:
    kit.LedgerMachine
except ModuleNotFoundError as error:
    print("missing", error.name)
print("loaded", "hypothesis" in sys.modules)
"""


def test_the_kit_imports_without_hypothesis() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_HYPOTHESIS], capture_output=True, text=True, check=True
    )
    assert result.stdout.split("\n")[:2] == ["missing hypothesis", "loaded False"]


def test_machines_are_exported_lazily_from_their_modules() -> None:
    assert kit.LedgerMachine is machine.LedgerMachine
    assert kit.ledger_machine_test_case is machine.ledger_machine_test_case
    assert kit.TreasuryMachine is treasury_machine.TreasuryMachine
    assert kit.treasury_machine_test_case is treasury_machine.treasury_machine_test_case
    assert kit.PaymentsMachine is payments_machine.PaymentsMachine
    assert kit.payments_machine_test_case is payments_machine.payments_machine_test_case
    assert set(kit.__all__) <= set(dir(kit))
    with pytest.raises(AttributeError, match="no attribute 'NoSuchMachine'"):
        kit.NoSuchMachine  # noqa: B018 - the attribute access is the test


# The contract imports pytest: the kit must not, until the contract is asked for.
_CONTRACT_ON_DEMAND = """
import sys
import treasury_core.testing as kit
before = "pytest" in sys.modules
kit.StorageContract
print(before, "pytest" in sys.modules)
"""


def test_the_storage_contract_is_exported_lazily() -> None:
    assert kit.StorageContract is contract.StorageContract
    result = subprocess.run(
        [sys.executable, "-c", _CONTRACT_ON_DEMAND], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["False", "True"]


_NAME = TypeAdapter(Name)


@settings(max_examples=examples(200))
@given(wallet_names())
def test_wallet_names_are_valid_and_unchanged_by_validation(name: str) -> None:
    assert _NAME.validate_python(name) == name.strip()


def test_wallet_names_refuse_impossible_sizes() -> None:
    with pytest.raises(ValueError, match="1 to 255"):
        wallet_names(max_size=256)


@settings(max_examples=examples(40))
@given(wallet_requests())
def test_wallet_requests_are_accepted_by_the_service_and_read_back(
    request: CreateWalletRequest,
) -> None:
    treasury = bootstrap(TreasuryConfig(database_url="memory://"))

    async def create_and_read() -> None:
        company = await treasury.companies.create_company("Co")
        created = await treasury.wallets.create(company.company.id, request)
        stored = await treasury.wallets.get(company.company.id, created.id)
        assert (stored.name, stored.currency, stored.description) == (
            request.name,
            request.currency_id,
            request.description,
        )

    try:
        asyncio.run(create_and_read())
    finally:
        treasury.close()


@given(wallet_requests("KWD"))
def test_wallet_requests_take_a_fixed_currency(request: CreateWalletRequest) -> None:
    assert request.currency_id == "KWD"


class _OwnRules(machine.LedgerMachine):
    """A subclass with rules of its own, using only the hooks the docs promise."""

    @rule(data=st.data())
    def overdraw_through_apply_journal(self, data: st.DataObject) -> None:
        wallet = data.draw(st.sampled_from(self.model.wallets()))
        code = self.model.currency[wallet]
        room = self.model.room(wallet)
        assert room is not None
        world = self.system_account(AccountKind.WORLD, code)
        # Refused by both the model and the storage: apply_journal accepts the agreement.
        self.apply_journal([Move(wallet, world, code, room + 1)])
        self.expect_refusal(
            [Move(wallet, world, code, room + 1)], InsufficientFunds, "insufficient_funds"
        )

    @rule(data=st.data())
    def a_wrong_expectation_is_reported(self, data: st.DataObject) -> None:
        wallet = data.draw(st.sampled_from(self.model.wallets()))
        code = self.model.currency[wallet]
        world = self.system_account(AccountKind.WORLD, code)
        with pytest.raises(AssertionError, match="the model should refuse"):
            # A deposit is never refused: a rule expecting it to be is itself wrong.
            self.expect_refusal([Move(world, wallet, code, 1)], LedgerRejected, "pending_expired")

    @rule()
    def post_unknown_pending(self) -> None:
        self.expect_refusal([PostPending("nope")], LedgerRejected, "pending_not_found")


def test_subclass_rules_run_through_the_public_hooks() -> None:
    run_state_machine_as_test(_OwnRules, settings=machine_settings(examples=15, steps=15))


def test_system_account_names_the_run_accounts_and_refuses_wallets() -> None:
    instance = machine.LedgerMachine()
    try:
        assert instance.system_account(AccountKind.FEES, "EUR") == "fees-EUR"
        with pytest.raises(ValueError, match="wallets are many"):
            instance.system_account(AccountKind.WALLET, "EUR")
    finally:
        instance.teardown()
