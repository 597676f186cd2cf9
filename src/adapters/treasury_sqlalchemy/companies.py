"""Companies, their merchant accounts and API keys over one SQLAlchemy connection."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, bindparam, insert, select, update

from treasury_core.companies import ApiKey, Company, KeyKind, MerchantAccount
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.hot import HotQuery

# Per-request lookups of the HTTP layer and the payment service, built once.
_MERCHANT_ACCOUNTS = (
    select(t.merchant_accounts)
    .where(t.merchant_accounts.c.company_id == bindparam("company_id"))
    .order_by(t.merchant_accounts.c.id)
)

_API_KEY_COLUMNS = tuple(c.name for c in t.api_keys.c)
_API_KEY_BY_HASH = HotQuery(
    select(t.api_keys).where(t.api_keys.c.key_hash == bindparam("key_hash"))
)


class SqlCompanies:
    """Companies, merchant accounts, API keys."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def add_company(self, name: str, created_at: datetime) -> Company:
        result = self._conn.execute(
            insert(t.companies).values(name=name, created_at=created_at).returning(t.companies.c.id)
        )
        return Company(id=result.scalar_one(), name=name, created_at=created_at)

    def get_company(self, company_id: int) -> Company | None:
        row = self._conn.execute(select(t.companies).where(t.companies.c.id == company_id)).first()
        return Company.model_validate(dict(row._mapping)) if row else None

    def add_merchant_account(
        self, company_id: int, name: str, created_at: datetime
    ) -> MerchantAccount:
        result = self._conn.execute(
            insert(t.merchant_accounts)
            .values(company_id=company_id, name=name, created_at=created_at)
            .returning(t.merchant_accounts.c.id)
        )
        return MerchantAccount(
            id=result.scalar_one(), company_id=company_id, name=name, created_at=created_at
        )

    def merchant_accounts(self, company_id: int) -> list[MerchantAccount]:
        rows = self._conn.execute(_MERCHANT_ACCOUNTS, {"company_id": company_id})
        return [MerchantAccount.model_validate(dict(r._mapping)) for r in rows]

    def add_api_key(self, key: ApiKey) -> None:
        self._conn.execute(insert(t.api_keys), [key.model_dump(mode="python")])

    def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        row = _API_KEY_BY_HASH.first(self._conn, {"key_hash": key_hash})
        if row is None:
            return None
        values = dict(zip(_API_KEY_COLUMNS, row, strict=True))
        values["kind"] = KeyKind(values["kind"])
        return ApiKey.model_validate(values)

    def revoke_api_key(self, key_id: str, revoked_at: datetime) -> bool:
        result = self._conn.execute(
            update(t.api_keys)
            .where(t.api_keys.c.id == key_id, t.api_keys.c.revoked_at.is_(None))
            .values(revoked_at=revoked_at)
        )
        return result.rowcount == 1

    def list_companies(self) -> list[Company]:
        rows = self._conn.execute(select(t.companies).order_by(t.companies.c.id))
        return [Company.model_validate(dict(r._mapping)) for r in rows]

    def api_keys(self, company_id: int) -> list[ApiKey]:
        rows = self._conn.execute(
            select(t.api_keys)
            .where(t.api_keys.c.company_id == company_id)
            .order_by(t.api_keys.c.created_at, t.api_keys.c.id)
        )
        return [
            ApiKey.model_validate({**r._mapping, "kind": KeyKind(r._mapping["kind"])}) for r in rows
        ]
