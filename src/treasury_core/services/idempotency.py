"""Claiming, completing and replaying idempotency keys (:mod:`treasury_core.idempotency`).

The caller says what a request is (its fingerprint) and how a service's result is kept (the
recorder a :class:`Claim`'s ticket carries); :func:`finish` stores that in the service's own
transaction, so the change and the record of its result commit together or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TypeVar

from treasury_core.companies import KeyKind
from treasury_core.errors import IdempotencyError, IdempotencyInFlight, ValidationFailed
from treasury_core.idempotency import (
    MAX_KEY_LENGTH,
    Claim,
    IdempotencyRecord,
    IdempotencyState,
    IdempotencyTicket,
    StoredResult,
    is_valid_key,
    scoped_key,
)
from treasury_core.ports import Clock, IdSource, Storage, UnitOfWork

R = TypeVar("R")

_CLAIM_ROUNDS = 3


@dataclass(frozen=True, slots=True)
class Replay:
    """The key was used before with the same request: answer with this result."""

    result: StoredResult


class IdempotencyService:
    """Keys are scoped to a company and a key kind; results are kept for ``ttl_seconds``."""

    def __init__(
        self, storage: Storage, clock: Clock, ids: IdSource, ttl_seconds: int, lease_seconds: int
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._ids = ids
        self._ttl = timedelta(seconds=ttl_seconds)
        self._lease = timedelta(seconds=lease_seconds)

    async def claim(
        self, company_id: int, key: str, fingerprint: str, *, kind: KeyKind
    ) -> Claim | Replay:
        """Take ``key``, presented with a key of ``kind``, for a request with ``fingerprint``, or
        say how to answer instead. The other kind's records under the same ``key`` are not seen.

        The caller authorizes the request first: a replay answers whoever presents the key.
        ``kind`` has no default: a publishable caller filed under the secret key's records
        would be answered what only a secret key may see.
        Raises :class:`IdempotencyError` (same key, other request) or
        :class:`IdempotencyInFlight` (same key, first request still running).
        """
        # Checked before scoping: scoped_key relies on a presented key being printable.
        if not is_valid_key(key):
            raise ValidationFailed(
                f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} printable ASCII characters",
                param="Idempotency-Key",
            )
        key = scoped_key(key, kind)
        now = self._clock.now()
        token = self._ids.token(16)

        def claim(uow: UnitOfWork) -> Claim | Replay:
            fresh = IdempotencyRecord(
                company_id=company_id,
                key=key,
                fingerprint=fingerprint,
                state=IdempotencyState.IN_FLIGHT,
                token=token,
                created_at=now,
                lease_until=now + self._lease,
            )
            # Every write below is conditional on the token read just before it. When another
            # request changed the row meanwhile (completed it: completion rotates the token),
            # the write matches nothing and we read again rather than act on stale state.
            for _ in range(_CLAIM_ROUNDS):
                current = uow.idempotency.get(company_id, key)
                if current is None:
                    if uow.idempotency.insert(fresh):
                        return Claim(company_id, key, token)
                    continue
                if current.created_at + self._ttl <= now:
                    if uow.idempotency.replace(fresh, current.token):  # expired: free again
                        return Claim(company_id, key, token)
                    continue
                if current.fingerprint != fingerprint:
                    raise IdempotencyError(
                        "Keys for idempotent requests can only be used with the same parameters "
                        "they were first used with",
                        param="Idempotency-Key",
                    )
                if current.state is IdempotencyState.COMPLETED and current.result is not None:
                    return Replay(current.result)
                if current.lease_until > now:
                    break
                # The first owner's lease ran out (its process died, or it gave back a key
                # bound to a record): take the key over, and with it the record to resume.
                if uow.idempotency.replace(
                    replace(fresh, created_at=current.created_at, resource=current.resource),
                    current.token,
                ):
                    return Claim(company_id, key, token, current.resource)
            raise IdempotencyInFlight(
                "A request with this Idempotency-Key is still being processed; retry later",
                param="Idempotency-Key",
            )

        return await self._storage.run(claim)

    async def complete(self, claim: Claim, result: StoredResult) -> None:
        """Store ``result`` for a claim in a transaction of its own (refusals, errors)."""

        def complete(uow: UnitOfWork) -> None:
            complete_in(
                uow, IdempotencyTicket(claim.company_id, claim.key, claim.token, _same), result
            )

        await self._storage.run(complete)

    async def purge_expired(self) -> int:
        """Delete records older than the retention window; how many went."""
        cutoff = self._clock.now() - self._ttl
        return await self._storage.run(lambda uow: uow.idempotency.purge(cutoff))

    async def release(self, claim: Claim) -> None:
        """Give the key back without a stored result (the request failed unexpectedly).

        A key bound to a record (:func:`bind`) is kept, free to take at once: the retry resumes
        that record. Any other is deleted, so the retry starts afresh.
        """
        now = self._clock.now()

        def release(uow: UnitOfWork) -> None:
            current = uow.idempotency.get(claim.company_id, claim.key)
            if current is None or current.token != claim.token:
                return  # completed or taken over meanwhile: no longer ours to give back
            if current.resource is None or current.state is not IdempotencyState.IN_FLIGHT:
                uow.idempotency.delete(claim.company_id, claim.key, claim.token)
            else:
                uow.idempotency.replace(replace(current, lease_until=now), claim.token)

        await self._storage.run(release)


def complete_in(uow: UnitOfWork, ticket: IdempotencyTicket[R], result: StoredResult) -> None:
    """Mark ``ticket``'s key completed with ``result`` inside the caller's transaction.

    Raises :class:`IdempotencyInFlight` if the claim was lost (its lease ran out and another
    request took the key); the caller's transaction then rolls back, so nothing happens twice.
    """
    current = uow.idempotency.get(ticket.company_id, ticket.key)
    if current is None or current.token != ticket.token:
        raise IdempotencyInFlight(
            "This Idempotency-Key was taken over by another request", param="Idempotency-Key"
        )
    # A new token on completion: a takeover that read the in-flight row before this commit
    # cannot overwrite the completed record (its conditional update no longer matches).
    done = replace(
        current, state=IdempotencyState.COMPLETED, result=result, token=ticket.token + ".done"
    )
    if not uow.idempotency.replace(done, ticket.token):  # pragma: no cover - token checked above
        raise IdempotencyInFlight("This Idempotency-Key was taken over by another request")


def bind(uow: UnitOfWork, ticket: IdempotencyTicket[R] | None, resource: str | None) -> None:
    """Bind ``ticket``'s key to ``resource``, the record the request just wrote, in the caller's
    transaction (``None`` unbinds it: the record ended and a retry should start afresh).

    Done before a provider call whose outcome may be lost: if the request then fails without an
    answer, its key is kept for that record (:meth:`IdempotencyService.release`), and the retry
    with the same key resumes it rather than charging or refunding again. Raises
    :class:`IdempotencyInFlight` if the claim was lost, rolling the transaction back.
    """
    if ticket is None:
        return
    current = uow.idempotency.get(ticket.company_id, ticket.key)
    if current is None or current.token != ticket.token:
        raise IdempotencyInFlight(
            "This Idempotency-Key was taken over by another request", param="Idempotency-Key"
        )
    if current.resource != resource:
        uow.idempotency.replace(replace(current, resource=resource), ticket.token)


def finish(uow: UnitOfWork, ticket: IdempotencyTicket[R] | None, result: R) -> R:
    """Complete ``ticket`` (if any) with what its recorder makes of ``result``, in the
    service's transaction; return ``result``. For services."""
    if ticket is not None:
        complete_in(uow, ticket, ticket.recorder(result))
    return result


def _same(result: StoredResult) -> StoredResult:
    return result
