"""The sandbox card provider: the test-card table, 3-D Secure, stateless references, no leaks."""

from __future__ import annotations

import re
from collections.abc import Awaitable
from datetime import UTC, datetime

import pytest

from treasury_core.cards.numbers import brand_of as card_brand
from treasury_core.cards.numbers import luhn_valid as luhn_ok
from treasury_core.config import TreasuryConfig
from treasury_core.errors import CardError, ErrorKind, ProviderError
from treasury_core.interface.errors import error_body
from treasury_core.plugins import collect_factories, make_plugin_manager
from treasury_core.ports import CardProvider
from treasury_core.ports.card_provider import (
    HOLD_GONE_FAILURE_REASON,
    CardData,
    CardProviderBase,
    CardProviderResult,
    CardProviderStatus,
    HoldGone,
)
from treasury_core.testing.fakes.clock import FakeClock
from treasury_sandbox.card_provider import SandboxCardProvider

APPROVED = ("4242424242424242", "5555555555554444", "378282246310005")
DECLINED = {
    "4000000000000002": "card_declined",
    "4000000000009995": "insufficient_funds",
    "4000000000000069": "expired_card",
    "4000000000000127": "incorrect_cvc",
}
THREE_DS = "4000000000003220"
CAPTURE_DECLINED = "4000000000000341"
HOLD_DISAPPEARS = "4000000000000259"
CHARGEBACK_LOST = "4000000000000051"
CHARGEBACK_WON = "4000000000000077"
ALL_TABLE_CARDS = (
    *APPROVED,
    *DECLINED,
    THREE_DS,
    CAPTURE_DECLINED,
    HOLD_DISAPPEARS,
    CHARGEBACK_LOST,
    CHARGEBACK_WON,
)

REFERENCE = re.compile(r"ch_[0-9a-f]{24}_(ok|cd|hg|cl|cw)_[1-9]\d*_(a|c|v|ra|rc)")


def card(number: str, *, month: int = 12, year: int = 2030, cvc: str | None = "123") -> CardData:
    return CardData(
        number=number, expiry_month=month, expiry_year=year, cvc=cvc, cardholder_name="Jane Doe"
    )


@pytest.fixture
def provider() -> SandboxCardProvider:
    return SandboxCardProvider(FakeClock(datetime(2026, 1, 15, tzinfo=UTC)))


async def refusal(awaitable: Awaitable[object]) -> CardError:
    with pytest.raises(CardError) as info:
        await awaitable
    return info.value


# --- the port -------------------------------------------------------------------------------


def test_the_sandbox_provider_is_a_card_provider(provider: SandboxCardProvider) -> None:
    assert isinstance(provider, CardProvider)
    assert isinstance(provider, CardProviderBase)


def test_capabilities(provider: SandboxCardProvider) -> None:
    assert provider.manual_capture_supported()
    assert provider.three_d_secure_supported()
    assert provider.refunds_supported()
    assert provider.partial_refunds_supported()


async def test_base_class_defaults_are_off() -> None:
    class Minimal(CardProviderBase):
        async def authorize(
            self,
            card: CardData,
            amount: int,
            currency: str,
            *,
            capture: bool,
            attempt_key: str | None = None,
        ) -> CardProviderResult:
            return CardProviderResult("x", CardProviderStatus.AUTHORIZED)

        async def capture(self, reference: str, amount: int) -> CardProviderResult:
            return CardProviderResult("x", CardProviderStatus.CAPTURED)

        async def void(self, reference: str) -> CardProviderResult:
            return CardProviderResult("x", CardProviderStatus.VOIDED)

    minimal = Minimal()
    assert isinstance(minimal, CardProvider)
    assert not minimal.manual_capture_supported()
    assert not minimal.three_d_secure_supported()
    assert not minimal.refunds_supported()
    assert not minimal.partial_refunds_supported()
    assert minimal.chargeback_outcome("x") is None
    assert (await refusal(minimal.refund("x", 1))).failure_reason == "unsupported"
    assert (await refusal(minimal.complete_action("x"))).failure_reason == "no_action_required"


def test_card_data_repr_hides_number_and_cvc() -> None:
    text = repr(card("4242424242424242", cvc="987"))
    assert "4242424242424242" not in text
    assert "987" not in text
    assert card("4242424242424242").last4 == "4242"


def test_hold_gone_is_a_card_error_with_a_documented_reason() -> None:
    error = HoldGone()
    assert isinstance(error, CardError)
    assert not isinstance(error, ProviderError)
    assert error.failure_reason == HOLD_GONE_FAILURE_REASON == "authorization_expired"
    assert error.kind is ErrorKind.DECLINED


def test_registered_under_sandbox() -> None:
    factories = collect_factories(make_plugin_manager(), "card_provider")
    made = factories["sandbox"](TreasuryConfig(database_url="memory://"), FakeClock())
    assert isinstance(made, SandboxCardProvider)


def test_luhn_and_brand() -> None:
    assert all(luhn_ok(n) for n in ALL_TABLE_CARDS)
    assert not luhn_ok("4242424242424241")
    assert [card_brand(n) for n in APPROVED] == ["visa", "mastercard", "amex"]
    assert card_brand("2223003122003222") == "mastercard"
    assert card_brand("6011111111111117") == "discover"
    assert card_brand("9999999999999995") == "unknown"


# --- approved cards -------------------------------------------------------------------------


@pytest.mark.parametrize("number", [*APPROVED, CHARGEBACK_LOST, CHARGEBACK_WON, "4111111111111111"])
async def test_approved_hold_then_capture_then_refund(
    provider: SandboxCardProvider, number: str
) -> None:
    held = await provider.authorize(card(number), 5000, "USD", capture=False)
    assert held.status is CardProviderStatus.AUTHORIZED
    assert not held.requires_action
    assert held.last4 == number[-4:]
    assert held.brand == card_brand(number)
    assert REFERENCE.fullmatch(held.reference)

    captured = await provider.capture(held.reference, 5000)
    assert captured.status is CardProviderStatus.CAPTURED
    assert captured.reference.split("_")[1] == held.reference.split("_")[1]  # same charge

    refund = await provider.refund(captured.reference, 2000)
    assert refund.status is CardProviderStatus.REFUNDED
    assert refund.reference.startswith("re_")
    assert (await provider.refund(captured.reference, 5000)).status is CardProviderStatus.REFUNDED


@pytest.mark.parametrize("number", [*APPROVED, CHARGEBACK_LOST, CHARGEBACK_WON, HOLD_DISAPPEARS])
async def test_approved_automatic_capture(provider: SandboxCardProvider, number: str) -> None:
    charged = await provider.authorize(card(number), 1999, "EUR", capture=True)
    assert charged.status is CardProviderStatus.CAPTURED
    assert not charged.requires_action
    assert (await refusal(provider.capture(charged.reference, 1999))).failure_reason == (
        "already_captured"
    )
    assert (await refusal(provider.void(charged.reference))).failure_reason == "already_captured"
    assert (await provider.refund(charged.reference, 1999)).status is CardProviderStatus.REFUNDED


@pytest.mark.parametrize("number", [*APPROVED, CAPTURE_DECLINED, HOLD_DISAPPEARS, THREE_DS])
async def test_void_releases_the_hold(provider: SandboxCardProvider, number: str) -> None:
    held = await provider.authorize(card(number), 700, "USD", capture=False)
    voided = await provider.void(held.reference)
    assert voided.status is CardProviderStatus.VOIDED
    assert (await provider.void(voided.reference)).status is CardProviderStatus.VOIDED
    error = await refusal(provider.capture(voided.reference, 700))
    assert error.failure_reason == "authorization_voided"
    assert (await refusal(provider.refund(voided.reference, 700))).failure_reason == (
        "authorization_voided"
    )


async def test_capturing_twice_is_refused(provider: SandboxCardProvider) -> None:
    held = await provider.authorize(card(APPROVED[0]), 5000, "USD", capture=False)
    captured = await provider.capture(held.reference, 5000)
    error = await refusal(provider.capture(captured.reference, 5000))
    assert error.failure_reason == "already_captured"


async def test_capture_more_than_authorized_is_refused(provider: SandboxCardProvider) -> None:
    held = await provider.authorize(card(APPROVED[0]), 5000, "USD", capture=False)
    error = await refusal(provider.capture(held.reference, 5001))
    assert error.failure_reason == "amount_too_large"
    for amount in (0, -1):
        assert (await refusal(provider.capture(held.reference, amount))).failure_reason == (
            "invalid_amount"
        )
    assert (await provider.capture(held.reference, 5000)).status is CardProviderStatus.CAPTURED


async def test_refunds_limited_to_the_captured_amount(provider: SandboxCardProvider) -> None:
    held = await provider.authorize(card(APPROVED[0]), 5000, "USD", capture=False)
    assert (await refusal(provider.refund(held.reference, 100))).failure_reason == (
        "charge_not_captured"
    )
    captured = await provider.capture(held.reference, 3000)  # a smaller capture
    assert (await refusal(provider.refund(captured.reference, 3001))).failure_reason == (
        "amount_too_large"
    )
    assert (await provider.refund(captured.reference, 3000)).status is CardProviderStatus.REFUNDED


@pytest.mark.parametrize(
    "reference",
    [
        "",
        "ch_nope",
        "re_" + "0" * 24 + "_100",
        "ch_" + "0" * 24 + "_zz_100_a",
        "ch_" + "0" * 24 + "_ok_0_a",
        "ch_" + "0" * 24 + "_ok_100_x",
        "pi_123",
    ],
)
async def test_unknown_references_are_refused(
    provider: SandboxCardProvider, reference: str
) -> None:
    for call in (
        provider.capture(reference, 100),
        provider.void(reference),
        provider.refund(reference, 100),
        provider.complete_action(reference),
    ):
        assert (await refusal(call)).failure_reason == "unknown_reference"


# --- declined cards -------------------------------------------------------------------------


@pytest.mark.parametrize(("number", "reason"), DECLINED.items())
@pytest.mark.parametrize("capture", [False, True])
async def test_declined_at_authorization(
    provider: SandboxCardProvider, number: str, reason: str, capture: bool
) -> None:
    error = await refusal(provider.authorize(card(number), 5000, "USD", capture=capture))
    assert error.failure_reason == reason
    assert error.kind is ErrorKind.DECLINED


@pytest.mark.parametrize("capture", [False, True])
async def test_invalid_cards(provider: SandboxCardProvider, capture: bool) -> None:
    async def reason(data: CardData, amount: int = 100) -> str | None:
        return (
            await refusal(provider.authorize(data, amount, "USD", capture=capture))
        ).failure_reason

    assert await reason(card("4242424242424241")) == "invalid_number"
    assert await reason(card("4242")) == "invalid_number"
    assert await reason(card("4242x42424242424")) == "invalid_number"
    assert await reason(card("4242424242424242", month=12, year=2025)) == "expired_card"
    assert await reason(card("4242424242424242", month=13)) == "invalid_expiry_month"
    assert await reason(card("4242424242424242", cvc="12")) == "invalid_cvc"
    assert await reason(card("4242424242424242"), 0) == "invalid_amount"


async def test_expiry_follows_the_providers_clock() -> None:
    clock = FakeClock(datetime(2026, 1, 31, 23, 59, tzinfo=UTC))
    provider = SandboxCardProvider(clock)
    this_month = card("4242424242424242", month=1, year=2026)
    assert (await provider.authorize(this_month, 100, "USD", capture=False)).reference
    clock.advance(60)  # 2026-02-01
    error = await refusal(provider.authorize(this_month, 100, "USD", capture=False))
    assert error.failure_reason == "expired_card"


async def test_a_vaulted_card_without_cvc_and_spaced_number_is_accepted(
    provider: SandboxCardProvider,
) -> None:
    result = await provider.authorize(
        card("4242 4242 4242 4242", cvc=None), 100, "USD", capture=False
    )
    assert result.status is CardProviderStatus.AUTHORIZED
    assert result.last4 == "4242"


# --- special cards --------------------------------------------------------------------------


@pytest.mark.parametrize("capture", [False, True])
async def test_three_d_secure(provider: SandboxCardProvider, capture: bool) -> None:
    pending = await provider.authorize(card(THREE_DS), 4200, "GBP", capture=capture)
    assert pending.requires_action
    assert pending.status is CardProviderStatus.REQUIRES_ACTION
    assert pending.last4 == "3220"
    assert (await refusal(provider.capture(pending.reference, 4200))).failure_reason == (
        "authentication_required"
    )
    assert (await refusal(provider.refund(pending.reference, 4200))).failure_reason == (
        "charge_not_captured"
    )

    done = await provider.complete_action(pending.reference)
    assert not done.requires_action
    if capture:
        assert done.status is CardProviderStatus.CAPTURED
    else:
        assert done.status is CardProviderStatus.AUTHORIZED
        done = await provider.capture(done.reference, 4200)
        assert done.status is CardProviderStatus.CAPTURED
    assert (await refusal(provider.complete_action(done.reference))).failure_reason == (
        "no_action_required"
    )
    assert (await provider.refund(done.reference, 4200)).status is CardProviderStatus.REFUNDED


async def test_capture_declined_card(provider: SandboxCardProvider) -> None:
    held = await provider.authorize(card(CAPTURE_DECLINED), 5000, "USD", capture=False)
    assert held.status is CardProviderStatus.AUTHORIZED
    for _ in range(3):  # every capture, so retries keep failing and the hold stays
        error = await refusal(provider.capture(held.reference, 5000))
        assert error.failure_reason == "capture_declined"
        assert not isinstance(error, HoldGone)
    assert (await provider.void(held.reference)).status is CardProviderStatus.VOIDED
    # automatic capture is a capture too: refused, nothing held
    error = await refusal(provider.authorize(card(CAPTURE_DECLINED), 5000, "USD", capture=True))
    assert error.failure_reason == "capture_declined"


async def test_hold_disappears(provider: SandboxCardProvider) -> None:
    held = await provider.authorize(card(HOLD_DISAPPEARS), 5000, "USD", capture=False)
    assert held.status is CardProviderStatus.AUTHORIZED
    with pytest.raises(HoldGone) as info:
        await provider.capture(held.reference, 5000)
    assert info.value.failure_reason == "authorization_expired"
    assert info.value.kind is ErrorKind.DECLINED


@pytest.mark.parametrize(
    ("number", "outcome"), [(CHARGEBACK_LOST, "lost"), (CHARGEBACK_WON, "won")]
)
@pytest.mark.parametrize("capture", [False, True])
async def test_chargeback_outcome(
    provider: SandboxCardProvider, number: str, outcome: str, capture: bool
) -> None:
    result = await provider.authorize(card(number), 5000, "USD", capture=capture)
    if not capture:
        result = await provider.capture(result.reference, 5000)
    assert result.status is CardProviderStatus.CAPTURED
    assert provider.chargeback_outcome(result.reference) == outcome
    assert SandboxCardProvider(FakeClock()).chargeback_outcome(result.reference) == outcome


@pytest.mark.parametrize("number", [*APPROVED, CAPTURE_DECLINED, HOLD_DISAPPEARS])
async def test_no_chargeback_for_other_cards(provider: SandboxCardProvider, number: str) -> None:
    held = await provider.authorize(card(number), 5000, "USD", capture=False)
    assert provider.chargeback_outcome(held.reference) is None
    refund_ref = "re_" + "0" * 24 + "_100"
    assert provider.chargeback_outcome(refund_ref) is None


# --- stateless ------------------------------------------------------------------------------


async def test_a_fresh_instance_handles_another_instances_references() -> None:
    def fresh() -> SandboxCardProvider:
        return SandboxCardProvider(FakeClock())

    held = await fresh().authorize(card(APPROVED[0]), 5000, "USD", capture=False)
    captured = await fresh().capture(held.reference, 5000)
    assert captured.status is CardProviderStatus.CAPTURED
    assert (await refusal(fresh().capture(captured.reference, 5000))).failure_reason == (
        "already_captured"
    )
    assert (await fresh().refund(captured.reference, 5000)).status is CardProviderStatus.REFUNDED

    declines = await fresh().authorize(card(CAPTURE_DECLINED), 100, "USD", capture=False)
    assert (await refusal(fresh().capture(declines.reference, 100))).failure_reason == (
        "capture_declined"
    )
    gone = await fresh().authorize(card(HOLD_DISAPPEARS), 100, "USD", capture=False)
    with pytest.raises(HoldGone):
        await fresh().capture(gone.reference, 100)
    pending = await fresh().authorize(card(THREE_DS), 100, "USD", capture=True)
    assert (await fresh().complete_action(pending.reference)).status is CardProviderStatus.CAPTURED
    over = await fresh().authorize(card(APPROVED[1]), 100, "USD", capture=False)
    assert (await refusal(fresh().capture(over.reference, 101))).failure_reason == (
        "amount_too_large"
    )


async def test_references_are_unique(provider: SandboxCardProvider) -> None:
    references = {
        (await provider.authorize(card(APPROVED[0]), 100, "USD", capture=False)).reference
        for _ in range(50)
    }
    assert len(references) == 50


# --- no card data leaks ---------------------------------------------------------------------


def _strings(result: CardProviderResult) -> list[str]:
    return [str(v) for v in (result.reference, result.status, result.brand, result.last4)] + [
        repr(result),
        str(result),
    ]


def _error_strings(error: CardError) -> list[str]:
    return [str(error), repr(error), error.message, str(error_body(error)), *map(str, error.args)]


async def test_the_pan_and_cvc_never_leak(
    provider: SandboxCardProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a fixed token, so random hex digits cannot spell the CVC by chance
    monkeypatch.setattr("treasury_sandbox.card_provider.secrets.token_hex", lambda n: "ab" * n)
    cvc = "9187"
    seen: list[str] = []
    invalid = ["4242424242424241", "4000000000000010"]
    for number in (*ALL_TABLE_CARDS, *invalid, "6011111111111117"):
        for capture in (False, True):
            for data in (card(number, cvc=cvc), card(number, year=2020, cvc=cvc)):
                try:
                    result = await provider.authorize(data, 5000, "USD", capture=capture)
                except CardError as error:
                    seen += _error_strings(error)
                    continue
                seen += _strings(result)
                ref = result.reference
                seen.append(str(provider.chargeback_outcome(ref)))
                for call in (
                    provider.complete_action(ref),
                    provider.capture(ref, 5000),
                    provider.capture(ref, 9999),
                    provider.refund(ref, 5000),
                    provider.void(ref),
                ):
                    try:
                        seen += _strings(await call)
                    except CardError as error:
                        seen += _error_strings(error)
        for text in seen:
            assert number not in text
            assert number[:-4] not in text  # nor anything but the last four digits
            assert cvc not in text
    assert len(seen) > 100
