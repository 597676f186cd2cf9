"""Companies, merchant accounts, API keys and the operator's keys: issuing, authenticating,
revoking."""

from __future__ import annotations

import hmac
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
from treasury_core.operators import (
    OPERATOR_KEY_PREFIX,
    OperatorKey,
    OperatorPrincipal,
    is_operator_key,
)
from treasury_core.ports import Clock, IdSource, Storage, UnitOfWork
from treasury_core.services.key_cache import KeyCache
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


#: The id prefix of operator keys; a name may not start with it, so ``revoke ID_OR_NAME``
#: is never ambiguous.
_OPERATOR_KEY_ID = "opk"


class CompanyService:
    """Tenancy: who a key belongs to and what it may do."""

    def __init__(
        self, *, storage: Storage, clock: Clock, ids: IdSource, key_cache_seconds: float = 0.0
    ) -> None:
        """``key_cache_seconds``: how long a successful key lookup is reused by this process
        (0: never). A key revoked through this service stops working at once here; in other
        processes, within that many seconds."""
        self._storage = storage
        self._clock = clock
        self._ids = ids
        self._key_cache: KeyCache[Principal] = KeyCache(seconds=key_cache_seconds)
        self._operator_cache: KeyCache[OperatorPrincipal] = KeyCache(seconds=key_cache_seconds)

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
        name = _valid_name(name, "A company name")
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
                for key_id in revoked:
                    uow.dashboard_sessions.end_for_key(key_id, now)
            return RotatedKey(key, raw, tuple(revoked))

        rotated = await self._storage.run(rotate)
        if rotated.revoked_key_ids:
            self._forget_keys(set(rotated.revoked_key_ids))
        return rotated

    async def revoke_api_key(self, key_id: str) -> datetime:
        """Revoke a key at once, and end the dashboard sessions it opened; the time of
        revocation, as stored.

        :class:`NotFound` for a key that does not exist or is already revoked."""
        now = self._clock.now()

        def revoke(uow: UnitOfWork) -> bool:
            if not uow.companies.revoke_api_key(key_id, now):
                return False
            # The key's dashboard sessions end with it, in its transaction.
            uow.dashboard_sessions.end_for_key(key_id, now)
            return True

        revoked = await self._storage.run(revoke)
        self._forget_keys({key_id})
        if not revoked:
            raise NotFound(f"No such API key: {key_id}", param="key_id")
        return now

    def _forget_keys(self, key_ids: set[str]) -> None:
        self._key_cache.forget(key_ids)

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
        if cached is not None:
            return cached
        generation = self._key_cache.generation
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
        self._key_cache.put(digest, principal, generation)
        return principal

    async def create_operator_key(self, name: str) -> tuple[OperatorKey, str]:
        """Issue an operator key called ``name``; the stored key and the raw key (shown once).

        :class:`ValidationFailed` for a bad name or one a live operator key already has."""
        name = _operator_key_name(name)
        raw = OPERATOR_KEY_PREFIX + self._ids.token(24)
        key = OperatorKey(
            id=self._ids.new_id(_OPERATOR_KEY_ID),
            name=name,
            key_hash=hash_api_key(raw),
            prefix=raw[:7],
            created_at=self._clock.now(),
        )

        def create(uow: UnitOfWork) -> bool:
            return uow.operator_keys.add(key)

        if not await self._storage.run(create):
            raise ValidationFailed(
                f"An operator key named {name!r} already exists; revoke it first or choose "
                "another name",
                param="name",
                code="operator_key_name_taken",
            )
        return key, raw

    async def operator_keys(self) -> list[OperatorKey]:
        """Every operator key, revoked ones too, oldest first (digests, never the keys)."""
        return await self._storage.run(lambda uow: uow.operator_keys.list(), write=False)

    async def revoke_operator_key(self, id_or_name: str) -> OperatorKey:
        """Revoke the live operator key with this id or name at once; the key as revoked.

        :class:`NotFound` when no live key has that id or name (nothing changes)."""
        now = self._clock.now()

        def revoke(uow: UnitOfWork) -> OperatorKey | None:
            live = [k for k in uow.operator_keys.list() if k.revoked_at is None]
            found = next((k for k in live if k.id == id_or_name), None) or next(
                (k for k in live if k.name == id_or_name), None
            )
            if found is None or not uow.operator_keys.revoke(found.id, now):
                return None
            uow.dashboard_sessions.end_for_key(found.id, now)
            return found.model_copy(update={"revoked_at": now})

        revoked = await self._storage.run(revoke)
        if revoked is None:
            raise NotFound(f"No such operator key: {id_or_name}", param="key")
        self._operator_cache.forget({revoked.id})
        return revoked

    async def authenticate_operator(self, raw_key: str) -> OperatorPrincipal:
        """The operator for a presented operator key; :class:`AuthenticationFailed` for
        anything else (a merchant's key included: it is no operator key)."""
        if not is_operator_key(raw_key):
            raise AuthenticationFailed("Invalid API key provided")
        digest = hash_api_key(raw_key)
        cached = self._operator_cache.get(digest)
        if cached is not None:
            return cached
        generation = self._operator_cache.generation
        key = await self._storage.run(lambda uow: uow.operator_keys.by_hash(digest), write=False)
        # As for API keys: the digest compared in constant time, whatever the backend does.
        if (
            key is None
            or not hmac.compare_digest(key.key_hash, digest)
            or key.revoked_at is not None
        ):
            raise AuthenticationFailed("Invalid API key provided")
        principal = OperatorPrincipal(key_id=key.id, name=key.name)
        self._operator_cache.put(digest, principal, generation)
        return principal

    async def merchant_accounts(self, company_id: int) -> list[MerchantAccount]:
        """A company's merchant accounts."""
        return await self._storage.run(
            lambda uow: uow.companies.merchant_accounts(company_id), write=False
        )


def _valid_name(name: str, what: str) -> str:
    try:
        return _NAME.validate_python(name)
    except ValidationError as exc:
        raise ValidationFailed(
            f"{what} must be 1 to 255 characters, without control characters or "
            "bidirectional controls",
            param="name",
        ) from exc


def _operator_key_name(name: str) -> str:
    name = _valid_name(name, "An operator key name")
    if name.startswith(_OPERATOR_KEY_ID + "_"):
        raise ValidationFailed(
            f"An operator key name may not start with {_OPERATOR_KEY_ID}_ (key ids do)",
            param="name",
        )
    return name
