"""A third-party adapter package, installed as users install one, is found and chosen by name.

``acme_cards/`` is an example plugin package (its own ``pyproject.toml`` declares the
``treasury`` entry point). It is pip-installed into a temporary directory, never into this
environment, and a fresh interpreter with that directory on ``PYTHONPATH`` bootstraps a
treasury with ``card_provider="acme"``: the plugin is discovered through its entry point alone,
exactly as in a user's environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parent / "acme_cards"

# Runs in the subprocess: pays through the configured provider and reports what happened.
_PAY_THROUGH_ACME = """
import asyncio, json, sys
from importlib.metadata import entry_points

from treasury_core import AdapterNotFound, TreasuryConfig, bootstrap
from treasury_core.errors import CardError
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports.card_provider import CardData
from treasury_core.testing import check_invariants

report = {"entry_points": sorted(ep.name for ep in entry_points(group="treasury"))}
try:
    bootstrap(TreasuryConfig(database_url="memory://", card_provider="acme-typo"))
except AdapterNotFound as error:
    report["typo"] = str(error)
try:
    treasury = bootstrap(TreasuryConfig(database_url="memory://", card_provider="acme"))
except AdapterNotFound as error:
    report["acme"] = str(error)
    print(json.dumps(report))
    sys.exit(0)

provider = treasury.payments.provider
report["provider"] = f"{type(provider).__module__}.{type(provider).__name__}"
# What `treasury serve` does: the adapter named in the environment, its own settings there too.
from treasury_core import config_from_env
from treasury_core.settings import BadSetting, warn_unknown_variables
from acme_cards.settings import AcmeSettings
environ = {
    "TREASURY_DATABASE_URL": "memory://",
    "TREASURY_CARD_PROVIDER": "acme",
    "TREASURY_ACME_REGION": "us",
}
from_env = bootstrap(config_from_env(environ))
report["from_env"] = type(from_env.payments.provider).__name__
report["from_env_region"] = from_env.payments.provider.api.region
report["unknown"] = warn_unknown_variables(environ)
from_env.close()
coded = bootstrap(
    TreasuryConfig(
        database_url="memory://", card_provider="acme", adapters=[AcmeSettings(region="us")]
    )
)
report["coded_region"] = coded.payments.provider.api.region
coded.close()
try:
    config_from_env({"TREASURY_ACME_REGION": "mars"})
except BadSetting as error:
    report["bad_region"] = error.message
report["default_region"] = provider.api.region

def intent_request(account_id, amount, method):
    return CreateIntentRequest(
        account_id=account_id,
        billing_amount=amount,
        billing_currency="EUR",
        payment_type="Card Payment",
        capture_method=method,
    )

async def main():
    created = await treasury.companies.create_company("Shop")
    company, account = created.company.id, created.merchant_account.id
    card = CardData("4242424242424242", 12, 2045, "123")
    intent = await treasury.payments.create(company, intent_request(account, 1000, "manual"))
    paid = await treasury.payments.pay(intent.payment_intent_lookup_id, card)
    report["after_pay"] = paid.intent.status.value
    captured = await treasury.payments.capture(company, intent.id)
    report["after_capture"] = captured.status.value
    refund = await treasury.payments.refund(company, intent.id, amount=300)
    report["refund"] = refund.status.value
    charge = provider.api.charges[captured.provider_reference]
    report["acme_charge"] = [charge.id, charge.status, charge.captured, charge.refunded]
    declined = await treasury.payments.create(company, intent_request(account, 500, "automatic"))
    try:
        await treasury.payments.pay(
            declined.payment_intent_lookup_id, CardData("4000000000000002", 12, 2045, "123")
        )
    except CardError as error:
        report["decline"] = error.failure_reason
    provider.api.available = False
    outage = await treasury.payments.create(company, intent_request(account, 500, "automatic"))
    try:
        await treasury.payments.pay(outage.payment_intent_lookup_id, card)
    except Exception as error:
        report["outage"] = [type(error).__name__, str(error)]

asyncio.run(main())
check_invariants(treasury.storage)
report["invariants"] = "ok"
treasury.close()
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example package pip-installed into a directory of its own."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--target",
            str(target),
            # Offline and with this environment's hatchling: treasury-core is already here.
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--quiet",
            str(PACKAGE),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return target


def _run(extra_path: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    paths = [str(extra_path)] if extra_path is not None else []
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    result = subprocess.run(
        [sys.executable, "-c", _PAY_THROUGH_ACME],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


def test_the_installed_package_declares_its_entry_point(site: Path) -> None:
    (dist_info,) = site.glob("acme_cards-*.dist-info")
    entry_points = (dist_info / "entry_points.txt").read_text(encoding="utf-8")
    assert "[treasury]\nacme = acme_cards.plugin" in entry_points


def test_configuration_picks_the_plugin_and_payments_go_through_it(site: Path) -> None:
    report = _run(site)
    assert "acme" in report["entry_points"]
    assert report["provider"] == "acme_cards.provider.AcmeCardProvider"
    assert report["from_env"] == "AcmeCardProvider"  # TREASURY_CARD_PROVIDER=acme
    # Its own settings model: from the environment, in code, defaults, one-line refusals, and
    # its variables are known ones (no typo warning).
    assert (report["from_env_region"], report["coded_region"]) == ("us", "us")
    assert report["default_region"] == "eu"
    assert report["unknown"] == []
    assert str(report["bad_region"]).startswith("TREASURY_ACME_REGION='mars' is not valid: ")
    assert report["after_pay"] == "AUTHORIZED"
    assert report["after_capture"] == "PROCESSED"
    assert report["refund"] == "succeeded"
    # Acme's own books agree: one charge, 1000 captured, 300 refunded.
    assert report["acme_charge"][1:] == ["captured", 1000, 300]
    assert str(report["acme_charge"][0]).startswith("acme_ch_")
    assert report["decline"] == "card_declined"  # Acme's do_not_honor, translated
    assert report["outage"] == [
        "ProviderError",
        "The card provider is unavailable; try again later",
    ]
    assert report["invariants"] == "ok"
    # A name no plugin registers is a clear error that lists the names that are registered.
    assert str(report["typo"]).startswith("No card_provider adapter named 'acme-typo'")
    assert "acme" in str(report["typo"]).split("registered: ")[1].split(", ")


def test_without_the_package_the_name_is_unknown() -> None:
    # The control: nothing but the installed entry point makes "acme" known.
    report = _run(None)
    assert "acme" not in report["entry_points"]
    assert str(report["acme"]).startswith("No card_provider adapter named 'acme'")
