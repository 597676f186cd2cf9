"""The events API: a company's events within the retention window, their deliveries, and
sending an event again."""

from __future__ import annotations

from datetime import datetime, timedelta

from treasury_core.errors import NotFound, ValidationFailed
from treasury_core.notifications.deliveries import Delivery
from treasury_core.notifications.events import Event, EventType
from treasury_core.pagination import DEFAULT_LIMIT, Page, PageRequest, checked_page, page_of
from treasury_core.ports import Clock, Storage, UnitOfWork
from treasury_core.services.notifications.dispatcher import Dispatcher
from treasury_core.validation import is_resource_id


class EventsApi:
    """Reads a company's events, their deliveries; redelivers; forgets expired events."""

    def __init__(
        self, *, storage: Storage, clock: Clock, dispatcher: Dispatcher, retention_days: float
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._dispatcher = dispatcher
        self._retention = timedelta(days=retention_days)

    async def purge_expired(self) -> int:
        """Forget events past the retention window (and their finished deliveries)."""
        before = self._oldest_kept()
        return await self._storage.run(lambda uow: uow.outbox.purge(before))

    def _oldest_kept(self) -> datetime:
        return self._clock.now() - self._retention

    async def events(
        self,
        company_id: int,
        *,
        type_: str | None = None,
        created_gte: datetime | None = None,
        limit: int = DEFAULT_LIMIT,
        starting_after: str | None = None,
    ) -> Page[Event]:
        """The company's events of the retention window, newest first: at most ``limit``
        (1–100, default :data:`~treasury_core.pagination.DEFAULT_LIMIT`)."""
        if type_ is not None and type_ not in EventType._value2member_map_:
            raise ValidationFailed(f"Unknown event type: {type_}", param="type")
        if starting_after is not None and not is_resource_id(starting_after, "evt"):
            raise ValidationFailed("starting_after must be an event id", param="starting_after")
        # The HTTP layer bounds the limit; a Python caller gets the same bound here.
        checked_page(PageRequest(limit=limit))
        oldest = self._oldest_kept()
        since = max(created_gte, oldest) if created_gte is not None else oldest
        rows = await self._storage.run(
            lambda uow: uow.outbox.page(
                company_id,
                type_=type_,
                created_gte=since,
                limit=limit + 1,
                starting_after=starting_after,
            ),
            write=False,
        )
        return page_of(rows, limit)

    async def event(self, company_id: int, event_id: str) -> Event:
        """One of the company's events (within the retention window), or :class:`NotFound`."""
        found = None
        if is_resource_id(event_id, "evt"):
            found = await self._storage.run(
                lambda uow: uow.outbox.get(event_id, company_id), write=False
            )
        if found is None or found.created_at < self._oldest_kept():
            raise NotFound(f"No such event: {event_id}")
        return found

    async def redeliver(self, company_id: int, event_id: str) -> list[Delivery]:
        """Send the event again to its destinations as they are now; the new deliveries."""
        event = await self.event(company_id, event_id)

        def write(uow: UnitOfWork) -> list[Delivery]:
            made = list(self._dispatcher.deliveries(uow, event))
            for delivery in made:
                uow.deliveries.add(delivery)
            return made

        return await self._storage.run(write)

    async def deliveries_of(self, company_id: int, event_id: str) -> list[Delivery]:
        """The deliveries of one of the company's events, oldest first."""
        await self.event(company_id, event_id)
        return await self._storage.run(lambda uow: uow.deliveries.for_event(event_id), write=False)
