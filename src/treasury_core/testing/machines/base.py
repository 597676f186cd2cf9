"""The base machines of the kit: what each sets up for a run, and how it binds to a storage.

:class:`StorageMachine` opens the run's storage (``make_storage()``, a
:class:`~treasury_core.memory.storage.MemoryStorage` unless overridden) and its
:class:`~treasury_core.testing.fakes.clock.FakeClock`, and closes the storage at teardown;
:class:`ServiceMachine` adds sequential ids and the event loop the async services run on.
:func:`bind_storage` and :func:`storage_test_case` make any of them run on a test's storages.
"""

from __future__ import annotations

import asyncio
import unittest
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from typing import TypeVar

import hypothesis
from hypothesis.stateful import RuleBasedStateMachine

from treasury_core.memory.storage import MemoryStorage
from treasury_core.ports.storage import Storage
from treasury_core.testing.fakes.clock import FakeClock, SequentialIds

__all__ = [
    "ServiceMachine",
    "StorageFactory",
    "StorageMachine",
    "bind_storage",
    "storage_test_case",
]

#: What a test supplies: a fresh, empty (migrated) storage, or a context manager yielding one.
StorageFactory = Callable[[], Storage | AbstractContextManager[Storage]]


class StorageMachine(RuleBasedStateMachine):
    """A run over one storage (``storage``) and one fake clock (``clock``)."""

    def __init__(self) -> None:
        super().__init__()
        self._resources = ExitStack()
        made = self.make_storage()
        if isinstance(made, Storage):
            self._resources.callback(made.close)
            self.storage: Storage = made
        else:
            self.storage = self._resources.enter_context(made)
        self.clock = FakeClock()

    def make_storage(self) -> Storage | AbstractContextManager[Storage]:
        """The empty, migrated storage for one run (default: a MemoryStorage). Override this."""
        return MemoryStorage()

    def teardown(self) -> None:
        """Close what the run opened: its storage (or exit its context manager), and more in
        subclasses."""
        self._resources.close()


class ServiceMachine(StorageMachine):
    """A :class:`StorageMachine` for the services: also sequential ids (``ids``) and one event
    loop (``loop``) for the run's lifetime, since the services are async and the rules are not."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self._resources.callback(self.loop.close)
        self.ids = SequentialIds()


M = TypeVar("M", bound="RuleBasedStateMachine")


def bind_storage(machine: type[M], factory: StorageFactory, name: str) -> type[M]:
    """A subclass of ``machine`` whose runs take their storage from ``factory()``.

    Works for any machine here that gets its storage from ``make_storage()``.
    """
    made = type(name, (machine,), {"make_storage": lambda self: factory()})
    made.__qualname__ = name
    return made


def storage_test_case(
    machine: type[RuleBasedStateMachine],
    factory: StorageFactory,
    settings: hypothesis.settings | None,
    name: str,
) -> type[unittest.TestCase]:
    """A ``unittest.TestCase`` class running ``machine`` on ``factory()`` storages."""
    case = bind_storage(machine, factory, name).TestCase
    if settings is not None:
        case.settings = settings
    return case
