"""Dashboard sessions: a signed-in browser, kept on the server.

The browser holds a random token (inside the encrypted cookie); storage holds only its SHA-256
digest, with whose session it is (a company's, or the operator's when ``company_id`` is
``None``), the key it was opened with, when it started, when it was last seen and when it
ended. Every dashboard request finds its session by the digest, so signing out, rotating or
revoking the key, an idle timeout and the absolute lifetime end it for every copy of the
cookie at once.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict


class DashboardSession(BaseModel):
    """A stored session: the digest of its token, never the token itself."""

    model_config = ConfigDict(frozen=True)

    id: str
    token_hash: str
    #: The signed-in company; ``None`` for an operator session.
    company_id: int | None
    #: The API key (``key_…``) or operator key (``opk_…``) it was opened with.
    key_id: str
    created_at: datetime
    last_seen_at: datetime
    ended_at: datetime | None = None

    @property
    def is_operator(self) -> bool:
        """Whether an operator key opened it."""
        return self.company_id is None
