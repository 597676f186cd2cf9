"""The Stripe payments machine under the fault-injection test bed: faults the SDK absorbs.

The machine of ``test_payments_machine_stripe.py`` runs with its treasury's Stripe provider
behind a :func:`~treasury_pytest.localstripe.localstripe_proxy` whose plan fails about one
request in five on a schedule seeded per run (the seed is drawn by Hypothesis, so a failing
run is replayed and shrunk with its faults): the connection dropped before forwarding, the
answer lost after localstripe acted (the proxy's idempotency layer answers the SDK's retry
with the first answer), a 500 or 503 answered without forwarding, the request delivered
twice. No logical request (one idempotency key; one method and path for a GET) fails more
than :data:`~treasury_stripe.card_provider.MAX_NETWORK_RETRIES` times in a row, so the SDK's
own retries always get through and the machine's reference model stays exact: every call
succeeds or is refused exactly as without faults. No delays and no 429s here (the SDK retries
a 429 only when Stripe says to): ``test_stripe_fault_matrix.py`` has the faults that defeat
every retry.

After every step the test bed's invariant holds: the charges, captures and refunds localstripe
holds for the run's intents are the ones the treasury records
(:func:`~treasury_core.testing.provider_agreement.provider_disagreements`). It is asked through
a second proxy without faults, so that the check reads what is there rather than testing the
retries once more. At the end the proxy's log must show every kind of fault injected and
answers replayed, so the test cannot pass without faults.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, run_state_machine_as_test

from tests.conftest import machine_settings
from tests.integration.test_payments_machine_stripe import KEY, StripePaymentsMachine
from treasury_core.config import TreasuryConfig
from treasury_core.testing.fakes.clock import FakeClock, SequentialIds
from treasury_core.testing.provider_agreement import provider_disagreements
from treasury_pytest.faults import (
    Delivery,
    Fault,
    FaultKind,
    FaultProxy,
    ProxyRequest,
    stores_outcomes,
)
from treasury_pytest.localstripe import localstripe_proxy
from treasury_stripe.card_provider import MAX_NETWORK_RETRIES, StripeCardProvider

#: The share of requests a fault is injected into.
FAULT_RATE = 0.2
#: The faults drawn from, each as likely: all of them absorbed by the SDK's retries.
FAULTS: tuple[Fault, ...] = (
    Fault.drop(),
    Fault.lose_answer(),
    Fault.server_error(500),
    Fault.server_error(503),
    Fault.duplicate(),
)
#: Each failed attempt costs the SDK's backoff (half a second and more), so the runs are
#: fewer and shorter than the fault-free machine's. Derandomized: the same code and test
#: files give the same runs, hence the same requests and faults, so that the check that every
#: kind of fault was injected does not pass or fail by chance (the fault-free machine
#: explores).
FAULT_SETTINGS = settings(machine_settings(examples=15, steps=25), derandomize=True)


def _fault_name(fault: Fault) -> str:
    return f"{fault.kind.value} {fault.status}" if fault.status is not None else fault.kind.value


class SeededFaults:
    """A plan (a function of each request) injecting :data:`FAULTS` into ``rate`` of the
    requests, drawn from ``random.Random(seed)`` in the order requests arrive.

    The faults are dealt from a shuffled deck of :data:`FAULTS`, dealt again once used up,
    so that a run with a handful of faults already has every kind. A fault that fails the
    request (all but a duplicate, whose client gets the first answer) is injected into one
    logical request at most :data:`MAX_NETWORK_RETRIES` times in a row: the SDK's last retry
    passes, and the fault waits for another request. A logical request is its idempotency key,
    or its method and path when it has none (the SDK's retries of a GET repeat both).
    """

    def __init__(self, seed: int, rate: float = FAULT_RATE) -> None:
        self._random = random.Random(seed)
        self._rate = rate
        self._deck: list[Fault] = []
        self._failed_in_a_row: dict[str, int] = {}

    def __call__(self, request: ProxyRequest) -> Fault | None:
        call = request.key if request.key is not None else f"{request.method} {request.path}"
        failed = self._failed_in_a_row.pop(call, 0)
        if self._random.random() >= self._rate:
            return None
        if not self._deck:
            self._deck = list(FAULTS)
            self._random.shuffle(self._deck)
        fault = self._deck[-1]
        if fault.kind is FaultKind.DUPLICATE:
            return self._deck.pop()  # answered with the first delivery's answer: no failure
        if failed >= MAX_NETWORK_RETRIES:
            return None
        self._failed_in_a_row[call] = failed + 1
        return self._deck.pop()


class RunIds(SequentialIds):
    """:class:`SequentialIds` whose tokens begin with a salt of their own.

    The runs of one test share localstripe and the proxy, and a sequential token would give
    each run the same lookup ids, hence the same Stripe idempotency keys (the proxy would
    replay one run's charges to the next) and the same owner tags (the invariant would take
    one run's charges for another's).
    """

    def __init__(self) -> None:
        super().__init__()
        self._salt = uuid.uuid4().hex[:8]

    def token(self, nbytes: int = 24) -> str:
        """The next sequential token, after the salt."""
        return self._salt + super().token(nbytes)


class FaultyStripeMachine(StripePaymentsMachine):
    """The Stripe machine whose provider calls cross :attr:`proxy`, faults injected by a plan
    seeded per run; :attr:`api_base` (where the customer answers 3-D Secure) stays
    localstripe's own, and the invariant reads through :attr:`checker_base`."""

    proxy: ClassVar[FaultProxy]
    #: A proxy in front of the same localstripe without faults, for the invariant's reads.
    checker_base: ClassVar[str] = ""

    def __init__(self) -> None:
        super().__init__()
        # localstripe dates its objects by the wall clock: the run's business time starts
        # there too, so that each intent's creation counts as within the invariant's window.
        started = datetime.now(UTC).replace(microsecond=0)
        self.clock = FakeClock(started)
        self.now = self.clock.now()
        self.ids = RunIds()
        self.since = started - timedelta(hours=1)
        self.checker = StripeCardProvider(KEY, self.clock, api_base=self.checker_base)

    def make_config(self) -> TreasuryConfig:
        """The Stripe machine's configuration, with Stripe's API behind the faulty proxy."""
        return TreasuryConfig(
            database_url="memory://",
            sandbox=True,
            card_provider="stripe",
            stripe_api_key=KEY,
            stripe_api_base=self.proxy.url,
        )

    def teardown(self) -> None:
        """Release the checker's threads, then what the machine holds."""
        self.checker.close()
        super().teardown()

    @initialize(data=st.data())
    def open_company(self, data: st.DataObject) -> None:
        """The run's fault schedule, then the machine's company."""
        seed = data.draw(st.integers(0, 2**32 - 1), label="fault_seed")
        self.proxy.set_plan(SeededFaults(seed))
        super().open_company(data)

    @invariant()
    def provider_agrees(self) -> None:
        """localstripe's charges, captures and refunds of the run's intents equal ours."""
        if not self.company_id:
            return
        found = self.loop.run_until_complete(
            provider_disagreements(self.storage, self.checker, [self.company_id], self.since)
        )
        assert found == [], f"localstripe and the treasury disagree: {found}"


@pytest.fixture
def proxies(localstripe_url: str) -> Iterator[tuple[FaultProxy, FaultProxy]]:
    with localstripe_proxy(localstripe_url) as faulty, localstripe_proxy(localstripe_url) as clean:
        yield faulty, clean


def test_the_payments_machine_holds_under_faults_the_sdk_absorbs(
    localstripe_url: str, proxies: tuple[FaultProxy, FaultProxy]
) -> None:
    faulty, clean = proxies
    machine = type(
        "FaultyStripeRun",
        (FaultyStripeMachine,),
        {"api_base": localstripe_url, "proxy": faulty, "checker_base": clean.url},
    )
    run_state_machine_as_test(machine, settings=FAULT_SETTINGS)
    faulty.set_plan(None)
    faulty.wait_idle()
    exchanges = faulty.exchanges()
    injected = Counter(_fault_name(e.fault) for e in exchanges if e.fault is not None)
    assert set(injected) == {_fault_name(f) for f in FAULTS}, f"faults injected: {injected}"
    # Each lost answer of a keyed request was given again to the SDK's retry, and no key
    # was acted on twice at localstripe (a refusal before acting, not kept, may be asked
    # again): whatever the network did, Stripe acted once per request.
    lost = {e.key for e in exchanges if e.key is not None and e.fault == Fault.lose_answer()}
    replayed = {e.key for e in exchanges if Delivery.REPLAYED in e.deliveries}
    assert lost and lost <= replayed, f"lost answers never replayed: {lost - replayed}"
    acted = Counter(
        c.key
        for c in faulty.upstream_calls("POST")
        if c.key is not None and stores_outcomes(c.status)
    )
    twice = {key: n for key, n in acted.items() if n > 1}
    assert acted and not twice, f"keys acted on more than once: {twice}"
