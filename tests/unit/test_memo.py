"""The identity memo: an answer per instance, never another instance's, and bounded."""

from __future__ import annotations

import json

import pytest
from pydantic import ConfigDict

from treasury_core.ledger import BalanceRecord
from treasury_core.ledger import balance as balance_module
from treasury_core.ledger.accounts import Account, AccountKind
from treasury_core.memo import InstanceMemo


def wallet(credits: int = 1_000, holds: int = 0) -> Account:
    return Account(
        "wal_a", "EUR", AccountKind.WALLET, 1, credits_posted=credits, debits_pending_holds=holds
    )


def test_an_instance_gets_what_was_put_for_it() -> None:
    memo: InstanceMemo[Account, str] = InstanceMemo()
    one = wallet()
    assert memo.get(one) is None
    assert memo.put(one, "one") == "one"
    assert memo.get(one) == "one"


def test_an_equal_instance_is_another_instance() -> None:
    memo: InstanceMemo[Account, str] = InstanceMemo()
    one, twin = wallet(), wallet()
    assert one == twin
    memo.put(one, "one")
    assert memo.get(twin) is None


def test_it_holds_at_most_max_entries() -> None:
    memo: InstanceMemo[Account, int] = InstanceMemo(max_entries=3)
    accounts = [wallet(n) for n in range(10)]
    for n, one in enumerate(accounts):
        memo.put(one, n)
        assert len(memo) <= 3
        assert memo.get(one) == n
    # Emptied whenever full: of ten, only the last one put is still there.
    assert [memo.get(a) for a in accounts].count(None) == 9


def test_an_empty_memo_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        InstanceMemo(max_entries=0)


@pytest.fixture
def empty_records(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(balance_module, "_RECORDS", InstanceMemo())


@pytest.mark.usefixtures("empty_records")
def test_a_balance_record_is_made_once_per_account_instance() -> None:
    one = wallet(1_000, holds=300)
    record = BalanceRecord.of(one)
    assert BalanceRecord.of(one) is record
    assert (record.balance, record.pending_holds, record.available_balance) == (1_000, 300, 700)


@pytest.mark.usefixtures("empty_records")
def test_a_changed_account_gets_its_own_record() -> None:
    before = wallet(1_000)
    BalanceRecord.of(before)
    after = wallet(1_500)
    assert BalanceRecord.of(after).available_balance == 1_500
    assert BalanceRecord.of(before).available_balance == 1_000


@pytest.mark.usefixtures("empty_records")
def test_a_subclass_gets_instances_of_itself() -> None:
    class Annotated(BalanceRecord):
        note: str = "mine"

    one = wallet()
    BalanceRecord.of(one)
    mine = Annotated.of(one)
    assert type(mine) is Annotated
    assert type(BalanceRecord.of(one)) is BalanceRecord


@pytest.mark.usefixtures("empty_records")
def test_a_balance_record_renders_once_and_as_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(balance_module, "_RENDERED", InstanceMemo())
    record = BalanceRecord.of(wallet(1_000, holds=250))
    assert record.record_json() is record.record_json()
    assert record.record_json() == record.model_dump_json().encode()
    other = BalanceRecord.of(wallet(2_000))
    assert json.loads(other.record_json())["available_balance"] == 2_000
    assert json.loads(record.record_json())["available_balance"] == 750


def test_a_subclass_renders_every_time() -> None:
    class Loose(BalanceRecord):
        model_config = ConfigDict(frozen=False)

    loose = Loose.of(wallet(1_000))
    assert json.loads(loose.record_json())["balance"] == 1_000
    loose.balance = 5
    assert json.loads(loose.record_json())["balance"] == 5
