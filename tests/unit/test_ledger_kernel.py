"""The pure ledger kernel: planning, checking and folding."""

from datetime import UTC, datetime, timedelta

import pytest

from treasury_core.errors import InsufficientFunds, LedgerInvariantViolation, LedgerRejected
from treasury_core.ledger import (
    Account,
    AccountKind,
    BalanceRecord,
    ExpirePending,
    Journal,
    Move,
    PendingCategory,
    PendingStatus,
    PostPending,
    Reserve,
    VoidPending,
    apply_plan,
    fold_postings,
    plan_journal,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
WORLD = Account("world:USD", "USD", AccountKind.WORLD)
WALLET = Account("wal_a", "USD", AccountKind.WALLET, company_id=1, guarded=True)
OTHER = Account("wal_b", "USD", AccountKind.WALLET, company_id=1, guarded=True)


def accounts(*items: Account) -> dict[str, Account]:
    return {a.id: a for a in items}


def test_move_updates_both_sides_and_balances() -> None:
    plan = plan_journal(Journal("j1", (Move("world:USD", "wal_a", "USD", 500),)), {}, NOW)
    after = apply_plan(accounts(WORLD, WALLET), plan)
    assert after["wal_a"].balance == 500
    assert after["world:USD"].balance == -500
    assert plan.account_ids == ["wal_a", "world:USD"]
    assert BalanceRecord.of(after["wal_a"]).available_balance == 500


def test_guarded_account_cannot_be_overdrawn() -> None:
    plan = plan_journal(Journal("j1", (Move("wal_a", "wal_b", "USD", 1),)), {}, NOW)
    with pytest.raises(InsufficientFunds):
        apply_plan(accounts(WALLET, OTHER), plan)


def test_overdraft_limit_allows_down_to_minus_the_limit() -> None:
    lenient = Account("wal_a", "USD", AccountKind.WALLET, guarded=True, overdraft_limit=100)
    ok = plan_journal(Journal("j1", (Move("wal_a", "wal_b", "USD", 100),)), {}, NOW)
    assert apply_plan(accounts(lenient, OTHER), ok)["wal_a"].available_balance == -100
    too_much = plan_journal(Journal("j2", (Move("wal_a", "wal_b", "USD", 101),)), {}, NOW)
    with pytest.raises(InsufficientFunds):
        apply_plan(accounts(lenient, OTHER), too_much)


def test_multi_leg_journal_is_checked_on_the_final_state() -> None:
    # The wallet is debited and credited in one journal: net zero, so it is accepted.
    journal = Journal(
        "j1", (Move("world:USD", "wal_a", "USD", 50), Move("wal_a", "wal_b", "USD", 50))
    )
    after = apply_plan(accounts(WORLD, WALLET, OTHER), plan_journal(journal, {}, NOW))
    assert (after["wal_a"].balance, after["wal_b"].balance) == (0, 50)


def test_reserve_then_post_partially_releases_the_rest() -> None:
    funded = apply_plan(
        accounts(WORLD, WALLET),
        plan_journal(Journal("j0", (Move("world:USD", "wal_a", "USD", 1000),)), {}, NOW),
    )
    reserve = plan_journal(
        Journal("j1", (Reserve("wal_a", "world:USD", "USD", 600, PendingCategory.OUT),)), {}, NOW
    )
    held = apply_plan({**accounts(WORLD), **funded}, reserve)
    assert (held["wal_a"].pending_out, held["wal_a"].available_balance) == (600, 400)
    assert held["world:USD"].pending_in == 600
    pending = reserve.new_pendings[0]
    assert pending.id == "j1.0"
    post = plan_journal(Journal("j2", (PostPending("j1.0", 450),)), {"j1.0": pending}, NOW)
    done = apply_plan(held, post)
    assert done["wal_a"].balance == 550
    assert done["wal_a"].pending_out == 0
    assert done["world:USD"].pending_in == 0
    assert post.resolved_pendings[0].status is PendingStatus.POSTED


def test_holds_and_out_use_separate_counters() -> None:
    plan = plan_journal(
        Journal(
            "j1",
            (
                Move("world:USD", "wal_a", "USD", 100),
                Reserve("wal_a", "world:USD", "USD", 30, PendingCategory.HOLD),
                Reserve("wal_a", "world:USD", "USD", 20, PendingCategory.OUT),
            ),
        ),
        {},
        NOW,
    )
    wallet = apply_plan(accounts(WORLD, WALLET), plan)["wal_a"]
    assert (wallet.pending_holds, wallet.pending_out, wallet.available_balance) == (30, 20, 50)


def test_pending_cannot_be_posted_after_its_deadline_but_can_expire() -> None:
    reserve = plan_journal(
        Journal(
            "j1", (Reserve("world:USD", "wal_a", "USD", 10, deadline=NOW + timedelta(days=7)),)
        ),
        {},
        NOW,
    )
    pending = {"j1.0": reserve.new_pendings[0]}
    later = NOW + timedelta(days=7)
    with pytest.raises(LedgerRejected) as caught:
        plan_journal(Journal("j2", (PostPending("j1.0"),)), pending, later)
    assert caught.value.code == "pending_expired"
    with pytest.raises(LedgerRejected):
        plan_journal(Journal("j2", (ExpirePending("j1.0"),)), pending, NOW)
    expired = plan_journal(Journal("j2", (ExpirePending("j1.0"),)), pending, later)
    assert expired.resolved_pendings[0].status is PendingStatus.EXPIRED
    assert expired.postings[0].released == 10


def test_a_pending_movement_resolves_once() -> None:
    reserve = plan_journal(Journal("j1", (Reserve("world:USD", "wal_a", "USD", 10),)), {}, NOW)
    voided = plan_journal(
        Journal("j2", (VoidPending("j1.0"),)), {"j1.0": reserve.new_pendings[0]}, NOW
    ).resolved_pendings[0]
    with pytest.raises(LedgerRejected, match="already voided"):
        plan_journal(Journal("j3", (PostPending("j1.0"),)), {"j1.0": voided}, NOW)
    with pytest.raises(LedgerRejected, match="twice"):
        plan_journal(
            Journal("j3", (VoidPending("j1.0"), VoidPending("j1.0"))),
            {"j1.0": reserve.new_pendings[0]},
            NOW,
        )
    with pytest.raises(LedgerRejected, match="No pending"):
        plan_journal(Journal("j3", (VoidPending("nope"),)), {}, NOW)


def test_cannot_post_more_than_reserved() -> None:
    reserve = plan_journal(Journal("j1", (Reserve("world:USD", "wal_a", "USD", 10),)), {}, NOW)
    with pytest.raises(LedgerRejected):
        plan_journal(
            Journal("j2", (PostPending("j1.0", 11),)), {"j1.0": reserve.new_pendings[0]}, NOW
        )


@pytest.mark.parametrize(
    "leg",
    [
        Move("wal_a", "wal_a", "USD", 1),
        Move("wal_a", "wal_b", "USD", 0),
        Move("wal_a", "wal_b", "USD", -5),
        Move("wal_a", "wal_b", "USD", True),
        Move("wal_a", "wal_b", "USD", 1.5),  # type: ignore[arg-type]
    ],
)
def test_malformed_legs_are_programming_errors(leg: Move) -> None:
    with pytest.raises(LedgerInvariantViolation):
        plan_journal(Journal("j1", (leg,)), {}, NOW)


def test_currency_mismatch_is_refused() -> None:
    eur = Account("wal_e", "EUR", AccountKind.WALLET)
    plan = plan_journal(Journal("j1", (Move("world:USD", "wal_e", "USD", 1),)), {}, NOW)
    with pytest.raises(LedgerInvariantViolation):
        apply_plan(accounts(WORLD, eur), plan)
    with pytest.raises(LedgerInvariantViolation):
        plan_journal(
            Journal("j2", (Move("world:USD", "wal_a", "USD", 1), Move("wal_a", "x", "EUR", 1))),
            {},
            NOW,
        )


def test_empty_journal_is_refused() -> None:
    with pytest.raises(LedgerInvariantViolation):
        plan_journal(Journal("j1", ()), {}, NOW)


def test_fold_of_postings_reproduces_the_counters() -> None:
    state = accounts(WORLD, WALLET, OTHER)
    postings = []
    pendings = {}
    journals = [
        Journal("j1", (Move("world:USD", "wal_a", "USD", 1000),)),
        Journal("j2", (Reserve("wal_a", "wal_b", "USD", 300),)),
        Journal("j3", (Reserve("wal_a", "world:USD", "USD", 100, PendingCategory.HOLD),)),
        Journal("j4", (PostPending("j2.0", 200), VoidPending("j3.0"))),
    ]
    for journal in journals:
        plan = plan_journal(journal, pendings, NOW)
        state.update(apply_plan(state, plan))
        postings.extend(plan.postings)
        pendings.update({p.id: p for p in (*plan.new_pendings, *plan.resolved_pendings)})
    for account in state.values():
        folded = fold_postings(account.id, postings)
        assert (
            folded.debits_posted,
            folded.credits_posted,
            folded.debits_pending_holds,
            folded.debits_pending_out,
            folded.credits_pending,
        ) == account.counters()
    assert state["wal_a"].balance == 800
    assert state["wal_b"].balance == 200
