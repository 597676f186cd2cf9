"""The record an idempotency key started.

A request that calls the card provider binds its ``Idempotency-Key`` to the record it wrote
before the call (``pi:123``, a refund's id, a capture attempt), so that a retry after a lost
answer resumes that record instead of charging or refunding a second time. One nullable
column: existing keys are bound to nothing, as before.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("idempotency_keys", sa.Column("resource", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.drop_column("resource")
