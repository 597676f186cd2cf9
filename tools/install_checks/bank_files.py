"""The ``bank-files`` extra: ``TREASURY_BANK_RAIL=files`` exports a withdrawal as pain.001 and
settles it from a camt.053 statement.

On ``memory://``, through the services (no server needed). ``tools/check_installs.py`` runs it
in a fresh environment holding ``treasury-core[bank-files]``. Prints ``bank files: ok``.
"""

from __future__ import annotations

import asyncio

from treasury_core import (
    CreateVirtualAccountRequest,
    CreateWalletRequest,
    CreateWithdrawalRequest,
    RegisterBankAccountRequest,
    TreasuryConfig,
    bootstrap,
)

STATEMENT = """<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.02"><BkToCstmrStmt><Stmt>
<Id>S1</Id><FrToDt><FrDtTm>2026-01-01T00:00:00</FrDtTm><ToDtTm>2026-01-31T23:59:59</ToDtTm>
</FrToDt><Acct><Id><IBAN>NL91ABNA0417164300</IBAN></Id><Ccy>EUR</Ccy></Acct>
<Ntry><Amt Ccy="EUR">12.00</Amt><CdtDbtInd>DBIT</CdtDbtInd><Sts>BOOK</Sts>
<BookgDt><Dt>2026-01-02</Dt></BookgDt><AcctSvcrRef>B1</AcctSvcrRef>
<NtryDtls><TxDtls><Refs><EndToEndId>{withdrawal}</EndToEndId></Refs></TxDtls></NtryDtls></Ntry>
</Stmt></BkToCstmrStmt></Document>"""


async def main() -> None:
    """Fund a wallet, withdraw, export, import the bank's booking; any error exits non-zero."""
    treasury = bootstrap(
        TreasuryConfig(
            database_url="memory://",
            bank_rail="files",
            bank_debtor_name="Acme Treasury BV",
            bank_debtor_iban="NL91ABNA0417164300",
        )
    )
    try:
        company = (await treasury.companies.create_company("Acme")).company.id
        wallet = await treasury.wallets.create(
            company, CreateWalletRequest(name="E", currency_id="EUR")
        )
        account = await treasury.virtual_accounts.create(
            company, CreateVirtualAccountRequest(wallet_id=wallet.id, source_currency="EUR")
        )
        await treasury.virtual_accounts.incoming(None, account.id, 5_000)
        bank = await treasury.bank_accounts.register(
            company,
            RegisterBankAccountRequest(
                bank_name="Commerzbank",
                account_name="Jane Doe",
                account_number="DE89370400440532013000",
                routing_number="COBADEFFXXX",
                currency_id="EUR",
            ),
        )
        withdrawal = await treasury.withdrawals.create(
            company,
            CreateWithdrawalRequest(
                wallet_id=wallet.id,
                from_amount=1_200,
                from_currency_id="EUR",
                bank_account_id=bank.id,
            ),
        )
        outcome = await treasury.bank.export("EUR")
        assert outcome.export is not None
        assert withdrawal.id in outcome.export.content
        statement = STATEMENT.format(withdrawal=withdrawal.id).encode()
        result = await treasury.bank.import_statement(statement)
        assert result.imported == 1, result
        assert result.unmatched == 0, result
        done = await treasury.withdrawals.get(company, withdrawal.id)
        assert done.status.value == "completed", done
    finally:
        treasury.close()
    print("bank files: ok")


if __name__ == "__main__":
    asyncio.run(main())
