"""check_invariants: silent on healthy ledgers, and names each kind of corruption.

Corruptions are made by editing a MemoryStorage's state behind the storage port's back, the way
a buggy adapter or kernel would.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from treasury_core.currency import CurrencyRegistry
from treasury_core.errors import InsufficientFunds, LedgerRejected
from treasury_core.ledger import (
    Account,
    AccountKind,
    ExpirePending,
    Journal,
    Leg,
    Move,
    PendingCategory,
    PendingStatus,
    Posting,
    PostingKind,
    PostPending,
    Reserve,
    VoidPending,
)
from treasury_core.memory.storage import MemoryStorage
from treasury_core.ports import UnitOfWork
from treasury_core.testing.invariants import (
    InvariantViolation,
    check_history,
    check_invariants,
    check_snapshot,
    ledger_violations,
    read_ledger,
    wallet_history_violations,
)
from treasury_core.testing.strategies import (
    AdvanceClock,
    ApplyJournal,
    LedgerProgram,
    accounts,
    amounts,
    currencies,
    currency_sets,
    ledger_programs,
    run_program,
    wallet_accounts,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)

# Journal ids of the healthy ledger below, and what each leaves behind.
DEPOSIT = "j01"  # world-USD -> w1, 1000
CAPTURED = "j02.0"  # hold 300 on w1 (deadline T0+60s), later posted 100
VOIDED = "j03.0"  # out 200 w1 -> w2, later voided
EXPIRED = "j04.0"  # hold 50 on w1 (deadline T0+10s), expired
OPEN = "j05.0"  # out 70 w1 -> w2, still pending
FX = "j09"  # w1 sells 100 USD, e1 receives 90 EUR


def _account(account_id: str, currency: str, kind: AccountKind, *, limit: int = 0) -> Account:
    guarded = kind is AccountKind.WALLET
    return Account(
        account_id,
        currency,
        kind,
        company_id=1 if guarded else None,
        guarded=guarded,
        overdraft_limit=limit,
    )


def _apply(storage: MemoryStorage, journal_id: str, now: datetime, *legs: Leg) -> None:
    journal = Journal(journal_id, legs)
    storage.run_sync(lambda uow: uow.ledger.apply(journal, now))


def healthy_ledger() -> MemoryStorage:
    """Two currencies; posted, partially captured, voided, expired and open movements, FX."""
    storage = MemoryStorage()
    opened = [
        _account("world-USD", "USD", AccountKind.WORLD),
        _account("fx-USD", "USD", AccountKind.FX_LIQUIDITY),
        _account("w1", "USD", AccountKind.WALLET),
        _account("w2", "USD", AccountKind.WALLET, limit=500),
        _account("world-EUR", "EUR", AccountKind.WORLD),
        _account("fx-EUR", "EUR", AccountKind.FX_LIQUIDITY),
        _account("e1", "EUR", AccountKind.WALLET),
    ]

    def open_all(uow: UnitOfWork) -> None:
        for account in opened:
            uow.ledger.open_account(account)

    storage.run_sync(open_all)
    _apply(storage, "j01", T0, Move("world-USD", "w1", "USD", 1000))
    _apply(
        storage,
        "j02",
        T0,
        Reserve("w1", "world-USD", "USD", 300, PendingCategory.HOLD, T0 + timedelta(seconds=60)),
    )
    _apply(storage, "j03", T0, Reserve("w1", "w2", "USD", 200, PendingCategory.OUT))
    _apply(
        storage,
        "j04",
        T0,
        Reserve("w1", "world-USD", "USD", 50, PendingCategory.HOLD, T0 + timedelta(seconds=10)),
    )
    _apply(storage, "j05", T0, Reserve("w1", "w2", "USD", 70, PendingCategory.OUT))
    _apply(storage, "j06", T0 + timedelta(seconds=5), PostPending(CAPTURED, 100))
    _apply(storage, "j07", T0 + timedelta(seconds=5), VoidPending(VOIDED))
    _apply(storage, "j08", T0 + timedelta(seconds=10), ExpirePending(EXPIRED))
    _apply(
        storage,
        FX,
        T0 + timedelta(seconds=20),
        Move("w1", "fx-USD", "USD", 100),
        Move("fx-EUR", "e1", "EUR", 90),
    )
    # w2 uses part of its overdraft: allowed, and must not be reported.
    _apply(storage, "j10", T0 + timedelta(seconds=20), Move("w2", "world-USD", "USD", 400))
    return storage


def violations_of(storage: MemoryStorage) -> list[str]:
    with pytest.raises(InvariantViolation) as caught:
        check_invariants(storage)
    # The snapshot's violations, then the wallet histories' (a posting forced in below writes
    # no history entry); the tests here look at the snapshot's.
    snapshot = ledger_violations(read_ledger(storage))
    assert list(caught.value.violations) == snapshot + wallet_history_violations(storage)
    return snapshot


def force(storage: MemoryStorage, posting: Posting) -> None:
    """Write a posting and its counter changes with no check at all (a buggy adapter)."""
    state = storage._state
    state.postings.append(posting)
    for account_id in {posting.debit_account_id, posting.credit_account_id}:
        state.accounts[account_id] = state.accounts[account_id].with_delta(
            posting.delta_for(account_id)
        )


def move_posting(
    posting_id: str, debit: str, credit: str, amount: int, currency: str = "USD"
) -> Posting:
    return Posting(
        id=posting_id,
        journal_id=posting_id.split(".")[0],
        kind=PostingKind.POSTED,
        debit_account_id=debit,
        credit_account_id=credit,
        currency=currency,
        amount=amount,
        created_at=T0,
    )


def tagged(violations: list[str], tag: str) -> list[str]:
    return [v for v in violations if v.startswith(f"[{tag}]")]


# Healthy ledgers ------------------------------------------------------------------------------


def test_empty_ledger_passes() -> None:
    check_invariants(MemoryStorage())


def test_healthy_ledger_passes() -> None:
    storage = healthy_ledger()
    check_invariants(storage)
    snapshot = read_ledger(storage)
    assert {p.id: p.status for p in snapshot.pendings} == {
        CAPTURED: PendingStatus.POSTED,
        VOIDED: PendingStatus.VOIDED,
        EXPIRED: PendingStatus.EXPIRED,
        OPEN: PendingStatus.PENDING,
    }
    w2 = snapshot.account("w2")
    assert w2 is not None and w2.available_balance == -400  # inside its 500 overdraft


def test_refused_journals_leave_a_healthy_ledger() -> None:
    storage = healthy_ledger()
    before = read_ledger(storage)
    with pytest.raises(InsufficientFunds):
        _apply(storage, "r1", T0, Move("e1", "world-EUR", "EUR", 91))
    with pytest.raises(LedgerRejected):
        _apply(
            storage,
            "r2",
            T0 + timedelta(seconds=60),
            Move("world-USD", "w1", "USD", 1),
            PostPending(OPEN),
            PostPending(OPEN),
        )
    assert read_ledger(storage) == before
    check_invariants(storage)
    check_history(before, read_ledger(storage))


@settings(max_examples=examples(150))
@given(ledger_programs())
def test_generated_programs_leave_a_healthy_ledger(program: LedgerProgram) -> None:
    storage = MemoryStorage()
    outcomes = run_program(storage, program)
    assert len(outcomes) == len(program.journals)
    check_invariants(storage)
    snapshot = read_ledger(storage)
    applied = [j for j, refusal in zip(program.journals, outcomes, strict=True) if refusal is None]
    assert len(snapshot.postings) == sum(len(j.legs) for j in applied)


# Each kind of corruption ----------------------------------------------------------------------


def test_violation_is_an_assertion_error_listing_everything() -> None:
    storage = healthy_ledger()
    accounts_ = storage._state.accounts
    accounts_["w1"] = replace(accounts_["w1"], credits_posted=accounts_["w1"].credits_posted + 7)
    accounts_["e1"] = replace(accounts_["e1"], debits_pending_holds=3)
    with pytest.raises(AssertionError) as caught:
        check_invariants(storage)
    error = caught.value
    assert isinstance(error, InvariantViolation)
    text = str(error)
    assert f"{len(error.violations)} ledger invariant violation(s)" in text
    assert all(v in text for v in error.violations)
    assert any("w1" in v for v in error.violations)
    assert any("e1" in v for v in error.violations)


def test_posting_in_the_wrong_currency() -> None:
    storage = healthy_ledger()
    postings = storage._state.postings
    index = next(i for i, p in enumerate(postings) if p.id == f"{FX}.1")
    postings[index] = replace(postings[index], currency="USD")  # between EUR accounts
    assert violations_of(storage) == [
        f"[1] posting {FX}.1 (posted) is in USD but its debit account fx-EUR holds EUR",
        f"[1] posting {FX}.1 (posted) is in USD but its credit account e1 holds EUR",
    ]


def test_posting_across_currencies_unbalances_its_journal() -> None:
    storage = healthy_ledger()
    postings = storage._state.postings
    index = next(i for i, p in enumerate(postings) if p.id == f"{FX}.1")
    postings[index] = replace(postings[index], debit_account_id="fx-USD")  # USD -> EUR
    found = tagged(violations_of(storage), "1")
    assert (
        f"[1] journal {FX} does not balance in EUR: posted debits 0 != posted credits 90" in found
    )
    assert (
        f"[1] journal {FX} does not balance in USD: posted debits 190 != posted credits 100"
        in found
    )


def test_posting_between_an_account_and_itself() -> None:
    storage = healthy_ledger()
    force(storage, move_posting("bad.0", "w1", "w1", 5))
    found = violations_of(storage)
    assert tagged(found, "1") == [
        "[1] posting bad.0 (posted) debits and credits the same account w1"
    ]


def test_stray_money_breaks_the_zero_sum() -> None:
    storage = healthy_ledger()
    # A posting whose other side vanished: w1's counters match its postings, world-USD's do not.
    force(storage, move_posting("bad.0", "world-USD", "w1", 5))
    world = storage._state.accounts["world-USD"]
    storage._state.accounts["world-USD"] = replace(world, debits_posted=world.debits_posted - 5)
    found = violations_of(storage)
    assert tagged(found, "2") == ["[2] USD: posted credits - debits over all accounts is 5, not 0"]
    assert tagged(found, "3") == [
        "[3] account world-USD: stored debits_posted is 1000, its postings fold to 1005"
    ]


def test_pending_sums_must_match_per_currency() -> None:
    storage = healthy_ledger()
    w2 = storage._state.accounts["w2"]
    storage._state.accounts["w2"] = replace(w2, credits_pending=w2.credits_pending + 1)
    found = violations_of(storage)
    assert "[2] USD: pending debits 70 != pending credits 71 over all accounts" in found
    assert any(v.startswith("[3] account w2: stored credits_pending is 71") for v in found)


def test_counter_that_disagrees_with_postings() -> None:
    storage = healthy_ledger()
    e1 = storage._state.accounts["e1"]
    storage._state.accounts["e1"] = replace(e1, credits_posted=e1.credits_posted + 10)
    found = violations_of(storage)
    assert "[3] account e1: stored credits_posted is 100, its postings fold to 90" in found


def test_lost_posting_is_reported() -> None:
    storage = healthy_ledger()
    storage._state.postings[:] = [p for p in storage._state.postings if p.id != f"{FX}.1"]
    found = tagged(violations_of(storage), "3")
    assert "[3] account e1: stored credits_posted is 90, its postings fold to 0" in found
    assert "[3] account fx-EUR: stored debits_posted is 90, its postings fold to 0" in found


def test_duplicate_posting_is_reported() -> None:
    storage = healthy_ledger()
    storage._state.postings.append(storage._state.postings[0])
    assert "[3] posting id j01.0 is stored twice" in violations_of(storage)


def test_posting_to_an_unknown_account() -> None:
    storage = healthy_ledger()
    storage._state.postings.append(move_posting("bad.0", "w1", "ghost", 1))
    assert "[3] posting bad.0 (posted): credit account ghost does not exist" in violations_of(
        storage
    )


def test_derived_balance_that_counts_pending_in() -> None:
    @dataclass(frozen=True, slots=True)
    class LeakyAccount(Account):
        @property
        def available_balance(self) -> int:
            # The bug invariant 4 forbids: incoming funds counted as available.
            return (
                self.credits_posted
                - self.debits_posted
                - self.debits_pending_holds
                - self.debits_pending_out
                + self.credits_pending
            )

    storage = healthy_ledger()
    w2 = storage._state.accounts["w2"]
    storage._state.accounts["w2"] = LeakyAccount(
        **{name: getattr(w2, name) for name in Account.__dataclass_fields__}
    )
    found = violations_of(storage)
    assert found == ["[4] account w2: available_balance is -330, the counters give -400"]


def test_guarded_account_below_its_overdraft() -> None:
    storage = healthy_ledger()
    # A kernel that forgot the funds check: e1 (90 EUR, no overdraft) pays out 100.
    force(storage, move_posting("bad.0", "e1", "world-EUR", 100, "EUR"))
    found = violations_of(storage)
    assert found == ["[5] account e1: available balance -10 is below 0 (overdraft limit 0)"]


def test_overdraft_beyond_the_limit() -> None:
    storage = healthy_ledger()
    force(storage, move_posting("bad.0", "w2", "world-USD", 101))  # limit 500, -400 already
    found = violations_of(storage)
    assert found == ["[5] account w2: available balance -501 is below -500 (overdraft limit 500)"]


def test_unguarded_accounts_may_go_negative() -> None:
    storage = healthy_ledger()
    snapshot = read_ledger(storage)
    world = snapshot.account("world-USD")
    assert world is not None and world.balance < 0
    check_snapshot(snapshot)


def test_negative_counter() -> None:
    storage = healthy_ledger()
    e1 = storage._state.accounts["e1"]
    storage._state.accounts["e1"] = replace(e1, debits_pending_out=-5, debits_posted=-5)
    found = tagged(violations_of(storage), "5")
    assert "[5] account e1: counter debits_posted is negative (-5)" in found
    assert "[5] account e1: counter debits_pending_out is negative (-5)" in found


def test_resolved_status_without_a_resolution_posting() -> None:
    storage = healthy_ledger()
    pendings = storage._state.pendings
    pendings[OPEN] = replace(pendings[OPEN], status=PendingStatus.VOIDED, resolved_by="j99.0")
    found = tagged(violations_of(storage), "6")
    assert (
        f"[6] pending movement {OPEN} (voided) must have exactly one resolution posting, has: none"
        in found
    )
    # Its 70 is still reserved in the counters, which an open reservation no longer explains.
    assert "[6] account w1: debits_pending_out is 70, its open pending movements reserve 0" in found


def test_pending_status_with_a_resolution_posting() -> None:
    storage = healthy_ledger()
    pendings = storage._state.pendings
    pendings[VOIDED] = replace(pendings[VOIDED], status=PendingStatus.PENDING, resolved_by=None)
    found = tagged(violations_of(storage), "6")
    assert (
        f"[6] pending movement {VOIDED} (pending) is still pending but is resolved by j07.0"
        in found
    )


def test_movement_resolved_twice() -> None:
    storage = healthy_ledger()
    void = next(p for p in storage._state.postings if p.pending_id == VOIDED)
    second = replace(void, id="bad.0", journal_id="bad")
    assert second.kind is PostingKind.VOID_PENDING and second.pending_id == VOIDED
    force(storage, second)
    found = violations_of(storage)
    assert (
        f"[6] pending movement {VOIDED} (voided) must have exactly one resolution posting, "
        "has: bad.0, j07.0" in found
    )
    assert "[5] account w1: counter debits_pending_out is negative (-130)" in found


def test_posting_more_than_reserved() -> None:
    storage = healthy_ledger()
    postings = storage._state.postings
    index = next(i for i, p in enumerate(postings) if p.pending_id == CAPTURED)
    postings[index] = replace(postings[index], released=300, amount=301)
    found = tagged(violations_of(storage), "6")
    assert (
        "[6] posting j06.0 (post_pending) posts 301 of 300 reserved "
        "(must be positive and at most the reservation)" in found
    )
    assert f"[6] pending movement {CAPTURED} (posted): 301 posted exceeds the 300 reserved" in found


def test_resolution_that_releases_the_wrong_amount() -> None:
    storage = healthy_ledger()
    postings = storage._state.postings
    index = next(i for i, p in enumerate(postings) if p.pending_id == EXPIRED)
    postings[index] = replace(postings[index], released=40)
    found = violations_of(storage)
    assert (
        f"[6] pending movement {EXPIRED} (expired): resolution j08.0 releases 40, 50 was reserved"
        in found
    )
    assert any(v.startswith("[3] account w1: stored debits_pending_holds") for v in found)


def test_status_that_disagrees_with_the_resolution_kind() -> None:
    storage = healthy_ledger()
    pendings = storage._state.pendings
    pendings[VOIDED] = replace(pendings[VOIDED], status=PendingStatus.EXPIRED)
    found = violations_of(storage)
    assert found == [
        f"[6] pending movement {VOIDED} (expired) is resolved by a void_pending posting j07.0"
    ]


def test_pending_movement_without_its_reservation() -> None:
    storage = healthy_ledger()
    storage._state.pendings["ghost.0"] = replace(storage._state.pendings[OPEN], id="ghost.0")
    found = tagged(violations_of(storage), "6")
    assert "[6] pending movement ghost.0 (pending) has no reservation posting ghost.0" in found


def test_expired_before_its_deadline() -> None:
    storage = healthy_ledger()
    postings = storage._state.postings
    index = next(i for i, p in enumerate(postings) if p.pending_id == EXPIRED)
    postings[index] = replace(postings[index], created_at=T0 + timedelta(seconds=9))
    found = violations_of(storage)
    assert len(found) == 1 and found[0].startswith(
        f"[7] pending movement {EXPIRED} (expired) expired at"
    )


def test_posted_at_its_deadline() -> None:
    storage = healthy_ledger()
    postings = storage._state.postings
    index = next(i for i, p in enumerate(postings) if p.pending_id == CAPTURED)
    postings[index] = replace(postings[index], created_at=T0 + timedelta(seconds=60))
    found = violations_of(storage)
    assert len(found) == 1 and "at or after its deadline" in found[0]


# History (two snapshots) ----------------------------------------------------------------------


def test_history_accepts_growth() -> None:
    storage = healthy_ledger()
    before = read_ledger(storage)
    _apply(
        storage,
        "j11",
        T0 + timedelta(seconds=30),
        PostPending(OPEN, 10),
        Move("world-EUR", "e1", "EUR", 5),
    )
    check_history(before, read_ledger(storage))


def test_history_rejects_rewrites() -> None:
    storage = healthy_ledger()
    before = read_ledger(storage)
    state = storage._state
    state.postings[:] = [p for p in state.postings if p.id != "j01.0"]
    state.postings[0] = replace(state.postings[0], amount=state.postings[0].amount + 1)
    state.accounts["w1"] = replace(state.accounts["w1"], credits_posted=0)
    state.pendings[VOIDED] = replace(state.pendings[VOIDED], status=PendingStatus.POSTED)
    del state.pendings[CAPTURED]
    with pytest.raises(InvariantViolation) as caught:
        check_history(before, read_ledger(storage))
    found = caught.value.violations
    assert "[3] posting j01.0 was deleted" in found
    assert any(v.startswith("[3] posting j02.0 was modified") for v in found)
    assert "[3] account w1: credits_posted decreased from 1000 to 0" in found
    assert any(
        v.startswith(f"[6] pending movement {VOIDED} changed after reaching voided") for v in found
    )
    assert f"[6] pending movement {CAPTURED} was deleted" in found


def test_history_rejects_changing_an_open_reservation() -> None:
    storage = healthy_ledger()
    before = read_ledger(storage)
    pendings = storage._state.pendings
    pendings[OPEN] = replace(pendings[OPEN], amount=71)
    with pytest.raises(InvariantViolation, match=f"pending movement {OPEN} was modified"):
        check_history(before, read_ledger(storage))


# The strategies themselves --------------------------------------------------------------------


@given(currencies(CurrencyRegistry.from_codes(["USD", "JPY"])), amounts(500, min_value=7))
def test_currencies_and_amounts_respect_their_bounds(code: str, amount: int) -> None:
    assert code in ("USD", "JPY")
    assert 7 <= amount <= 500


@given(currency_sets(min_size=2, max_size=3))
def test_currency_sets_are_distinct(codes: list[str]) -> None:
    assert 2 <= len(codes) <= 3 and len(set(codes)) == len(codes)


@given(wallet_accounts("EUR"), accounts(kinds=[AccountKind.WORLD, AccountKind.FEES]))
def test_account_strategies(wallet: Account, system: Account) -> None:
    assert wallet.kind is AccountKind.WALLET and wallet.guarded and wallet.currency == "EUR"
    assert wallet.overdraft_limit >= 0 and wallet.counters() == (0, 0, 0, 0, 0)
    assert system.kind in (AccountKind.WORLD, AccountKind.FEES) and not system.guarded
    assert len(wallet.id) <= 64


def test_strategy_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="positive"):
        amounts(0)
    with pytest.raises(ValueError, match="no currency"):
        currencies(CurrencyRegistry([]))


@given(ledger_programs(currency_codes=st.just(["USD", "EUR"]), max_operations=10))
def test_programs_are_well_formed(program: LedgerProgram) -> None:
    codes = {a.currency for a in program.accounts}
    assert codes == {"USD", "EUR"}
    assert len({a.id for a in program.accounts}) == len(program.accounts)
    for operation in program.operations:
        assert isinstance(operation, AdvanceClock | ApplyJournal)
        if isinstance(operation, ApplyJournal):
            assert 1 <= len(operation.journal.legs) <= 4


def test_a_wallet_whose_history_disagrees_with_its_counters() -> None:
    # A posting written without its history entry (a buggy adapter): the wallet's history
    # no longer ends on its figures.
    storage = healthy_ledger()
    check_invariants(storage)
    force(storage, move_posting("bad.0", "world-USD", "w1", 5))
    with pytest.raises(InvariantViolation) as caught:
        check_invariants(storage)
    assert tagged(list(caught.value.violations), "history") == [
        "[history] wallet w1: its history ends at (balance, available, pending_in)"
        " (800, 730, 0), its counters give (805, 735, 0)"
    ]
