"""The wire's idempotency (:mod:`treasury_core.interface.idempotency`): an answer rendered once,
stored in the service's own transaction, and replayed with the same status and bytes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from treasury_core import CreateWalletRequest, Treasury, TreasuryConfig, UnknownCurrency, bootstrap
from treasury_core.companies import KeyKind
from treasury_core.idempotency import IdempotencyState, StoredResult
from treasury_core.interface.idempotency import (
    REPLAYED_HEADER,
    ResponseRecorder,
    StoredResponse,
    fingerprint,
    json_bytes,
    keeps_answer,
)
from treasury_core.interface.records import WalletRecord
from treasury_core.services.idempotency import Claim, Replay
from treasury_core.wallets import Wallet

T = TypeVar("T")
BODY = b'{"name":"Ops","currency_id":"USD"}'
PRINT = fingerprint("POST", "/api/v1/wallet", BODY)


def _run(scenario: Callable[[Treasury, int], Coroutine[Any, Any, T]]) -> T:
    async def main() -> T:
        treasury = bootstrap(TreasuryConfig(database_url="memory://"))
        try:
            company = (await treasury.companies.create_company("Acme")).company
            return await scenario(treasury, company.id)
        finally:
            treasury.close()

    return asyncio.run(main())


async def _claim(treasury: Treasury, company_id: int, key: str = "k1") -> Claim | Replay:
    return await treasury.idempotency.claim(company_id, key, PRINT, kind=KeyKind.SECRET)


def test_a_stored_response_is_the_core_s_opaque_result() -> None:
    assert StoredResponse is StoredResult
    assert REPLAYED_HEADER == ("Idempotent-Replayed", "true")


def _render(treasury: Treasury) -> Callable[[Wallet], WalletRecord]:
    """A wallet's interface record, as the bundled app renders it."""
    return lambda wallet: WalletRecord.of(wallet, treasury.currencies.describe(wallet.currency))


@pytest.mark.parametrize(
    ("status", "kept"),
    [(200, True), (201, True), (303, True), (400, True), (402, True), (404, True), (415, True),
     (409, False), (429, False), (500, False), (502, False), (503, False)],
)  # fmt: skip
def test_which_answers_are_kept_for_retries(status: int, kept: bool) -> None:
    assert keeps_answer(status) is kept


def test_the_answer_is_stored_in_the_service_s_transaction_and_replayed_byte_for_byte() -> None:
    async def scenario(treasury: Treasury, company_id: int) -> tuple[StoredResponse, object]:
        claim = await _claim(treasury, company_id)
        assert isinstance(claim, Claim)
        recorder: ResponseRecorder[Wallet] = ResponseRecorder(claim, _render(treasury), 201)
        assert not recorder.stored
        request = CreateWalletRequest(name="Ops", currency_id="USD")
        wallet = await treasury.wallets.create(company_id, request, idempotency=recorder.ticket())
        assert recorder.stored
        answer = recorder.response(wallet)
        assert answer == StoredResponse(201, json_bytes(_render(treasury)(wallet)))
        return answer, await _claim(treasury, company_id)

    answer, again = _run(scenario)
    assert again == Replay(answer)


def test_a_refused_call_stores_nothing() -> None:
    async def scenario(treasury: Treasury, company_id: int) -> tuple[bool, object]:
        claim = await _claim(treasury, company_id)
        assert isinstance(claim, Claim)
        recorder: ResponseRecorder[Wallet] = ResponseRecorder(claim, _render(treasury))
        with pytest.raises(UnknownCurrency):
            await treasury.wallets.create(
                company_id,
                CreateWalletRequest(name="Ops", currency_id="XXX"),
                idempotency=recorder.ticket(),
            )
        record = await treasury.storage.run(
            lambda uow: uow.idempotency.get(company_id, "k1"), write=False
        )
        assert record is not None
        return recorder.stored, record.state

    stored, state = _run(scenario)
    assert not stored
    assert state is IdempotencyState.IN_FLIGHT


def test_a_copy_stored_without_secrets_is_not_the_answer() -> None:
    async def scenario(treasury: Treasury, company_id: int) -> tuple[bytes, object]:
        claim = await _claim(treasury, company_id)
        assert isinstance(claim, Claim)
        recorder: ResponseRecorder[Wallet] = ResponseRecorder(
            claim, _render(treasury), render_stored=lambda wallet: b'{"id":"hidden"}'
        )
        wallet = await treasury.wallets.create(
            company_id,
            CreateWalletRequest(name="Ops", currency_id="USD"),
            idempotency=recorder.ticket(),
        )
        assert recorder.stored
        return recorder.response(wallet).body, await _claim(treasury, company_id)

    answered, again = _run(scenario)
    assert answered != b'{"id":"hidden"}'
    assert b'"name":"Ops"' in answered
    assert again == Replay(StoredResponse(200, b'{"id":"hidden"}'))


def test_without_a_claim_there_is_no_ticket() -> None:
    async def scenario(treasury: Treasury, company_id: int) -> tuple[object, bool, int]:
        recorder: ResponseRecorder[Wallet] = ResponseRecorder(None, _render(treasury))
        wallet = await treasury.wallets.create(
            company_id,
            CreateWalletRequest(name="Ops", currency_id="USD"),
            idempotency=recorder.ticket(),
        )
        return recorder.ticket(), recorder.stored, recorder.response(wallet).status

    assert _run(scenario) == (None, False, 200)
