"""The ledger kernel and ``MemoryStorage``: the ceiling any storage adapter works under."""

from __future__ import annotations

from bench.fixtures import NOW, SOURCE, WALLET, JournalIds, movement
from bench.timing import Samples, Workload, interleave, timed
from treasury_core.ledger import Account, apply_plan, plan_journal
from treasury_core.memory.storage import MemoryStorage
from treasury_core.ports.storage import UnitOfWork


def kernel_workload() -> Workload:
    """``plan_journal`` + ``apply_plan`` of a two-account move, keeping the updated accounts."""
    accounts: dict[str, Account] = {SOURCE.id: SOURCE, WALLET.id: WALLET}
    ids = JournalIds("kernel")

    def one() -> None:
        plan = plan_journal(movement(ids.next()), {}, NOW)
        accounts.update(apply_plan(accounts, plan))

    return lambda count: timed(one, count)


def memory_workload() -> Workload:
    """Movements through ``MemoryStorage.run_sync`` (the whole storage-port path, no I/O)."""
    storage = MemoryStorage()

    def open_accounts(uow: UnitOfWork) -> None:
        uow.ledger.open_account(SOURCE)
        uow.ledger.open_account(WALLET)

    storage.run_sync(open_accounts)
    ids = JournalIds("memory")

    def one() -> None:
        journal = movement(ids.next())

        def apply(uow: UnitOfWork) -> None:
            uow.ledger.apply(journal, NOW)

        storage.run_sync(apply)

    return lambda count: timed(one, count)


def bench_kernel(count: int, reps: int) -> dict[str, Samples]:
    """Kernel and memory-storage movement rates; keys ``kernel`` and ``memory``."""
    return interleave({"kernel": kernel_workload(), "memory": memory_workload()}, count, reps)
