"""Companies, merchant accounts and API keys: issuing, authenticating, revoking."""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError

from treasury_core.companies import (
    ApiKey,
    Company,
    KeyKind,
    MerchantAccount,
    Principal,
    hash_api_key,
    key_kind_of,
)
from treasury_core.errors import AuthenticationFailed, NotFound, ValidationFailed
from treasury_core.ports import Clock, IdSource, Storage, UnitOfWork
from treasury_core.validation import Name

_NAME: TypeAdapter[str] = TypeAdapter(Name)


@dataclass(frozen=True, slots=True)
class CreatedCompany:
    """A new company with its first merchant account and keys; the raw keys are shown only here."""

    company: Company
    merchant_account: MerchantAccount
    secret_key: str
    publishable_key: str


#: At most this many keys are cached at once.
_KEY_CACHE_MAX = 10_000


class CompanyService:
    """Tenancy: who a key belongs to and what it may do."""

    def __init__(
        self, storage: Storage, clock: Clock, ids: IdSource, *, key_cache_seconds: float = 0.0
    ) -> None:
        """``key_cache_seconds``: how long a successful key lookup is reused by this process
        (0: never). A key revoked through this service stops working at once here; in other
        processes, within that many seconds."""
        self._storage = storage
        self._clock = clock
        self._ids = ids
        self._key_cache_seconds = key_cache_seconds
        # digest -> (principal, monotonic deadline); only keys that authenticated are kept.
        self._key_cache: dict[str, tuple[Principal, float]] = {}
        # Bumped by every revocation: a lookup that started before one is not cached.
        self._revocations = 0

    def _new_key(self, company_id: int, kind: KeyKind) -> tuple[ApiKey, str]:
        raw = kind.prefix + self._ids.token(24)
        key = ApiKey(
            id=self._ids.new_id("key"),
            company_id=company_id,
            kind=kind,
            key_hash=hash_api_key(raw),
            prefix=raw[:7],
            created_at=self._clock.now(),
        )
        return key, raw

    async def create_company(self, name: str) -> CreatedCompany:
        """Create a company, its first merchant account, and one key of each kind."""
        try:
            name = _NAME.validate_python(name)
        except ValidationError as exc:
            raise ValidationFailed(
                "A company name must be 1 to 255 characters, without control characters",
                param="name",
            ) from exc
        now = self._clock.now()

        def create(uow: UnitOfWork) -> CreatedCompany:
            company = uow.companies.add_company(name, now)
            merchant = uow.companies.add_merchant_account(company.id, f"{name} (default)", now)
            secret, secret_raw = self._new_key(company.id, KeyKind.SECRET)
            publishable, publishable_raw = self._new_key(company.id, KeyKind.PUBLISHABLE)
            uow.companies.add_api_key(secret)
            uow.companies.add_api_key(publishable)
            return CreatedCompany(company, merchant, secret_raw, publishable_raw)

        return await self._storage.run(create)

    async def create_api_key(self, company_id: int, kind: KeyKind) -> tuple[ApiKey, str]:
        """Issue another key; returns the stored key and the raw secret (shown once)."""

        def create(uow: UnitOfWork) -> tuple[ApiKey, str]:
            if uow.companies.get_company(company_id) is None:
                raise NotFound(f"No such company: {company_id}", param="company_id")
            key, raw = self._new_key(company_id, kind)
            uow.companies.add_api_key(key)
            return key, raw

        return await self._storage.run(create)

    async def revoke_api_key(self, key_id: str) -> None:
        """Revoke a key at once."""
        now = self._clock.now()
        revoked = await self._storage.run(lambda uow: uow.companies.revoke_api_key(key_id, now))
        self._revocations += 1
        self._key_cache = {
            digest: entry for digest, entry in self._key_cache.items() if entry[0].key_id != key_id
        }
        if not revoked:
            raise NotFound(f"No such API key: {key_id}", param="key_id")

    async def authenticate(self, raw_key: str) -> Principal:
        """The principal for a presented key; :class:`AuthenticationFailed` for anything else."""
        kind = key_kind_of(raw_key)
        if kind is None:
            raise AuthenticationFailed("Invalid API key provided")
        digest = hash_api_key(raw_key)
        cached = self._key_cache.get(digest)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        revocations = self._revocations
        key = await self._storage.run(
            lambda uow: uow.companies.api_key_by_hash(digest), write=False
        )
        # The index finds the row by digest; comparing digests in constant time as well keeps a
        # storage backend's string comparison out of the timing picture.
        if (
            key is None
            or not hmac.compare_digest(key.key_hash, digest)
            or key.revoked_at is not None
            or key.kind is not kind
        ):
            raise AuthenticationFailed("Invalid API key provided")
        principal = Principal(company_id=key.company_id, key_id=key.id, kind=key.kind)
        if self._key_cache_seconds > 0 and revocations == self._revocations:
            if len(self._key_cache) >= _KEY_CACHE_MAX:
                self._key_cache.clear()  # bounded; the next lookups refill it
            self._key_cache[digest] = (principal, time.monotonic() + self._key_cache_seconds)
        return principal

    async def merchant_accounts(self, company_id: int) -> list[MerchantAccount]:
        """A company's merchant accounts."""
        return await self._storage.run(
            lambda uow: uow.companies.merchant_accounts(company_id), write=False
        )
