"""The state machine of deposits, withdrawals and transfers (interface parts 3.2–3.4): one table.

A movement is created either ``pending`` (it waits for a bank rail or an FX settlement) or
``completed`` at once (a same-currency transfer, a credit to a virtual account), and a pending
one ends exactly once, ``completed`` or ``failed``. Terminal states have no way out: a second
settlement of the same movement is refused, which is what keeps each pending reservation
resolved exactly once (ledger invariant 6).

Pure: no I/O. :func:`movement_state_diagram` draws the table for the docs.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from treasury_core.movements.records import MovementStatus

__all__ = [
    "MOVEMENT_TRANSITIONS",
    "MovementTrigger",
    "movement_state_diagram",
    "next_status",
    "settleable",
]


class MovementTrigger(StrEnum):
    """What moves a deposit, withdrawal or transfer."""

    #: Created, waiting for a rail or a settlement (reservations held).
    CREATE = "create"
    #: Created and settled in the same transaction (nothing to wait for).
    CREATE_SETTLED = "create_settled"
    #: The rail confirmed, or the settlement ran: the reservations are posted.
    COMPLETE = "complete"
    #: The rail refused, or the movement was failed: the reservations are released.
    FAIL = "fail"


_P, _C, _F = MovementStatus.PENDING, MovementStatus.COMPLETED, MovementStatus.FAILED

_Key = tuple[MovementStatus | None, MovementTrigger]

#: ``(from_status, trigger) → to_status``; ``None`` is "not created yet". Anything else is illegal.
MOVEMENT_TRANSITIONS: Final[Mapping[_Key, MovementStatus]] = MappingProxyType(
    {
        (None, MovementTrigger.CREATE): _P,
        (None, MovementTrigger.CREATE_SETTLED): _C,
        (_P, MovementTrigger.COMPLETE): _C,
        (_P, MovementTrigger.FAIL): _F,
    }
)


def next_status(current: MovementStatus | None, trigger: MovementTrigger) -> MovementStatus:
    """The status ``trigger`` moves a movement in ``current`` to; ``ValueError`` if illegal.

    Services check with :func:`settleable` first and answer the interface's error; reaching the
    ``ValueError`` means a code path skipped that check.
    """
    try:
        return MOVEMENT_TRANSITIONS[(current, trigger)]
    except KeyError:
        source = "nothing" if current is None else current.value
        raise ValueError(f"a movement cannot go from {source} by {trigger.value}") from None


def settleable(status: MovementStatus) -> bool:
    """Whether a movement in ``status`` can still complete or fail."""
    return (status, MovementTrigger.COMPLETE) in MOVEMENT_TRANSITIONS


def movement_state_diagram() -> str:
    """A Mermaid ``stateDiagram-v2`` drawn from :data:`MOVEMENT_TRANSITIONS`."""
    lines = ["stateDiagram-v2"]
    for (source, trigger), target in MOVEMENT_TRANSITIONS.items():
        lines.append(f"    {source.value if source else '[*]'} --> {target.value}: {trigger.value}")
    terminal = set(MovementStatus) - {s for s, _ in MOVEMENT_TRANSITIONS if s is not None}
    lines.extend(f"    {status.value} --> [*]" for status in MovementStatus if status in terminal)
    return "\n".join(lines) + "\n"
