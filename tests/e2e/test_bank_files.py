"""Issue 23's round trip on the files rail, on SQLite and PostgreSQL.

Withdrawals are exported by ``treasury bank export`` to a pain.001 file (checked against the
schema), a camt.053 is built from that file the way the bank would answer it (booking one
withdrawal, returning another, crediting a virtual account and a deposit, and a line nobody
knows), ``treasury bank import`` applies it, balances and events are as expected, and a second
import changes nothing. The same statement pushed over ``POST /api/v1/bank-statements`` by
another company touches nothing of this one's; a crash between recording an export and writing
its file is repaired by the next run with the same file. The commands run in-process (click's
runner, on a thread of their own: they start their own event loop) against the same database
the server under test uses, so there is one server start per database.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import replace
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sepaxml", reason="the bank-files extra is not installed")

import sepaxml
import xmlschema
from aiohttp.test_utils import TestClient
from click.testing import CliRunner, Result

from tests.bankfiles import Entry, camt053, payments_of
from tests.e2e.conftest import Tenant
from treasury_aiohttp.cli.commands import main
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.testing.fakes.clock import FakeClock

Client = TestClient[Any, Any]

DEBTOR = {
    "TREASURY_BANK_RAIL": "files",
    "TREASURY_BANK_DEBTOR_NAME": "Acme Treasury BV",
    "TREASURY_BANK_DEBTOR_IBAN": "NL91ABNA0417164300",
    "TREASURY_BANK_DEBTOR_BIC": "ABNANL2A",
}
XSD = Path(sepaxml.__file__).parent / "schemas" / "pain.001.001.03.xsd"
GERMAN = {
    "bank_name": "Commerzbank",
    "account_name": "Jürgen Müller",
    "account_number": "DE89 3704 0044 0532 0130 00",
    "routing_number": "COBADEFFXXX",
    "currency_id": "EUR",
}
FRENCH = {
    "bank_name": "BNP Paribas",
    "account_name": "Camille Durand",
    "account_number": "FR1420041010050500013M02606",
    "routing_number": "BNPAFRPPXXX",
    "currency_id": "EUR",
}
BRITISH = {
    "bank_name": "Barclays Bank",
    "account_name": "Jane Smith",
    "account_number": "31926819",
    "routing_number": "60-16-13",
    "currency_id": "GBP",
}


#: The commands run on the sandbox clock (wall time); the server's fake clock starts the same day.
TODAY = datetime.now(UTC).date()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime.combine(TODAY, time(9), UTC))


@pytest.fixture
def treasury(database_url: str, clock: FakeClock) -> Treasury:
    return bootstrap(
        TreasuryConfig(
            database_url=database_url,
            pool_size=4,
            withdrawal_fees={"*": (25, 100)},
            bank_rail="files",
            bank_debtor_name=DEBTOR["TREASURY_BANK_DEBTOR_NAME"],
            bank_debtor_iban=DEBTOR["TREASURY_BANK_DEBTOR_IBAN"],
            bank_debtor_bic=DEBTOR["TREASURY_BANK_DEBTOR_BIC"],
            # Above the API's 64 KiB, so the test shows the route's own limit.
            bank_statement_max_bytes=128 * 1024,
        ),
        clock=clock,
        wall_clock=clock,
    )


async def cli(database_url: str, *args: str) -> Result:
    """``treasury …`` in-process, on a thread (it runs its own event loop)."""
    env = {"TREASURY_DATABASE_URL": database_url, **DEBTOR}
    return await asyncio.to_thread(
        CliRunner().invoke, main, list(args), env=env, catch_exceptions=False
    )


async def call(
    client: Client, tenant: Tenant, method: str, path: str, body: Any = None, status: int = 200
) -> Any:
    response = await client.request(method, path, json=body, headers=tenant.auth)
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def push(client: Client, key: str, data: bytes, status: int = 200) -> Any:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/xml"}
    response = await client.post("/api/v1/bank-statements", data=data, headers=headers)
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def balance(client: Client, tenant: Tenant, wallet_id: str) -> tuple[int, int]:
    got = await call(client, tenant, "GET", f"/api/v1/wallet/{wallet_id}/balance")
    return got["balance"], got["available_balance"]


async def event_types(client: Client, tenant: Tenant, treasury: Treasury) -> list[str]:
    await treasury.notifications.run_due()
    return sorted(e["type"] for e in await call(client, tenant, "GET", "/api/v1/events?limit=100"))


async def test_withdrawals_out_statement_in_round_trip(
    client: Client,
    treasury: Treasury,
    tenant: Tenant,
    other_tenant: Tenant,
    database_url: str,
    tmp_path: Path,
) -> None:
    async def post(path: str, body: Any, status: int = 200) -> Any:
        return await call(client, tenant, "POST", path, body, status)

    async def get(path: str) -> Any:
        return await call(client, tenant, "GET", path)

    wallet = (await post("/api/v1/wallet", {"name": "EUR", "currency_id": "EUR"}))["id"]
    va = await post("/api/v1/virtual-account", {"wallet_id": wallet, "source_currency": "EUR"})
    assert va["iban"]
    # Funds to pay out with, through the sandbox control that keeps working beside the rail.
    await post(f"/api/v1/sandbox/virtual-accounts/{va['id']}/incoming", {"amount": 100_000})
    german = (await post("/api/v1/bank-account", GERMAN))["id"]
    french = (await post("/api/v1/bank-account", FRENCH))["id"]
    british = (await post("/api/v1/bank-account", BRITISH))["id"]

    def withdraw(amount: int, bank: str, reference: str) -> dict[str, Any]:
        return {
            "wallet_id": wallet,
            "from_amount": amount,
            "from_currency_id": "EUR",
            "bank_account_id": bank,
            "reference": reference,
        }

    booked = await post("/api/v1/withdraw", withdraw(10_000, german, "Payout 1"))
    returned = await post("/api/v1/withdraw", withdraw(20_000, french, "Payout 2"))
    sterling = await post("/api/v1/withdraw", withdraw(5_000, british, "Payout 3"))
    deposit = await post(
        "/api/v1/deposit",
        {
            "wallet_id": wallet,
            "from_amount": 7_500,
            "from_currency_id": "EUR",
            "reference": "INV-2026-001",
        },
    )
    # Nothing settles on a timer on this rail: a day later everything is still pending.
    await post("/api/v1/sandbox/clock/advance", {"seconds": 3 * 24 * 3600})
    for movement in (booked, returned, sterling):
        assert (await get(f"/api/v1/withdraw/{movement['id']}"))["status"] == "pending"
    assert (await get(f"/api/v1/deposit/{deposit['id']}"))["status"] == "pending"
    # 100,000 in; 10,000 + 125, 20,000 + 225 and 5,000 (in GBP) + 75 held.
    assert await balance(client, tenant, wallet) == (100_000, 100_000 - 10_125 - 20_225 - 5_075)

    # --- export ------------------------------------------------------------------------------
    out = tmp_path / "outbox"
    exported = await cli(database_url, "bank", "export", "--out", str(out))
    assert exported.exit_code == 0, exported.output
    assert "2 withdrawal(s), 30000 EUR" in exported.output
    assert f"left pending {sterling['id']}: SEPA credit transfers carry EUR only" in (
        exported.output
    )
    [payment_file] = list(out.iterdir())
    xmlschema.XMLSchema(str(XSD)).validate(payment_file.read_text())
    paid = {p.end_to_end: p for p in payments_of(payment_file.read_bytes())}
    assert set(paid) == {booked["id"], returned["id"]}
    assert (paid[booked["id"]].amount, paid[booked["id"]].iban) == ("100.00", GERMAN_IBAN)
    # A second run exports nothing again, and writes no second file.
    again = await cli(database_url, "bank", "export", "--out", str(out))
    assert "no withdrawals to export" in again.output, again.output
    assert list(out.iterdir()) == [payment_file]

    # --- the bank's statement ------------------------------------------------------------------
    day = TODAY
    entries = [
        Entry(
            "E1",
            credit=False,
            amount=paid[booked["id"]].amount,
            end_to_end=booked["id"],
            booked=day,
        ),
        Entry(
            "E2",
            credit=True,
            amount=paid[returned["id"]].amount,
            end_to_end=returned["id"],
            return_code="AC04",
            return_info="Account closed",
            booked=day,
        ),
        Entry(
            "E3",
            credit=True,
            amount="300.00",
            creditor_iban=va["iban"],
            remittance="Invoice 7",
            booked=day,
        ),
        # The payer quotes the reference the deposit's instructions show: its id.
        Entry("E4", credit=True, amount="75.00", remittance=f"INV {deposit['id']}", booked=day),
        Entry("E5", credit=True, amount="12.34", remittance="who is this", booked=day),
    ]
    statement = camt053(entries, account=DEBTOR["TREASURY_BANK_DEBTOR_IBAN"])
    before = await event_types(client, tenant, treasury)
    statement_file = tmp_path / "statement.xml"
    statement_file.write_bytes(statement)
    imported = await cli(database_url, "bank", "import", str(statement_file))
    assert imported.exit_code == 0, imported.output
    assert "5 line(s) applied, 0 already imported, 1 unmatched" in imported.output

    assert (await get(f"/api/v1/withdraw/{booked['id']}"))["status"] == "completed"
    failed = await get(f"/api/v1/withdraw/{returned['id']}")
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "withdrawal_returned"
    assert "AC04" in failed["error"]["message"] and "Account closed" in failed["error"]["message"]
    assert (await get(f"/api/v1/withdraw/{sterling['id']}"))["status"] == "pending"
    assert (await get(f"/api/v1/deposit/{deposit['id']}"))["status"] == "completed"
    # 100,000 − 10,125 paid out + 30,000 at the virtual account + 7,500 deposited; the
    # returned 20,225 is back; the sterling withdrawal's 5,075 is still held.
    settled = (127_375, 127_375 - 5_075)
    assert await balance(client, tenant, wallet) == settled
    after = await event_types(client, tenant, treasury)
    new_events = list(after)
    for kind in before:
        new_events.remove(kind)
    assert sorted(new_events) == sorted(
        [
            "treasury.withdrawal.completed",
            "treasury.withdrawal.failed",
            "treasury.deposit.completed",  # the virtual account credit
            "treasury.deposit.completed",  # the deposit quoted by its id
        ]
    )

    # --- the same statement again changes nothing ------------------------------------------------
    repeated = await cli(database_url, "bank", "import", str(statement_file))
    assert "0 line(s) applied, 5 already imported, 0 unmatched" in repeated.output
    assert await balance(client, tenant, wallet) == settled
    assert await event_types(client, tenant, treasury) == after
    unmatched = await cli(database_url, "bank", "unmatched")
    assert "E5" in unmatched.output and "no virtual account, deposit or withdrawal" in (
        unmatched.output
    )
    assert "E1" not in unmatched.output

    # --- reconciliation ------------------------------------------------------------------------
    # The commands post on their own (sandbox) clock, today; this server's fake clock started
    # today and was moved 3 days on: the period covers both.
    start, end = TODAY - timedelta(days=1), TODAY + timedelta(days=4)
    period = {"start": start, "end": end, "account": DEBTOR["TREASURY_BANK_DEBTOR_IBAN"]}
    lines = camt053(entries, **period)  # type: ignore[arg-type]
    (tmp_path / "period.xml").write_bytes(lines)
    differs = await cli(
        database_url, "reconcile", "--wallet", wallet, "--statement", str(tmp_path / "period.xml")
    )
    assert differs.exit_code == 1, differs.output
    # The funding came through the sandbox control, not this statement; E5 is nobody's.
    assert "matched: 4\n" in differs.output
    assert "ours only: 1\n" in differs.output and "deposit +100000 EUR" in differs.output
    assert "bank only: 1\n" in differs.output and "E5 +1234 EUR" in differs.output
    assert f"returned withdrawal {returned['id']}" in differs.output
    funding = Entry("E0", credit=True, amount="1000.00", booked=day)
    agreeing = camt053([funding, *entries[:4]], **period)  # type: ignore[arg-type]
    (tmp_path / "agreeing.xml").write_bytes(agreeing)
    agrees = await cli(
        database_url, "reconcile", "--wallet", wallet, "--statement", str(tmp_path / "agreeing.xml")
    )
    assert agrees.exit_code == 0, agrees.output
    assert "matched: 5\n" in agrees.output and agrees.output.rstrip().endswith("agrees")
    # The wallet statement of the same days tells the same story: what crossed the bank
    # (+1,000.00 funding, −100.00 paid, +300.00 and +75.00 received) plus the 1.25 fee.
    wallet_statement = await treasury.statements.statement(tenant.company_id, wallet, start, end)
    totals = {t.type.value: t.balance_amount for t in wallet_statement.totals}
    assert totals["deposit"] + totals["withdrawal"] == 100_000 - 10_000 + 30_000 + 7_500
    assert totals["withdrawal_fee"] == -125
    assert wallet_statement.closing_balance == settled[0]

    # --- pushed over HTTP: a company's key is refused, the operator's finds the lines known -----
    for key in (other_tenant.secret_key, tenant.secret_key):
        refused = await push(client, key, statement, status=403)
        assert refused["error"]["code"] == "operator_key_required"
    assert await balance(client, tenant, wallet) == settled
    _, operator = await treasury.companies.create_operator_key("ops")
    pushed_again = await push(client, operator, statement)
    assert (pushed_again["imported"], pushed_again["already_imported"]) == (0, 5)
    # The same bookings with their references in another case and spacing, in another
    # statement: still the bookings the command imported.
    respelled = camt053(
        [
            replace(e, ref=f" {(e.ref or '').lower()[:1]} {(e.ref or '').lower()[1:]}")
            for e in entries
        ],
        statement_id="STMT-1-AGAIN",
        account=DEBTOR["TREASURY_BANK_DEBTOR_IBAN"].lower(),
    )
    known = await push(client, operator, respelled)
    assert (known["imported"], known["already_imported"]) == (0, 5)
    assert await balance(client, tenant, wallet) == settled
    # A statement of an account that is not the treasury's, or MT940 sent as XML, is refused.
    forged = camt053(
        [Entry("X1", credit=True, amount="1000000.00", creditor_iban=va["iban"])],
        account="XX00FAKE",
    )
    refused = await push(client, operator, forged, status=400)
    assert (
        "account XX00FAKE is not one of the treasury's bank accounts"
        in (refused["error"]["message"])
    )
    mt940 = b":20:MT1\n:25:NL91ABNA0417164300\n:28C:1/1\n:60F:C260101EUR0,00\n:62F:C260101EUR0,00\n"
    refused = await push(client, operator, mt940, status=400)
    assert "must be a camt.053 or camt.054 XML document" in refused["error"]["message"]
    assert await balance(client, tenant, wallet) == settled
    # The operator's push of a new statement settles the company's new deposit.
    second = await post(
        "/api/v1/deposit",
        {"wallet_id": wallet, "from_amount": 2_000, "from_currency_id": "EUR"},
    )
    pushed = camt053(
        [Entry("E6", credit=True, amount="20.00", remittance=second["id"], booked=day)],
        statement_id="STMT-2",
    )
    ours = await push(client, operator, pushed)
    assert [line["outcome"] for line in ours["lines"]] == ["deposit_completed"]
    assert ours["lines"][0]["matched_id"] == second["id"]
    assert await balance(client, tenant, wallet) == (settled[0] + 2_000, settled[1] + 2_000)
    assert (await push(client, operator, pushed))["already_imported"] == 1

    # --- a malformed statement is refused whole -----------------------------------------------
    third = await post(
        "/api/v1/deposit", {"wallet_id": wallet, "from_amount": 100, "from_currency_id": "EUR"}
    )
    broken = camt053(
        [
            Entry("E7", credit=True, amount="1.00", remittance=third["id"]),
            Entry("E8", credit=True, amount="1.005"),
        ]
    )
    refused = await push(client, operator, broken, status=400)
    assert refused["error"]["code"] == "statement_invalid"
    assert "entry 2" in refused["error"]["message"]
    assert (await get(f"/api/v1/deposit/{third['id']}"))["status"] == "pending"
    response = await client.post(
        "/api/v1/bank-statements",
        json={"statement": "x"},
        headers={"Authorization": f"Bearer {operator}"},
    )
    assert response.status == 415
    # Larger than other bodies may be, within the statement limit: read (and refused as XML).
    # Amounts outside the format's own form, or past the limits, are 400 with the line and
    # the reason, never 500 (an amount once overflowed the database's integer).
    for amount, why in (
        ("1e30", "is not an amount"),
        ("1E+2", "is not an amount"),
        ("\u0661\u0660\u0660", "is not an amount"),
        ("\u00a0100.00", "is not an amount"),
        ("92233720368547758.08", "more than 18 digits"),
        ("999999999999.99", "above the largest amount"),
    ):
        bad = camt053([Entry("E9", credit=True, amount=amount, remittance=third["id"])])
        refused = await push(client, operator, bad, status=400)
        assert refused["error"]["code"] == "statement_invalid"
        assert "entry 1" in refused["error"]["message"] and why in refused["error"]["message"]
    assert (await get(f"/api/v1/deposit/{third['id']}"))["status"] == "pending"
    padded = b"<Document>" + b" " * (100 * 1024) + b"</Document>"
    assert (await push(client, operator, padded, status=400))["error"]["code"] == (
        "statement_invalid"
    )
    too_large = await push(client, operator, b" " * (129 * 1024), status=413)
    assert too_large["error"]["type"] == "invalid_request_error"

    # --- a crash after recording an export, before writing its file -------------------------
    late = await post("/api/v1/withdraw", withdraw(1_000, german, "Payout 4"))
    recorded = await treasury.bank.export("EUR")  # recorded and marked; the file never written
    assert recorded.export is not None and recorded.export.withdrawal_ids == (late["id"],)
    repaired = await cli(database_url, "bank", "export", "--out", str(out), "--currency", "EUR")
    assert f"reproduced {out / recorded.export.file_name}" in repaired.output, repaired.output
    assert "no withdrawals to export" in repaired.output
    written = (out / recorded.export.file_name).read_bytes()
    assert hashlib.sha256(written).hexdigest() == recorded.export.sha256
    assert len(list(out.iterdir())) == 2
    assert (await cli(database_url, "bank", "export", "--out", str(out))).output.count(
        "reproduced"
    ) == 0


GERMAN_IBAN = "DE89370400440532013000"
