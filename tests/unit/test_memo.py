"""The identity memo (an answer per instance, never another instance's, and bounded) and the
server's rendering of polled records through it."""

from __future__ import annotations

import json

import pytest

from treasury_aiohttp import rendering
from treasury_aiohttp.memo import InstanceMemo
from treasury_core.ledger import BalanceRecord
from treasury_core.ledger.accounts import Account, AccountKind


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


def test_a_balance_record_is_made_of_its_account() -> None:
    record = BalanceRecord.of(wallet(1_000, holds=300))
    assert (record.balance, record.pending_holds, record.available_balance) == (1_000, 300, 700)
    assert record.record_json() == record.model_dump_json().encode()


def test_a_subclass_gets_instances_of_itself() -> None:
    class Annotated(BalanceRecord):
        note: str = "mine"

    mine = Annotated.of(wallet())
    assert type(mine) is Annotated
    assert json.loads(mine.record_json())["note"] == "mine"


def test_the_core_keeps_no_rendered_balance() -> None:
    # The memo is the server's (for intents); balance records render afresh on every call.
    balance = BalanceRecord.of(wallet())
    assert balance.record_json() is not balance.record_json()
    assert rendering.balance_json(balance) == balance.record_json()
