"""Routes as data: one table drives both aiohttp's router and the OpenAPI document."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum

from aiohttp import web
from pydantic import BaseModel

from treasury_core.companies import Principal

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Authorize = Callable[[web.Request, Principal], Awaitable[None]]


class Auth(StrEnum):
    """Which key a route needs."""

    NONE = "none"
    PUBLISHABLE = "publishable"  # either kind of key
    SECRET = "secret"


@dataclass(frozen=True)
class Route:
    """One endpoint: how it is reached, who may call it, what it takes and returns."""

    method: str
    path: str
    handler: Handler
    summary: str
    auth: Auth = Auth.SECRET
    body: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    is_list: bool = False
    #: Lists take ``limit``/``starting_after`` unless they are small fixed sets.
    paged: bool = True
    tags: tuple[str, ...] = ()
    description: str = ""
    path_params: dict[str, str] = field(default_factory=dict)
    query_params: dict[str, str] = field(default_factory=dict)
    #: Completes a stored idempotent response before it is replayed (a route whose answer
    #: holds secrets stores it without them).
    replay: Callable[[web.Request, bytes], Awaitable[bytes]] | None = None
    #: What the key may ask of this route beyond ``auth``, judged on the request (its body
    #: included); raises :class:`~treasury_core.errors.PermissionDenied`. It runs with the
    #: auth check, before an ``Idempotency-Key`` can replay a stored answer.
    authorize: Authorize | None = None

    @property
    def operation_id(self) -> str:
        """A stable operation id for the OpenAPI document."""
        return self.handler.__name__


def route_of(request: web.Request) -> Route | None:
    """The :class:`Route` that matched ``request`` (``None`` for routes outside the table)."""
    route = getattr(request.match_info.handler, "treasury_route", None)
    return route if isinstance(route, Route) else None
