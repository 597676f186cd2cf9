"""Opening, resuming and ending dashboard sessions (:mod:`treasury_core.dashboard_sessions`).

Time is real time (the wall clock): advancing the sandbox's business clock from the dashboard
must not sign its user out. A session is over once it is ended (sign-out; its key rotated or
revoked, in the same transaction as the key), once it has not been seen for ``idle_seconds``,
or ``lifetime_seconds`` after it began, whichever comes first; and whenever its key is no
longer live, however that came about.

``last_seen_at`` is written only when it is at least :data:`TOUCH_SECONDS` old (half the idle
timeout when that is shorter), so a browser
clicking through pages costs one write a minute rather than one a request; the idle timeout is
therefore measured from a moment up to that much before the last request.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import timedelta

from treasury_core.companies import KeyKind, Principal
from treasury_core.dashboard_sessions import DashboardSession
from treasury_core.operators import OperatorPrincipal
from treasury_core.ports import Clock, IdSource, Storage, UnitOfWork

#: How long a sign-in lasts at most, however busy the session.
LIFETIME_SECONDS = 8 * 3600
#: How stale ``last_seen_at`` may be before a request writes it again.
TOUCH_SECONDS = 60

_SESSION_ID = "dss"


def token_digest(token: str) -> str:
    """What storage keeps of a session token: its SHA-256, in hex (the token carries 32
    random bytes, so the digest cannot be reversed)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class LiveSession:
    """A session found live: the record and whom it acts for (exactly one of the two)."""

    session: DashboardSession
    principal: Principal | None
    operator: OperatorPrincipal | None


class DashboardSessionService:
    """Server-side dashboard sessions."""

    def __init__(
        self,
        *,
        storage: Storage,
        wall_clock: Clock,
        ids: IdSource,
        idle_seconds: float,
        lifetime_seconds: float = LIFETIME_SECONDS,
    ) -> None:
        self._storage = storage
        self._clock = wall_clock
        self._ids = ids
        self._idle = timedelta(seconds=idle_seconds)
        self._lifetime = timedelta(seconds=lifetime_seconds)
        # Never less often than half the idle timeout: a short timeout must not end a session
        # whose browser is busy but whose last_seen_at waits for its minute.
        self._touch = timedelta(seconds=min(TOUCH_SECONDS, idle_seconds / 2))

    async def open(self, signed_in: Principal | OperatorPrincipal) -> tuple[DashboardSession, str]:
        """Start a session for a company's secret key or an operator key; the stored session
        and its token (the browser's, never stored)."""
        if isinstance(signed_in, Principal) and not signed_in.is_secret:
            raise ValueError("only a secret key opens a dashboard session")
        token = self._ids.token(32)
        now = self._clock.now()
        session = DashboardSession(
            id=self._ids.new_id(_SESSION_ID),
            token_hash=token_digest(token),
            company_id=signed_in.company_id if isinstance(signed_in, Principal) else None,
            key_id=signed_in.key_id,
            created_at=now,
            last_seen_at=now,
        )
        await self._storage.run(lambda uow: uow.dashboard_sessions.add(session))
        return session, token

    async def resume(self, token: str) -> LiveSession | None:
        """The live session of ``token``, or ``None`` (unknown, ended, idle too long, too old,
        or its key no longer live). Records that it was seen, at most once a minute."""
        digest = token_digest(token)
        now = self._clock.now()

        def read(uow: UnitOfWork) -> LiveSession | None:
            found = uow.dashboard_sessions.by_hash(digest)
            # As for keys: the digest compared in constant time, whatever the backend does.
            if (
                found is None
                or not hmac.compare_digest(found.token_hash, digest)
                or found.ended_at is not None
                or now - found.created_at >= self._lifetime
                or now - found.last_seen_at >= self._idle
            ):
                return None
            if found.company_id is None:
                operator = next(
                    (
                        k
                        for k in uow.operator_keys.list()
                        if k.id == found.key_id and k.revoked_at is None
                    ),
                    None,
                )
                if operator is None:
                    return None
                return LiveSession(
                    found, None, OperatorPrincipal(key_id=operator.id, name=operator.name)
                )
            key = next(
                (
                    k
                    for k in uow.companies.api_keys(found.company_id)
                    if k.id == found.key_id and k.revoked_at is None
                ),
                None,
            )
            if key is None or key.kind is not KeyKind.SECRET:
                return None
            principal = Principal(company_id=key.company_id, key_id=key.id, kind=key.kind)
            return LiveSession(found, principal, None)

        live = await self._storage.run(read, write=False)
        if live is not None and now - live.session.last_seen_at >= self._touch:
            session_id = live.session.id
            await self._storage.run(lambda uow: uow.dashboard_sessions.touch(session_id, now))
        return live

    async def end(self, session_id: str) -> bool:
        """End a session (sign-out): every copy of its cookie is then no session."""
        now = self._clock.now()
        return await self._storage.run(lambda uow: uow.dashboard_sessions.end(session_id, now))
