"""The ledger workload every contender runs: the same wallets, the same transfers, in order.

Dependency-free on purpose: the peers' scripts run in their own virtual environments, without
treasury-core, and load this file by path to replay exactly the sequence ours replays.

- ``WALLETS`` wallets of one currency (USD), each funded with ``FUNDING`` minor units first
  (setup, not timed);
- then ``transfers(count)``: ``(source, target, amount)`` with wallet indexes ``0..WALLETS-1``,
  source != target, amount in minor units, drawn from one seeded generator. No transfer can
  overdraw: ``FUNDING`` exceeds what any wallet could send in 20,000 transfers;
- then every wallet's balance is read once (timed separately).

Each transfer is one database transaction; the balances after ``count`` transfers are given by
:func:`expected_balances`, which every contender's final read must match.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

#: How many wallets the transfers move between.
WALLETS = 100
#: The issue's count of transfers.
TRANSFERS = 20_000
#: Each wallet's opening balance (minor units): more than 20,000 transfers of at most
#: ``MAX_AMOUNT`` could take out of one wallet.
FUNDING = 1_000_000_000
#: The largest single transfer (minor units).
MAX_AMOUNT = 10_000
#: The generator's seed: every contender replays the same sequence.
SEED = 20261122


def transfers(count: int, seed: int = SEED) -> Iterator[tuple[int, int, int]]:
    """The first ``count`` transfers: ``(source index, target index, amount)``."""
    rng = random.Random(seed)
    for _ in range(count):
        source = rng.randrange(WALLETS)
        target = rng.randrange(WALLETS - 1)
        if target >= source:
            target += 1
        yield source, target, rng.randint(1, MAX_AMOUNT)


def expected_balances(count: int, seed: int = SEED) -> list[int]:
    """Every wallet's balance after the first ``count`` transfers."""
    balances = [FUNDING] * WALLETS
    for source, target, amount in transfers(count, seed):
        balances[source] -= amount
        balances[target] += amount
    return balances
