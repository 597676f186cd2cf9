"""The card provider contract: the tests every :class:`~treasury_core.ports.CardProvider` passes.

treasury-core's own providers (the sandbox, Stripe against localstripe, and
:class:`~treasury_core.testing.SalesOnlyCardProvider`, which has every capability off) all run
exactly these tests. A third-party card provider runs them too by subclassing
:class:`CardProviderContract` in its test suite and providing three fixtures::

    import pytest
    from treasury_core.ports.card_provider import CardData
    from treasury_core.testing.contracts.card_provider import CardProviderContract

    class TestMyCardProvider(CardProviderContract):
        @pytest.fixture
        def card_provider(self):
            return MyCardProvider(MyTestApi())

        @pytest.fixture
        def good_card(self):
            return CardData("4242424242424242", 12, 2040, "123")

        @pytest.fixture
        def declined_card(self):
            return CardData("4000000000000002", 12, 2040, "123")

``good_card`` is approved and its captures succeed; ``declined_card`` is declined at
authorization. Optional fixtures, used when defined:

==========================  =====================================================================
``three_d_secure_card``     a card for which ``authorize`` answers ``requires_action``; required
                            when ``three_d_secure_supported()`` is on. When it is off, the
                            contract checks that such a card is refused, never challenged.
``pass_three_d_secure``     ``(reference) -> None``: what the customer does at the challenge,
                            if the provider's test mode needs it before ``complete_action``.
``hold_gone_card``          a card whose hold disappears before it is captured, or
``lose_hold``               ``(reference) -> None``: make a hold of ``good_card`` disappear at
                            the provider (as its expiry would). Without either, the test of
                            :class:`~treasury_core.ports.card_provider.HoldGone` is skipped.
``offline_card_provider``   the same provider unable to reach its network (every call a
                            :class:`~treasury_core.errors.ProviderError`): proves that unusable
                            cards are refused before any network call.
==========================  =====================================================================

What the contract checks, from the port's docstrings:

- a sale (``capture=True``) is ``CAPTURED`` with the card's brand and last four digits, and
  cannot be captured again (``already_captured``); a decline is a ``CardError`` with a
  ``failure_reason``; an unusable card (bad number, expiry month, expired, bad CVC) is refused
  with the reason of :func:`~treasury_core.ports.card_provider.refuse_unusable_card`;
- the card number appears in no reference, result, error message or log record;
- one test method (or a few) per capability flag, named after it. With the flag on, what the
  capability promises: holds captured in full or in part, never over the held amount and never
  twice, voided (twice harmlessly) and then not capturable, a vanished hold as ``HoldGone``;
  refunds in full and in part within the captured amount; the 3-D Secure flow; verification;
  attempt keys; saved cards kept by the provider (saved, charged by reference, the number in
  no reference); provider events (a delivery that is not the provider's refused); keyed calls
  (every money-moving call takes its ``key`` and ``owner``); lookups (``find_charge`` and
  ``find_refund`` find what keyed calls made, in its state now, and ``None`` for keys never
  used; ``recent_charges`` lists charges with their owners and amounts). With the flag off,
  the refusal the port documents for it (``unsupported``, ``no_action_required`` for 3-D
  Secure, ``provider_events_unsupported`` for events), asserted rather than skipped; attempt
  keys, keyed calls and lookups have nothing to refuse (the services never use them), so
  their tests skip, saying so.

A second capture for the *same* amount is not checked: a provider may answer it as the retry
of a capture whose answer was lost (Stripe's does). That a call repeated with the same key
makes nothing twice (a repeated ``attempt_key`` is one charge, a repeated refund ``key`` one
refund) is checked only with :attr:`CardProviderContract.replays_keyed_calls` set: Stripe does
it, fakes of it often ignore keys (run it behind ``treasury_pytest.faults.FaultProxy``, which
replays keyed requests as Stripe does, or against your provider's own test mode).

The lookups are asked right after the calls they look for: a provider whose lookups lag
(Stripe's search) passes them against a test double that does not (localstripe behind
``treasury_pytest.localstripe.localstripe_proxy``). ``recent_charges`` is asked from
:meth:`CardProviderContract.recent_since`, a minute before the wall clock by default:
override it when your provider dates its charges by another clock.

Amounts are :attr:`CardProviderContract.amount` minor units of
:attr:`CardProviderContract.currency`; override either as class attributes. The tests are plain
functions that run their calls with :func:`asyncio.run`: no async test plugin is needed.

This module imports pytest, so it is for test suites only; ``import treasury_core.testing``
does not import it until ``treasury_core.testing.CardProviderContract`` is asked for.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest

from treasury_core.errors import CardError, ProviderError
from treasury_core.ports.card_provider import (
    CAPABILITIES,
    HOLD_GONE_FAILURE_REASON,
    BadProviderEvent,
    CallOwner,
    CardData,
    CardProvider,
    CardProviderLookups,
    CardProviderResult,
    CardProviderStatus,
    HoldGone,
    ProviderCharge,
    answers_lookups,
    keeps_saved_cards,
    takes_keyed_calls,
)
from treasury_core.ports.ids import SORTABLE_DIGITS

__all__ = ["UNUSABLE_CARD_REASONS", "CardProviderContract", "unusable_cards"]

T = TypeVar("T")

#: A ``failure_reason``: a short snake_case code, safe to store and show.
_REASON = re.compile(r"[a-z][a-z0-9_]*")

#: The ``failure_reason`` of each kind of unusable card, as ``refuse_unusable_card`` gives it.
UNUSABLE_CARD_REASONS = ("invalid_number", "invalid_expiry_month", "expired_card", "invalid_cvc")


def unusable_cards(card: CardData) -> list[tuple[CardData, str]]:
    """Variants of a good ``card`` that no network can use, each with its ``failure_reason``."""
    last = int(card.number[-1])
    bad_number = card.number[:-1] + str((last + 1) % 10)  # off by one digit: fails Luhn
    return list(
        zip(
            (
                replace(card, number=bad_number),
                replace(card, expiry_month=13),
                replace(card, expiry_year=2000, expiry_month=1),
                replace(card, cvc="12a"),
            ),
            UNUSABLE_CARD_REASONS,
            strict=True,
        )
    )


def _run(call: Awaitable[T]) -> T:
    async def wrapped() -> T:
        return await call

    return asyncio.run(wrapped())


def _refund_answers(card_provider: CardProvider) -> set[CardProviderStatus]:
    """What a refund may answer: ``refunded``, or ``refund_pending`` from a provider whose
    events can tell later how it ended (nothing else would ever settle it)."""
    answers = {CardProviderStatus.REFUNDED}
    if card_provider.provider_events_supported():
        answers.add(CardProviderStatus.REFUND_PENDING)
    return answers


def _key() -> str:
    """A key as the services derive them (40 hex digits); fresh, as a real provider remembers
    keys for a while, across test runs."""
    return secrets.token_hex(20)


def _owner(refund: bool = False) -> CallOwner:
    """An owner of a call: random ids, and for a refund an id shaped as the id port makes them."""
    refund_id = "re_" + "".join(secrets.choice(SORTABLE_DIGITS) for _ in range(26))
    return CallOwner(
        company_id=secrets.randbelow(10**6) + 1,
        payment_intent_id=secrets.randbelow(10**12) + 1,
        refund_id=refund_id if refund else None,
    )


def _keyed(
    call: Callable[..., Awaitable[CardProviderResult]],
) -> Callable[..., Awaitable[CardProviderResult]]:
    # The keywords of keyed calls are not in the CardProvider protocol (providers written
    # before them still conform), so the calls are typed loosely here.
    return call


def _refusal(call: Awaitable[object]) -> CardError:
    """The ``CardError`` that ``call`` raises; fails the test if it succeeds or raises another."""
    with pytest.raises(CardError) as refused:
        _run(call)
    error = refused.value
    assert _REASON.fullmatch(error.failure_reason or ""), error.failure_reason
    return error


def _optional(request: pytest.FixtureRequest, name: str) -> Any:
    """The value of fixture ``name``, or ``None`` when the test suite defines none."""
    try:
        return request.getfixturevalue(name)
    except pytest.FixtureLookupError as missing:
        if missing.argname != name:
            raise  # defined, but it needs a fixture that is not: say so, do not ignore it
        return None


class CardProviderContract:
    """The card provider contract as pytest tests; subclass it to run them on your provider.

    Provide the fixtures ``card_provider``, ``good_card`` and ``declined_card`` (and the
    optional ones of the module's table) in the subclass or a ``conftest.py``. As with the
    storage contract, the class name does not start with ``Test`` and the class defines no
    fixtures, so importing it collects nothing and a ``conftest.py``'s fixtures are not
    shadowed. Name your subclass ``Test...``.

    Each capability's tests are keyed on its flag, read from the provider at run time: they
    check the capability when it is on and its documented refusal when it is off. A capability
    added to the port gets test methods of its own here, keyed the same way.
    """

    #: The currency of every amount the contract sends.
    currency = "USD"
    #: The amount (minor units) of each charge; partial captures and refunds take parts of it.
    amount = 1_000
    #: Set ``True`` when the provider (or the test double it runs against) answers a call
    #: repeated with the same key with its first outcome, as Stripe does: the contract then
    #: checks that a repeated ``attempt_key`` is one charge and a repeated refund ``key`` one
    #: refund (``test_keyed_calls_repeated_with_their_key_make_nothing_twice``).
    replays_keyed_calls = False

    def recent_since(self) -> datetime:
        """Where ``recent_charges`` is asked from: a minute before the wall clock (UTC), to
        allow for a provider's clock a little off ours. Override it when the provider dates its
        charges by another clock (a fake's business time)."""
        return datetime.now(UTC) - timedelta(minutes=1)

    # --- helpers ---------------------------------------------------------------------------

    def sale(self, provider: CardProvider, card: CardData) -> CardProviderResult:
        """Charge :attr:`amount` on ``card`` (``capture=True``); checks the answer."""
        result = _run(provider.authorize(card, self.amount, self.currency, capture=True))
        assert result.status is CardProviderStatus.CAPTURED
        return result

    def hold(self, provider: CardProvider, card: CardData) -> CardProviderResult:
        """Hold :attr:`amount` on ``card`` (``capture=False``); checks the answer."""
        result = _run(provider.authorize(card, self.amount, self.currency, capture=False))
        assert result.status is CardProviderStatus.AUTHORIZED
        assert result.last4 == card.number[-4:]
        assert result.brand
        return result

    def holds_refused(self, provider: CardProvider, card: CardData) -> bool:
        """When manual capture is off, check that a hold is refused, and say so (``True``)."""
        if provider.manual_capture_supported():
            return False
        refused = _refusal(provider.authorize(card, self.amount, self.currency, capture=False))
        assert refused.failure_reason == "unsupported"
        return True

    # --- every provider --------------------------------------------------------------------

    def test_every_capability_is_declared(self, card_provider: CardProvider) -> None:
        """Every ``*_supported()`` flag of the port
        (:data:`~treasury_core.ports.card_provider.CAPABILITIES`) is a method answering a
        ``bool``: the services call each directly, never probing for it."""
        for name in CAPABILITIES:
            flag = getattr(card_provider, name, None)
            assert callable(flag), f"{name}() is not declared"
            assert isinstance(flag(), bool), f"{name}() does not answer a bool"
        declared = {name for name in dir(CardProvider) if name.endswith("_supported")}
        assert declared == set(CAPABILITIES), "CAPABILITIES lists every flag of the port"

    def test_a_sale_is_captured_with_brand_and_last4(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """``authorize(capture=True)`` charges: ``CAPTURED``, with the card's brand and last4."""
        result = self.sale(card_provider, good_card)
        assert result.last4 == good_card.number[-4:]
        assert result.brand
        assert result.reference
        assert not result.requires_action

    def test_a_sale_cannot_be_captured_again(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """A charged sale refuses another capture (``already_captured``)."""
        sale = self.sale(card_provider, good_card)
        again = _refusal(card_provider.capture(sale.reference, self.amount - 1))
        assert again.failure_reason == "already_captured"
        assert not isinstance(again, HoldGone)

    def test_a_decline_is_a_card_error_with_a_reason(
        self, card_provider: CardProvider, declined_card: CardData
    ) -> None:
        """A declined card is a ``CardError`` naming why, not a ``ProviderError``, for a sale
        and (with manual capture) for a hold."""
        for capture in (True, False) if card_provider.manual_capture_supported() else (True,):
            declined = _refusal(
                card_provider.authorize(declined_card, self.amount, self.currency, capture=capture)
            )
            assert not isinstance(declined, HoldGone)
            assert declined.failure_reason not in ("unsupported", HOLD_GONE_FAILURE_REASON)
            assert declined.message

    def test_unusable_cards_are_refused_before_any_network_call(
        self, card_provider: CardProvider, good_card: CardData, request: pytest.FixtureRequest
    ) -> None:
        """A bad number, expiry month or CVC, or an expired card, is declined by the port's rule.

        With ``offline_card_provider`` the refusals come from a provider that cannot reach its
        network (checked first with ``good_card``), so none of them was a network call.
        """
        offline: CardProvider | None = _optional(request, "offline_card_provider")
        provider = card_provider
        if offline is not None:
            with pytest.raises(ProviderError):
                _run(offline.authorize(good_card, self.amount, self.currency, capture=True))
            provider = offline
        for card, reason in unusable_cards(good_card):
            refused = _refusal(provider.authorize(card, self.amount, self.currency, capture=True))
            assert refused.failure_reason == reason, card

    def test_card_data_never_appears_in_references_results_errors_or_logs(
        self,
        card_provider: CardProvider,
        good_card: CardData,
        declined_card: CardData,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """The card number is in no reference, result, error or log record (DEBUG included)."""
        caplog.set_level(logging.DEBUG)
        seen: list[object] = [self.sale(card_provider, good_card)]
        if card_provider.refunds_supported():
            sale = self.sale(card_provider, good_card)
            seen.append(_run(card_provider.refund(sale.reference, self.amount)))
        if card_provider.manual_capture_supported():
            held = self.hold(card_provider, good_card)
            seen += [held, _run(card_provider.void(held.reference))]
        if card_provider.verification_supported():
            seen.append(_run(card_provider.verify(good_card)))
        declined = _refusal(
            card_provider.authorize(declined_card, self.amount, self.currency, capture=True)
        )
        unusable = [
            _refusal(card_provider.authorize(card, self.amount, self.currency, capture=True))
            for card, _ in unusable_cards(good_card)
        ]
        texts = [repr(x) for x in seen]
        texts += [f"{e!r} {e} {e.message}" for e in (declined, *unusable)]
        texts += [caplog.text, *(str(r.args) for r in caplog.records)]
        for card in (good_card, declined_card):
            # All but the last four digits: the part no one may keep.
            hidden = card.number[:-4]
            leaks = [text for text in texts if hidden in text]
            assert leaks == [], f"the number of {card!r} appears"

    # --- manual capture --------------------------------------------------------------------

    def test_manual_capture_a_hold_captures_in_full_once(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """On: a hold is ``AUTHORIZED``, captured in full, then refuses another capture.
        Off: a hold is refused (``unsupported``)."""
        if self.holds_refused(card_provider, good_card):
            return
        held = self.hold(card_provider, good_card)
        captured = _run(card_provider.capture(held.reference, self.amount))
        assert captured.status is CardProviderStatus.CAPTURED
        again = _refusal(card_provider.capture(captured.reference, self.amount - 1))
        assert again.failure_reason == "already_captured"

    def test_manual_capture_in_part_and_never_over_the_hold(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """On: a capture over the held amount is refused (``amount_too_large``) and changes
        nothing; a capture of part of it succeeds. Off: a hold is refused."""
        if self.holds_refused(card_provider, good_card):
            return
        held = self.hold(card_provider, good_card)
        over = _refusal(card_provider.capture(held.reference, self.amount + 1))
        assert over.failure_reason == "amount_too_large"
        assert not isinstance(over, HoldGone)
        part = _run(card_provider.capture(held.reference, self.amount // 2))
        assert part.status is CardProviderStatus.CAPTURED

    def test_manual_capture_a_hold_is_voided_twice_harmlessly(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """On: ``void`` releases a hold (``VOIDED``), again without harm, and a capture after it
        is refused. Off: a hold is refused."""
        if self.holds_refused(card_provider, good_card):
            return
        held = self.hold(card_provider, good_card)
        voided = _run(card_provider.void(held.reference))
        assert voided.status is CardProviderStatus.VOIDED
        twice = _run(card_provider.void(voided.reference))
        assert twice.status is CardProviderStatus.VOIDED
        _refusal(card_provider.capture(twice.reference, self.amount))

    def test_manual_capture_a_hold_gone_is_hold_gone(
        self, card_provider: CardProvider, good_card: CardData, request: pytest.FixtureRequest
    ) -> None:
        """On: capturing a hold that disappeared at the provider raises ``HoldGone``
        (``authorization_expired``). Off: a hold is refused."""
        if self.holds_refused(card_provider, good_card):
            return
        gone_card: CardData | None = _optional(request, "hold_gone_card")
        lose_hold: Callable[[str], None] | None = _optional(request, "lose_hold")
        if gone_card is not None:
            held = self.hold(card_provider, gone_card)
        elif lose_hold is not None:
            held = self.hold(card_provider, good_card)
            lose_hold(held.reference)
        else:
            pytest.skip("define a hold_gone_card or lose_hold fixture to check HoldGone")
        with pytest.raises(HoldGone) as gone:
            _run(card_provider.capture(held.reference, self.amount))
        assert gone.value.failure_reason == HOLD_GONE_FAILURE_REASON

    # --- refunds ---------------------------------------------------------------------------

    def test_refunds_in_full_within_the_captured_amount(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """On: a sale is refunded in full (``REFUNDED``, or ``REFUND_PENDING`` from a provider
        with events; the refund's own reference); a refund over the captured amount, or of a
        hold, is refused. Off: a refund is refused (``unsupported``)."""
        sale = self.sale(card_provider, good_card)
        if not card_provider.refunds_supported():
            refused = _refusal(card_provider.refund(sale.reference, self.amount))
            assert refused.failure_reason == "unsupported"
            return
        _refusal(card_provider.refund(sale.reference, self.amount + 1))
        refund = _run(card_provider.refund(sale.reference, self.amount))
        assert refund.status in _refund_answers(card_provider)
        assert refund.reference
        assert refund.reference != sale.reference
        if card_provider.manual_capture_supported():
            held = self.hold(card_provider, good_card)
            _refusal(card_provider.refund(held.reference, self.amount))
            # Captured in part: only what moved can go back.
            part = _run(card_provider.capture(held.reference, self.amount // 2))
            _refusal(card_provider.refund(part.reference, self.amount // 2 + 1))
            back = _run(card_provider.refund(part.reference, self.amount // 2))
            assert back.status in _refund_answers(card_provider)

    def test_partial_refunds_add_up_to_the_captured_amount(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """On: a sale is refunded in two parts, each ``REFUNDED`` (or ``REFUND_PENDING``, as
        above) with its own reference.
        Off: a refund of part of a sale is refused (``unsupported``)."""
        sale = self.sale(card_provider, good_card)
        first = self.amount * 2 // 5
        if not card_provider.partial_refunds_supported():
            refused = _refusal(card_provider.refund(sale.reference, first))
            assert refused.failure_reason == "unsupported"
            return
        assert card_provider.refunds_supported(), "partial refunds announced without refunds"
        one = _run(card_provider.refund(sale.reference, first))
        two = _run(card_provider.refund(sale.reference, self.amount - first))
        assert {one.status, two.status} <= _refund_answers(card_provider)
        assert len({one.reference, two.reference, sale.reference}) == 3

    # --- 3-D Secure ------------------------------------------------------------------------

    def test_three_d_secure_challenge_then_complete(
        self, card_provider: CardProvider, good_card: CardData, request: pytest.FixtureRequest
    ) -> None:
        """On: a 3-D Secure card answers ``requires_action``; after the challenge
        ``complete_action`` charges (``CAPTURED``) or holds (``AUTHORIZED``), once; a charge
        awaiting the challenge cannot be captured and can be voided. Off: such a card is
        refused, never challenged, and ``complete_action`` is refused
        (``no_action_required``). A provider that hosts the challenge itself
        (``return_urls_supported()``) answers ``complete_action`` with the charge's state when
        no challenge waits, instead of refusing."""
        card: CardData | None = _optional(request, "three_d_secure_card")
        sale = self.sale(card_provider, good_card)
        if not card_provider.three_d_secure_supported():
            refused = _refusal(card_provider.complete_action(sale.reference))
            assert refused.failure_reason == "no_action_required"
            if card is not None:
                _refusal(card_provider.authorize(card, self.amount, self.currency, capture=True))
            return
        if card is None:
            pytest.fail("three_d_secure_supported() is on: define a three_d_secure_card fixture")
        passed: Callable[[str], None] = _optional(request, "pass_three_d_secure") or (
            lambda reference: None
        )
        # A provider whose challenge page is its own (return URLs) reads the verdict from the
        # charge, so it answers a charge that never asked for one with its state: the service
        # asks it only about attempts that waited for the challenge.
        reads_verdicts = card_provider.return_urls_supported()
        if not reads_verdicts:
            _refusal(card_provider.complete_action(sale.reference))  # nothing pending

        def challenged(capture: bool) -> CardProviderResult:
            result = _run(
                card_provider.authorize(card, self.amount, self.currency, capture=capture)
            )
            assert result.requires_action
            assert result.last4 == card.number[-4:]
            return result

        charge = challenged(True)
        passed(charge.reference)
        done = _run(card_provider.complete_action(charge.reference))
        assert done.status is CardProviderStatus.CAPTURED
        if reads_verdicts:  # asked again, the same verdict: nothing moves twice
            again = _run(card_provider.complete_action(done.reference))
            assert again.status is CardProviderStatus.CAPTURED
        else:
            _refusal(card_provider.complete_action(done.reference))  # no longer pending

        abandoned = challenged(True)
        assert _run(card_provider.void(abandoned.reference)).status is CardProviderStatus.VOIDED

        if card_provider.manual_capture_supported():
            pending = challenged(False)
            _refusal(card_provider.capture(pending.reference, self.amount))
            passed(pending.reference)
            held = _run(card_provider.complete_action(pending.reference))
            assert held.status is CardProviderStatus.AUTHORIZED
            captured = _run(card_provider.capture(held.reference, self.amount))
            assert captured.status is CardProviderStatus.CAPTURED

    # --- verification ----------------------------------------------------------------------

    def test_verification_checks_a_card_without_moving_money(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """On: ``verify`` answers ``VERIFIED`` with brand and last4, and declines an unusable
        card. Off: ``verify`` is refused (``unsupported``)."""
        if not card_provider.verification_supported():
            refused = _refusal(card_provider.verify(good_card))
            assert refused.failure_reason == "unsupported"
            return
        verified = _run(card_provider.verify(good_card))
        assert verified.status is CardProviderStatus.VERIFIED
        assert verified.last4 == good_card.number[-4:]
        assert verified.brand
        for card, reason in unusable_cards(good_card):
            assert _refusal(card_provider.verify(card)).failure_reason == reason

    # --- attempt keys ----------------------------------------------------------------------

    def test_attempt_keys_are_taken_and_tell_attempts_apart(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """On: ``authorize`` takes ``attempt_key``, and two attempts with different keys are two
        charges. Off: there is nothing to refuse (the services never pass a key), so skipped."""
        if not card_provider.attempt_keys_supported():
            pytest.skip("attempt_keys_supported() is off: no attempt_key is ever passed")
        authorize: Callable[..., Awaitable[CardProviderResult]] = card_provider.authorize
        # Fresh keys: a real provider remembers keys for a while, across test runs.
        first, other = (
            _run(authorize(good_card, self.amount, self.currency, capture=True, attempt_key=key))
            for key in (uuid.uuid4().hex, uuid.uuid4().hex)
        )
        assert first.status is other.status is CardProviderStatus.CAPTURED
        assert first.reference != other.reference

    # --- saved cards kept by the provider --------------------------------------------------

    def test_saved_cards_are_kept_and_charged_by_reference(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """On: ``save_card`` keeps the card at the provider (its reference shows no number),
        and ``authorize_saved`` charges or holds it by reference; a card the provider does not
        have is declined. (That a repeated ``key`` keeps one card is not checked, as with
        attempt keys: fakes of providers often ignore keys.) Off: the provider is not one that keeps
        saved cards (the services seal cards in the vault and never call either method)."""
        if not card_provider.saved_cards_supported():
            assert not keeps_saved_cards(card_provider)
            return
        keeper = card_provider  # narrowed to the capability below
        assert keeps_saved_cards(keeper)
        key = uuid.uuid4().hex
        saved = _run(keeper.save_card(good_card, customer_email="c@example.com", key=key))
        assert good_card.number not in saved.reference
        assert (saved.last4, saved.expiry_month) == (good_card.number[-4:], good_card.expiry_month)
        sale = _run(keeper.authorize_saved(saved, self.amount, self.currency, capture=True))
        assert sale.status is CardProviderStatus.CAPTURED
        assert sale.last4 == good_card.number[-4:]
        if card_provider.manual_capture_supported():
            hold = _run(keeper.authorize_saved(saved, self.amount, self.currency, capture=False))
            assert hold.status is CardProviderStatus.AUTHORIZED
            captured = _run(card_provider.capture(hold.reference, self.amount))
            assert captured.status is CardProviderStatus.CAPTURED
        gone = replace(saved, reference=saved.reference + "gone")
        _refusal(keeper.authorize_saved(gone, self.amount, self.currency, capture=True))

    # --- provider events -------------------------------------------------------------------

    def test_provider_events_refuse_what_the_provider_did_not_send(
        self, card_provider: CardProvider
    ) -> None:
        """On or off: a delivery without the provider's signature is refused
        (:class:`BadProviderEvent`), so nothing is applied; off, with
        ``provider_events_unsupported``. Authentic deliveries are the provider's own format:
        test them with its signing scheme in your suite."""
        parse = getattr(card_provider, "parse_event", None)
        if parse is None:  # not a CardProviderBase: the services never ask it with the flag off
            assert not card_provider.provider_events_supported()
            return
        with pytest.raises(BadProviderEvent) as refused:
            parse(b'{"id": "evt_1", "type": "charge.refunded"}', {})
        if not card_provider.provider_events_supported():
            assert refused.value.code == "provider_events_unsupported"

    # --- keyed calls -----------------------------------------------------------------------

    def keyed(self, card_provider: CardProvider) -> None:
        """Skip unless ``keyed_calls_supported()`` is on (the services pass no keys then)."""
        if not takes_keyed_calls(card_provider):
            pytest.skip("keyed_calls_supported() is off: no key or owner is ever passed")

    def test_keyed_calls_are_taken_with_keys_and_owners(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """On: ``authorize`` takes ``attempt_key`` and ``owner``, ``capture`` and ``void`` a
        ``key``, ``refund`` a ``key`` and an ``owner`` (and ``authorize_saved``, for a provider
        that keeps saved cards, ``attempt_key`` and ``owner``), and each does what it does
        without them. Off: skipped (nothing to refuse: the services pass none)."""
        self.keyed(card_provider)
        authorize = _keyed(card_provider.authorize)
        sale = _run(
            authorize(
                good_card,
                self.amount,
                self.currency,
                capture=True,
                attempt_key=_key(),
                owner=_owner(),
            )
        )
        assert sale.status is CardProviderStatus.CAPTURED
        if card_provider.manual_capture_supported():
            held = _run(
                authorize(
                    good_card,
                    self.amount,
                    self.currency,
                    capture=False,
                    attempt_key=_key(),
                    owner=_owner(),
                )
            )
            assert held.status is CardProviderStatus.AUTHORIZED
            captured = _run(_keyed(card_provider.capture)(held.reference, self.amount, key=_key()))
            assert captured.status is CardProviderStatus.CAPTURED
            other = _run(
                authorize(
                    good_card,
                    self.amount,
                    self.currency,
                    capture=False,
                    attempt_key=_key(),
                    owner=_owner(),
                )
            )
            voided = _run(_keyed(card_provider.void)(other.reference, key=_key()))
            assert voided.status is CardProviderStatus.VOIDED
        if card_provider.refunds_supported():
            refund = _run(
                _keyed(card_provider.refund)(
                    sale.reference, self.amount, key=_key(), owner=_owner(refund=True)
                )
            )
            assert refund.status in _refund_answers(card_provider)
            assert refund.reference != sale.reference
        keeper = card_provider
        if keeps_saved_cards(keeper):
            saved = _run(keeper.save_card(good_card, customer_email="k@example.com", key=_key()))
            charged = _run(
                _keyed(keeper.authorize_saved)(
                    saved,
                    self.amount,
                    self.currency,
                    capture=True,
                    attempt_key=_key(),
                    owner=_owner(),
                )
            )
            assert charged.status is CardProviderStatus.CAPTURED

    def test_keyed_calls_repeated_with_their_key_make_nothing_twice(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """With :attr:`replays_keyed_calls`: an ``authorize`` repeated with its
        ``attempt_key`` answers the same charge, and a ``refund`` repeated with its ``key``
        the same refund (what a service's retry after a lost answer relies on). Skipped
        without it, or with keyed calls off."""
        self.keyed(card_provider)
        if not self.replays_keyed_calls:
            pytest.skip(
                "replays_keyed_calls is not set: set it when the provider (or its test double) "
                "answers a repeated key with its first outcome"
            )
        authorize = _keyed(card_provider.authorize)
        attempt, owner = _key(), _owner()
        first, again = (
            _run(
                authorize(
                    good_card,
                    self.amount,
                    self.currency,
                    capture=True,
                    attempt_key=attempt,
                    owner=owner,
                )
            )
            for _ in range(2)
        )
        assert first.status is again.status is CardProviderStatus.CAPTURED
        assert again.reference == first.reference
        if not card_provider.refunds_supported():
            return
        part = self.amount // 2 if card_provider.partial_refunds_supported() else self.amount
        refund = _keyed(card_provider.refund)
        key, refund_owner = _key(), _owner(refund=True)
        one, two = (
            _run(refund(again.reference, part, key=key, owner=refund_owner)) for _ in range(2)
        )
        assert two.reference == one.reference
        assert {one.status, two.status} <= _refund_answers(card_provider)

    # --- lookups ---------------------------------------------------------------------------

    def lookups(self, card_provider: CardProvider) -> CardProviderLookups:
        """The provider as one that answers lookups; skip unless ``lookups_supported()``."""
        asker = card_provider
        if not answers_lookups(asker):
            pytest.skip("lookups_supported() is off: the services never ask the provider")
        assert takes_keyed_calls(card_provider), (
            "lookups_supported() is on but keyed_calls_supported() is off: no call names "
            "what the lookups would look for"
        )
        return asker

    def test_lookups_find_what_keyed_calls_made_and_nothing_else(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """On: ``find_charge`` answers the charge an attempt key made, in its state now
        (``captured``; with holds ``authorized``, then ``voided`` after a void, with the
        latest reference), and ``None`` for a key never used; ``find_refund`` the refund a
        refund ``key`` made, and ``None`` for another key. Off: skipped."""
        asker = self.lookups(card_provider)
        authorize = _keyed(card_provider.authorize)
        sold = _key()
        sale = _run(
            authorize(
                good_card,
                self.amount,
                self.currency,
                capture=True,
                attempt_key=sold,
                owner=_owner(),
            )
        )
        found = _run(asker.find_charge(sold))
        assert found is not None
        assert (found.reference, found.status) == (sale.reference, CardProviderStatus.CAPTURED)
        assert _run(asker.find_charge(_key())) is None
        if card_provider.manual_capture_supported():
            held_key = _key()
            held = _run(
                authorize(
                    good_card,
                    self.amount,
                    self.currency,
                    capture=False,
                    attempt_key=held_key,
                    owner=_owner(),
                )
            )
            holding = _run(asker.find_charge(held_key))
            assert holding is not None
            assert (holding.reference, holding.status) == (
                held.reference,
                CardProviderStatus.AUTHORIZED,
            )
            voided = _run(_keyed(card_provider.void)(held.reference, key=_key()))
            gone = _run(asker.find_charge(held_key))
            assert gone is not None
            assert (gone.reference, gone.status) == (voided.reference, CardProviderStatus.VOIDED)
        if not card_provider.refunds_supported():
            return
        key = _key()
        refund = _run(
            _keyed(card_provider.refund)(
                sale.reference, self.amount, key=key, owner=_owner(refund=True)
            )
        )
        made = _run(asker.find_refund(sale.reference, key))
        assert made is not None
        assert made.reference == refund.reference
        assert made.status in _refund_answers(card_provider) | {CardProviderStatus.REFUND_FAILED}
        if refund.status is CardProviderStatus.REFUNDED:
            assert made.status is CardProviderStatus.REFUNDED
        assert _run(asker.find_refund(sale.reference, _key())) is None

    def test_lookups_list_recent_charges_with_their_owners(
        self, card_provider: CardProvider, good_card: CardData
    ) -> None:
        """On: ``recent_charges`` (from :meth:`recent_since`) lists a sale made with an owner
        and an attempt key: its reference, owner, attempt key, ``captured``, amounts (what was
        refunded of it too) and currency; and, with holds, a hold as ``authorized``, nothing
        captured. Off: skipped."""
        asker = self.lookups(card_provider)
        since = self.recent_since()
        authorize = _keyed(card_provider.authorize)
        sold, sold_by = _key(), _owner()
        sale = _run(
            authorize(
                good_card, self.amount, self.currency, capture=True, attempt_key=sold, owner=sold_by
            )
        )
        refunded = 0
        if card_provider.refunds_supported():
            refunded = (
                self.amount // 2 if card_provider.partial_refunds_supported() else self.amount
            )
            refund = _keyed(card_provider.refund)
            _run(refund(sale.reference, refunded, key=_key(), owner=_owner(refund=True)))
        held: CardProviderResult | None = None
        held_key, held_by = _key(), _owner()
        if card_provider.manual_capture_supported():
            held = _run(
                authorize(
                    good_card,
                    self.amount,
                    self.currency,
                    capture=False,
                    attempt_key=held_key,
                    owner=held_by,
                )
            )
        charges: Sequence[ProviderCharge] = _run(asker.recent_charges(since))
        by_reference = {charge.reference: charge for charge in charges}
        assert sale.reference in by_reference, "the sale is not among the recent charges"
        listed = by_reference[sale.reference]
        assert (listed.owner, listed.attempt_key, listed.status) == (
            sold_by,
            sold,
            CardProviderStatus.CAPTURED,
        )
        assert (listed.amount, listed.currency, listed.amount_captured) == (
            self.amount,
            self.currency,
            self.amount,
        )
        assert listed.amount_refunded == refunded
        if held is not None:
            hold = by_reference[held.reference]
            assert (hold.owner, hold.attempt_key, hold.status) == (
                held_by,
                held_key,
                CardProviderStatus.AUTHORIZED,
            )
            assert (hold.amount, hold.amount_captured, hold.amount_refunded) == (self.amount, 0, 0)
