"""Scheduled jobs over one SQLAlchemy connection."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, select, update

from treasury_core.jobs import Job, JobStatus
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.hot import HotInsert

# A job row per scheduled step, on the DBAPI cursor (see hot.py).
_INSERT_JOB = HotInsert(t.jobs)


class SqlJobs:
    """Scheduled jobs; PostgreSQL runners skip rows another runner holds."""

    def __init__(self, conn: Connection, lock_rows: bool) -> None:
        self._conn = conn
        self._lock_rows = lock_rows

    @staticmethod
    def _job(row: Row[Any]) -> Job:
        m = row._mapping
        return Job(
            id=m["id"],
            kind=m["kind"],
            resource_id=m["resource_id"],
            company_id=m["company_id"],
            due_at=m["due_at"],
            status=JobStatus(m["status"]),
        )

    def schedule(self, job: Job) -> None:
        _INSERT_JOB.execute(
            self._conn,
            {
                "id": job.id,
                "kind": job.kind,
                "resource_id": job.resource_id,
                "company_id": job.company_id,
                "due_at": job.due_at,
                "status": job.status.value,
            },
        )

    def due(self, now: datetime, limit: int) -> list[Job]:
        query = (
            select(t.jobs)
            .where(t.jobs.c.status == JobStatus.PENDING.value, t.jobs.c.due_at <= now)
            .order_by(t.jobs.c.due_at, t.jobs.c.id)
            .limit(limit)
        )
        return [self._job(r) for r in self._conn.execute(query)]

    def claim(self, job_id: str) -> Job | None:
        query = select(t.jobs).where(
            t.jobs.c.id == job_id, t.jobs.c.status == JobStatus.PENDING.value
        )
        if self._lock_rows:
            query = query.with_for_update(skip_locked=True)
        row = self._conn.execute(query).first()
        return self._job(row) if row else None

    def finish(self, job_id: str) -> None:
        self._conn.execute(
            update(t.jobs).where(t.jobs.c.id == job_id).values(status=JobStatus.DONE.value)
        )

    def finish_for(self, resource_id: str) -> int:
        result = self._conn.execute(
            update(t.jobs)
            .where(t.jobs.c.resource_id == resource_id, t.jobs.c.status == JobStatus.PENDING.value)
            .values(status=JobStatus.DONE.value)
        )
        return int(result.rowcount)
