"""The operator's page shows card differences and refunds awaiting the provider's answer.

Over a real loopback server on SQLite and PostgreSQL, with the flaky card provider: a refund
whose answer was lost, with a provider that cannot be asked, is in doubt (an open difference)
and awaits its answer; once the provider's event settles it, the difference is resolved and the
refund leaves the waiting list. A company's session does not get the page.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.e2e.dashboard_client import sign_in
from tests.lost_answers import World, lost_refund
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.ports.card_provider import CardProviderEventKind
from treasury_core.testing import FakeClock, FlakyCardProvider

Client = TestClient[Any, Any]
BANK = "/dashboard/bank"


class WithoutLookups(FlakyCardProvider):
    def lookups_supported(self) -> bool:
        return False


@pytest.fixture
def provider(clock: FakeClock) -> WithoutLookups:
    return WithoutLookups(clock)


@pytest.fixture
def treasury(database_url: str, clock: FakeClock, provider: WithoutLookups) -> Treasury:
    config = TreasuryConfig(database_url=database_url, pool_size=4)
    return bootstrap(config, clock=clock, wall_clock=clock, card_provider=provider)


def _section(page: str, heading: str) -> str:
    found = re.search(rf"<h3>{re.escape(heading)}</h3>(.*?)(?=<h[23]|</main>)", page, re.S)
    assert found is not None, heading
    return html.unescape(found.group(1))


async def test_the_operator_sees_a_refund_in_doubt_until_its_event(
    client: Client, treasury: Treasury, clock: FakeClock, provider: WithoutLookups
) -> None:
    created = await treasury.companies.create_company("Acme")
    world = World(treasury, clock, provider, created.company.id, created.merchant_account.id)
    _, operator_key = await treasury.companies.create_operator_key("ops")
    await sign_in(client, operator_key, home=BANK)
    page = await (await client.get(BANK)).text()
    assert "No open card differences" in page
    assert "No refund awaits the provider" in page

    intent = await world.paid_by_card()
    refund = await lost_refund(world, intent, 400)
    await world.run_jobs()
    page = await (await client.get(BANK)).text()
    open_rows = _section(page, "Open card differences")
    assert "refund_in_doubt" in open_rows and refund.id in open_rows
    assert "cannot be asked" in open_rows
    assert refund.id in _section(page, "Refunds awaiting the provider's answer")

    [made] = provider.refunds.values()
    event = provider.event(
        CardProviderEventKind.REFUND_SUCCEEDED, made.charge, refund=made.reference
    )
    await treasury.provider_events.apply(event)
    page = await (await client.get(BANK)).text()
    assert "No open card differences" in page
    assert "No refund awaits the provider" in page
    resolved = _section(page, "Resolved card differences")
    assert refund.id in resolved and "refund succeeded" in resolved


async def test_a_company_session_does_not_get_the_page(client: Client, treasury: Treasury) -> None:
    created = await treasury.companies.create_company("Acme")
    await sign_in(client, created.secret_key)
    response = await client.get(BANK)
    assert response.status == 403
    assert "card differences" not in (await response.text()).lower()
