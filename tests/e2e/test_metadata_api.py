"""Issue 24, item 2 over HTTP: metadata on wallets, deposits, withdrawals, transfers, bank and
virtual accounts and PMTIs (payment intents: test_payment_links_api.py)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from tests.e2e.conftest import Tenant
from tests.e2e.test_treasury_api import USD_BANK, Client, events_of, get, post
from treasury_core import Treasury
from treasury_core.notifications.events import EventType

A = {"order_id": "A-1", "channel": "web"}


async def _update(client: Client, tenant: Tenant, path: str, pairs: Any, status: int = 200) -> Any:
    return await post(client, tenant, f"{path}/metadata", {"metadata": pairs}, status)


async def _listed(client: Client, tenant: Tenant, path: str, query: dict[str, str]) -> list[str]:
    return [r["id"] for r in await get(client, tenant, f"{path}?{urlencode(query)}")]


async def test_every_kind_takes_reads_merges_and_filters_metadata(
    client: Client, tenant: Tenant, other_tenant: Tenant, treasury: Treasury
) -> None:
    wallet = await post(
        client, tenant, "/api/v1/wallet", {"name": "W", "currency_id": "USD"} | {"metadata": A}
    )
    plain_wallet = await post(client, tenant, "/api/v1/wallet", {"name": "P", "currency_id": "USD"})
    assert wallet["metadata"] == A and plain_wallet["metadata"] == {}
    deposit = await post(
        client,
        tenant,
        "/api/v1/deposit",
        {
            "wallet_id": wallet["id"],
            "from_amount": 100_000,
            "from_currency_id": "USD",
            "metadata": A,
        },
    )
    await post(client, tenant, f"/api/v1/sandbox/deposits/{deposit['id']}/complete", {})
    bank = await post(client, tenant, "/api/v1/bank-account", {**USD_BANK, "metadata": A})
    withdrawal = await post(
        client,
        tenant,
        "/api/v1/withdraw",
        {
            "wallet_id": wallet["id"],
            "from_amount": 1_000,
            "from_currency_id": "USD",
            "bank_account_id": bank["id"],
            "metadata": A,
        },
    )
    transfer = await post(
        client,
        tenant,
        "/api/v1/transfer",
        {
            "from_wallet_id": wallet["id"],
            "to_wallet_id": plain_wallet["id"],
            "from_amount": 500,
            "metadata": A,
        },
    )
    other_transfer = await post(
        client,
        tenant,
        "/api/v1/transfer",
        {"from_wallet_id": wallet["id"], "to_wallet_id": plain_wallet["id"], "from_amount": 500},
    )
    virtual = await post(
        client,
        tenant,
        "/api/v1/virtual-account",
        {"wallet_id": wallet["id"], "source_currency": "USD", "metadata": A},
    )
    pmti = await post(
        client,
        tenant,
        "/api/v1/payment_method_token_intent",
        {
            "account_id": tenant.account_id,
            "payment_type": "Tokenization",
            "customer_email": "ada@example.com",
            "customer_phone_number": "+447700900123",
            "metadata": A,
        },
    )
    for made in (deposit, bank, withdrawal, transfer, virtual, pmti):
        assert made["metadata"] == A, made

    # Every read returns it.
    reads = {
        f"/api/v1/wallet/{wallet['id']}": wallet,
        f"/api/v1/deposit/{deposit['id']}": deposit,
        f"/api/v1/withdraw/{withdrawal['id']}": withdrawal,
        f"/api/v1/transfer/{transfer['id']}": transfer,
        f"/api/v1/payment_method_token_intent/{pmti['id']}": pmti,
    }
    for path in reads:
        assert (await get(client, tenant, path))["metadata"] == A, path

    # Events carry it: the deposit's completion, the transfer's.
    objects = {
        e.data["object"]["id"]: e.data["object"]
        for e in events_of(treasury, tenant.company_id)
        if e.type in (EventType.DEPOSIT_COMPLETED, EventType.TRANSFER_COMPLETED)
    }
    assert objects[deposit["id"]]["metadata"] == A
    assert objects[transfer["id"]]["metadata"] == A

    # Merge: a new key, a changed one, a deleted one; the answer is the record.
    updates = {
        f"/api/v1/wallet/{wallet['id']}": "W",
        f"/api/v1/deposit/{deposit['id']}": deposit["id"],
        f"/api/v1/withdraw/{withdrawal['id']}": withdrawal["id"],
        f"/api/v1/transfer/{transfer['id']}": transfer["id"],
        f"/api/v1/bank-account/{bank['id']}": bank["id"],
        f"/api/v1/virtual-account/{virtual['id']}": virtual["id"],
        f"/api/v1/payment_method_token_intent/{pmti['id']}": pmti["id"],
    }
    for path in updates:
        changed = await _update(client, tenant, path, {"channel": "", "order_id": "A-2", "n": "1"})
        assert changed["metadata"] == {"order_id": "A-2", "n": "1"}, path
        # Another company's key: not found, and nothing changed.
        missing = await _update(client, other_tenant, path, {"x": "y"}, 404)
        assert missing["error"]["code"] == "resource_missing"
    for path in reads:
        assert (await get(client, tenant, path))["metadata"] == {"order_id": "A-2", "n": "1"}

    # Lists filter on it.
    wanted = {"metadata[order_id]": "A-2"}
    assert await _listed(client, tenant, "/api/v1/wallets", wanted) == [wallet["id"]]
    assert await _listed(client, tenant, "/api/v1/withdrawals", wanted) == [withdrawal["id"]]
    assert await _listed(client, tenant, "/api/v1/transfers", wanted) == [transfer["id"]]
    assert await _listed(client, tenant, "/api/v1/virtual-accounts", wanted) == [virtual["id"]]
    assert await _listed(client, tenant, "/api/v1/deposits", wanted) == [deposit["id"]]
    assert await _listed(client, tenant, "/api/v1/bank-accounts", wanted) == [bank["id"]]
    assert await _listed(client, tenant, "/api/v1/bank-accounts", {"metadata[n]": "2"}) == []
    # With the other filters of a record list (issue 24 item 3), all applying.
    usd = {**wanted, "currency": "USD"}
    assert await _listed(client, tenant, "/api/v1/withdrawals", usd) == [withdrawal["id"]]
    assert (
        await _listed(client, tenant, "/api/v1/withdrawals", {**wanted, "status": "failed"}) == []
    )
    assert await _listed(client, tenant, "/api/v1/transfers", {"metadata[order_id]": "A-1"}) == []
    both = {"metadata[order_id]": "A-2", "metadata[n]": "1"}
    assert await _listed(client, tenant, "/api/v1/transfers", both) == [transfer["id"]]
    all_transfers = await _listed(client, tenant, "/api/v1/transfers", {})
    assert set(all_transfers) == {transfer["id"], other_transfer["id"]}
    for path in ("/api/v1/wallets", "/api/v1/transfers", "/api/v1/withdrawals"):
        assert await _listed(client, other_tenant, path, wanted) == []


async def test_bad_metadata_on_records_is_refused_and_changes_nothing(
    client: Client, tenant: Tenant
) -> None:
    bad = await post(
        client,
        tenant,
        "/api/v1/wallet",
        {"name": "W", "currency_id": "USD", "metadata": {"k" * 41: "v"}},
        400,
    )
    assert bad["error"]["param"] == "metadata[…]"
    assert await get(client, tenant, "/api/v1/wallets") == []
    bank = await post(client, tenant, "/api/v1/bank-account", USD_BANK)
    long_value = await _update(
        client, tenant, f"/api/v1/bank-account/{bank['id']}", {"note": "v" * 501}, 400
    )
    assert long_value["error"]["param"] == "metadata[note]"
    for path in ("/api/v1/deposit/dep_nothing", "/api/v1/wallet/wal_nothing", "/api/v1/transfer/x"):
        missing = await _update(client, tenant, path, {"a": "b"}, 404)
        assert missing["error"]["code"] == "resource_missing"
    not_strings = await _update(client, tenant, f"/api/v1/bank-account/{bank['id']}", {"n": 1}, 400)
    assert not_strings["error"]["param"] == "metadata.n"
