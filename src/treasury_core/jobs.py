"""Scheduled jobs: work that falls due on the business clock (settlements, later hold expiry).

A job is a row with a due time. Runners pick due jobs and run each in its own transaction
together with the work it stands for, so a job is done exactly when its work committed. Several
runners may share one database: a job claimed by one is skipped by the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class JobStatus(StrEnum):
    """Where a job stands."""

    PENDING = "pending"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class Job:
    """Run ``kind`` for ``resource_id`` once the clock reaches ``due_at``."""

    id: str
    kind: str
    resource_id: str
    company_id: int
    due_at: datetime
    status: JobStatus = JobStatus.PENDING
