"""Routes as data: one table drives both aiohttp's router and the OpenAPI document."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from aiohttp import web
from pydantic import BaseModel

from treasury_core.companies import Principal
from treasury_core.config import TreasuryConfig
from treasury_core.metadata import MetadataInput
from treasury_core.validation import ResourceId

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Authorize = Callable[[web.Request, Principal], Awaitable[None]]


class Auth(StrEnum):
    """Which key a route needs."""

    NONE = "none"
    PUBLISHABLE = "publishable"  # either kind of merchant key
    SECRET = "secret"
    #: The operator's key (``ok_…``) only: a route that asserts facts from outside the
    #: system (the bank's statements). A merchant's key is 403 there; an operator key is no
    #: key at all on the other routes (401).
    OPERATOR = "operator"

    @property
    def is_merchant(self) -> bool:
        """Whether a company's API key opens the route."""
        return self in (Auth.PUBLISHABLE, Auth.SECRET)


@dataclass(frozen=True)
class Param:
    """A path or query parameter: what it means and the type its handler reads it as.

    ``type`` is what the OpenAPI document shows (through pydantic's JSON Schema), so it must be
    the rule the handler enforces: the same annotated type, or the constants it is built from.
    """

    description: str
    type: Any = str
    required: bool = False
    #: OpenAPI's serialization of an object parameter (``deepObject``: ``name[key]=value``);
    #: such a parameter admits the whole ``name[…]`` family (see :mod:`treasury_aiohttp.query`).
    style: str | None = None


#: ``metadata[key]=value`` filters of a list (each pair must match).
METADATA_QUERY = Param(
    "Only records whose metadata holds this value for this key: `metadata[key]=value`, "
    "several pairs all matching.",
    MetadataInput,
    style="deepObject",
)


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
    #: Regular expressions a path parameter must match for the route to match at all (the
    #: router's ``{name:regex}``), so ``/payments/intent/{id}`` never answers for
    #: ``/payments/intent/refund``. The OpenAPI document keeps the plain path.
    path_patterns: dict[str, str] = field(default_factory=dict)
    #: Every query parameter the route takes (paged lists add ``limit`` and ``starting_after``):
    #: the one place a parameter is declared, so any other is refused (400
    #: ``parameter_unknown``) before the handler runs, and the OpenAPI document lists them.
    query_params: dict[str, Param] = field(default_factory=dict)
    #: What ``starting_after`` of a paged list holds (an id of the listed kind).
    cursor: Any = ResourceId
    #: A page for people: the HTML answers it gives, by status (the JSON API's routes: empty).
    html: dict[int, str] = field(default_factory=dict)
    #: A page's form, posted as ``application/x-www-form-urlencoded``: these fields and the
    #: page's CSRF token.
    form: type[BaseModel] | None = None
    #: Completes a stored idempotent response before it is replayed (a route whose answer
    #: holds secrets stores it without them).
    replay: Callable[[web.Request, bytes], Awaitable[bytes]] | None = None
    #: What the key may ask of this route beyond ``auth``, judged on the request (its body
    #: included); raises :class:`~treasury_core.errors.PermissionDenied`. It runs with the
    #: auth check, before an ``Idempotency-Key`` can replay a stored answer.
    authorize: Authorize | None = None
    #: A body that is not JSON: its media types (the first is documented as the usual one)
    #: and what it holds. The handler reads it itself.
    raw_body: tuple[str, ...] = ()
    raw_body_description: str = ""
    #: This route's body limit from the configuration, when it is not ``max_body_bytes``.
    body_limit: Callable[[TreasuryConfig], int] | None = None
    #: Media types the route also answers in (chosen by ``Accept``) besides JSON.
    media_types: tuple[str, ...] = ()

    @property
    def router_path(self) -> str:
        """The path as the router matches it: :attr:`path` with :attr:`path_patterns`."""
        path = self.path
        for name, pattern in self.path_patterns.items():
            path = path.replace("{" + name + "}", "{" + name + ":" + pattern + "}")
        return path

    @property
    def operation_id(self) -> str:
        """A stable operation id for the OpenAPI document."""
        return self.handler.__name__


def route_of(request: web.Request) -> Route | None:
    """The :class:`Route` that matched ``request`` (``None`` for routes outside the table)."""
    route = getattr(request.match_info.handler, "treasury_route", None)
    return route if isinstance(route, Route) else None
