"""The movement state machine: every legal move of the table, every illegal one refused."""

from __future__ import annotations

import itertools

import pytest

from treasury_core.movements.records import MovementStatus
from treasury_core.movements.states import (
    MOVEMENT_TRANSITIONS,
    MovementTrigger,
    movement_state_diagram,
    next_status,
    settleable,
)

LEGAL = {
    (None, MovementTrigger.CREATE): MovementStatus.PENDING,
    (None, MovementTrigger.CREATE_SETTLED): MovementStatus.COMPLETED,
    (MovementStatus.PENDING, MovementTrigger.COMPLETE): MovementStatus.COMPLETED,
    (MovementStatus.PENDING, MovementTrigger.FAIL): MovementStatus.FAILED,
}
EVERY_MOVE = list(itertools.product([None, *MovementStatus], MovementTrigger))


def test_the_table_is_the_interfaces_machine() -> None:
    assert dict(MOVEMENT_TRANSITIONS) == LEGAL


@pytest.mark.parametrize(("source", "trigger"), list(LEGAL))
def test_legal_moves(source: MovementStatus | None, trigger: MovementTrigger) -> None:
    assert next_status(source, trigger) is LEGAL[(source, trigger)]


@pytest.mark.parametrize(("source", "trigger"), [m for m in EVERY_MOVE if m not in LEGAL])
def test_illegal_moves_raise(source: MovementStatus | None, trigger: MovementTrigger) -> None:
    with pytest.raises(ValueError, match="cannot go from"):
        next_status(source, trigger)


def test_only_pending_movements_settle() -> None:
    assert [s for s in MovementStatus if settleable(s)] == [MovementStatus.PENDING]


def test_the_diagram_draws_every_edge_and_ends_the_terminal_states() -> None:
    diagram = movement_state_diagram()
    assert diagram.splitlines() == [
        "stateDiagram-v2",
        "    [*] --> pending: create",
        "    [*] --> completed: create_settled",
        "    pending --> completed: complete",
        "    pending --> failed: fail",
        "    completed --> [*]",
        "    failed --> [*]",
    ]
