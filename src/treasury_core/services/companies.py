"""Companies, merchant accounts and API keys: issuing, authenticating, revoking."""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass
from datetime import datetime

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


@dataclass(frozen=True, slots=True)
class RotatedKey:
    """A key issued by :meth:`CompanyService.rotate_api_key`; the raw key is shown only here."""

    key: ApiKey
    raw_key: str
    #: The ids of the keys the rotation revoked (none with ``revoke_old=False``).
    revoked_key_ids: tuple[str, ...]


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
                "A company name must be 1 to 255 characters, without control characters or "
                "bidirectional controls",
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

    async def rotate_api_key(
        self, company_id: int, kind: KeyKind, *, revoke_old: bool = True
    ) -> RotatedKey:
        """Issue a new key of ``kind`` and, unless ``revoke_old`` is false, revoke the company's
        other live keys of that kind, in one transaction.

        With ``revoke_old=False`` the old keys keep working until :meth:`revoke_api_key`, so the
        new one can be deployed first. Other processes stop accepting a revoked key within
        their ``api_key_cache_seconds``.
        """
        now = self._clock.now()

        def rotate(uow: UnitOfWork) -> RotatedKey:
            if uow.companies.get_company(company_id) is None:
                raise NotFound(f"No such company: {company_id}", param="company_id")
            old = [
                k.id
                for k in uow.companies.api_keys(company_id)
                if k.kind is kind and k.revoked_at is None
            ]
            key, raw = self._new_key(company_id, kind)
            uow.companies.add_api_key(key)
            revoked: list[str] = []
            if revoke_old:
                revoked = [k for k in old if uow.companies.revoke_api_key(k, now)]
            return RotatedKey(key, raw, tuple(revoked))

        rotated = await self._storage.run(rotate)
        if rotated.revoked_key_ids:
            self._forget_keys(set(rotated.revoked_key_ids))
        return rotated

    async def revoke_api_key(self, key_id: str) -> datetime:
        """Revoke a key at once; the time of revocation, as stored.

        :class:`NotFound` for a key that does not exist or is already revoked."""
        now = self._clock.now()
        revoked = await self._storage.run(lambda uow: uow.companies.revoke_api_key(key_id, now))
        self._forget_keys({key_id})
        if not revoked:
            raise NotFound(f"No such API key: {key_id}", param="key_id")
        return now

    def _forget_keys(self, key_ids: set[str]) -> None:
        self._revocations += 1
        self._key_cache = {
            digest: entry
            for digest, entry in self._key_cache.items()
            if entry[0].key_id not in key_ids
        }

    async def list_companies(self) -> list[Company]:
        """Every company, oldest first."""
        return await self._storage.run(lambda uow: uow.companies.list_companies(), write=False)

    async def get_company(self, company_id: int) -> Company:
        """The company with this id (its ``name`` is the name shown to its customers), or
        :class:`NotFound`."""
        found = await self._storage.run(
            lambda uow: uow.companies.get_company(company_id), write=False
        )
        if found is None:
            raise NotFound(f"No such company: {company_id}", param="company_id")
        return found

    async def api_keys(self, company_id: int) -> list[ApiKey]:
        """A company's keys, revoked ones too, oldest first: ids, kinds and prefixes, no
        secrets (only their digests are stored)."""
        return await self._storage.run(lambda uow: uow.companies.api_keys(company_id), write=False)

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
