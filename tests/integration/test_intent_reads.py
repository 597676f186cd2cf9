"""Stored intents are parsed once per distinct stored text, and a change is never answered stale."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import make_storage
from treasury_core.ports import UnitOfWork
from treasury_core.testing.contract import add_intents, make_intent, setup_company
from treasury_sqlalchemy.storage import SqlStorage


@pytest.fixture(params=["sqlite", "postgres"])
def storage(request: pytest.FixtureRequest) -> Iterator[SqlStorage]:
    backend = make_storage(request.param, request)
    assert isinstance(backend, SqlStorage)
    try:
        yield backend
    finally:
        backend.close()


def test_reads_of_an_unchanged_intent_share_one_parsed_intent(storage: SqlStorage) -> None:
    company = setup_company(storage)
    [stored] = add_intents(storage, make_intent(company, "pil_cached_one", merchant_reference="a"))

    def read(uow: UnitOfWork) -> object:
        return uow.intents.by_lookup_id("pil_cached_one", company)

    first, second = storage.run_sync(read, write=False), storage.run_sync(read, write=False)
    assert first == stored
    assert second is first  # parsed once: the stored text is the same


def test_a_changed_intent_is_read_as_changed(storage: SqlStorage) -> None:
    company = setup_company(storage)
    [stored] = add_intents(storage, make_intent(company, "pil_cached_two"))

    def read(uow: UnitOfWork) -> object:
        return uow.intents.by_lookup_id("pil_cached_two", company)

    assert storage.run_sync(read, write=False) == stored  # now cached
    changed = stored.model_copy(update={"merchant_reference": "changed"})
    storage.run_sync(lambda uow: uow.intents.update(changed))
    again = storage.run_sync(read, write=False)
    assert again == changed and again != stored
    # And back: a body seen before may be answered from the cache, and is still right.
    storage.run_sync(lambda uow: uow.intents.update(stored))
    assert storage.run_sync(read, write=False) == stored
