"""The fair claim of due deliveries on PostgreSQL: one destination at a time, through an index.

The portable claim (``SqlDeliveryRepository.claim_batch`` on SQLite) numbers every due delivery
within its (company, destination) with a window function and keeps the first few of each: the
database reads and sorts the whole due backlog to take a batch of it. This query takes the same
batch reading only what it takes:

1. ``destinations`` lists the (company, destination) pairs that have pending deliveries by
   skipping through ``ix_deliveries_claim`` (migration 0015) one pair at a time, a recursive
   query PostgreSQL runs as one index probe per pair (it has no skip scan of its own before 18);
2. for each pair, a ``LATERAL`` subquery reads its first due deliveries in
   ``(next_attempt_at, id)`` order from the same index, at most ``take`` of them, locking them
   as it goes (``FOR UPDATE SKIP LOCKED``), and they are numbered (the pair's turn, as the
   window function did). Locking there, not only in the outer query, lets a worker claiming
   beside another take the rows after the other's instead of the same first ``take`` rows,
   all of which it would then skip: with one receiver, two workers took turns rather than
   sharing the work. The rows read but not taken stay locked until the claim commits, one short
   transaction;
3. the first ``limit`` by (turn, next_attempt_at, id) are the round robin across pairs;
4. the outer query reads their bodies, checking again that each is still due and unleased.

A NULL destination (a row older than migration 0008) is its own pair, spelled ``''`` here as in
the index, which no real destination (``scheme://host:port``) can be. The destinations already
at their limit of sends in flight (``full``) are left out before any of their rows is read, so a
dead endpoint's backlog costs one index probe, not a read of its rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, Text, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY

from treasury_sqlalchemy.schema import UtcDateTime

_CLAIM = (
    text(
        """
WITH RECURSIVE destinations(company_id, destination) AS (
    (SELECT company_id, COALESCE(destination, '')
       FROM deliveries
      WHERE status = 'pending'
      ORDER BY company_id, COALESCE(destination, '')
      LIMIT 1)
    UNION ALL
    SELECT following.company_id, following.destination
      FROM destinations AS previous
      CROSS JOIN LATERAL (
            SELECT company_id, COALESCE(destination, '') AS destination
              FROM deliveries
             WHERE status = 'pending'
               AND (company_id, COALESCE(destination, ''))
                   > (previous.company_id, previous.destination)
             ORDER BY company_id, COALESCE(destination, '')
             LIMIT 1
      ) AS following
),
chosen AS (
    SELECT first.id, first.next_attempt_at,
           row_number() OVER (
               PARTITION BY pair.company_id, pair.destination
               ORDER BY first.next_attempt_at, first.id
           ) AS turn
      FROM destinations AS pair
      CROSS JOIN LATERAL (
            SELECT id, next_attempt_at
              FROM deliveries
             WHERE status = 'pending'
               AND company_id = pair.company_id
               AND COALESCE(destination, '') = pair.destination
               AND next_attempt_at <= :now
               AND (lease_until IS NULL OR lease_until <= :wall_now)
             ORDER BY next_attempt_at, id
             LIMIT :take
               FOR UPDATE SKIP LOCKED
      ) AS first
     WHERE pair.destination <> ALL (:full)
),
batch AS (
    SELECT id, turn, next_attempt_at
      FROM chosen
     ORDER BY turn, next_attempt_at, id
     LIMIT :limit
)
SELECT deliveries.body
  FROM deliveries
  JOIN batch ON batch.id = deliveries.id
 WHERE deliveries.status = 'pending'
   AND deliveries.next_attempt_at <= :now
   AND (deliveries.lease_until IS NULL OR deliveries.lease_until <= :wall_now)
 ORDER BY batch.turn, batch.next_attempt_at, batch.id
   FOR UPDATE OF deliveries SKIP LOCKED
"""
    )
    .bindparams(
        bindparam("now", type_=UtcDateTime()),
        bindparam("wall_now", type_=UtcDateTime()),
        bindparam("full", type_=ARRAY(Text())),
    )
    .columns(body=Text())
)


def claim_candidates(
    conn: Connection,
    now: datetime,
    wall_now: datetime,
    limit: int,
    *,
    per_destination: int,
    full: Sequence[str],
) -> list[str]:
    """The bodies of the due deliveries to claim, locked, in round-robin order (the order
    :func:`treasury_core.notifications.deliveries.fair_pick` expects): at most
    ``per_destination`` (and ``limit``) per (company, destination), none to a ``full`` one."""
    take = min(per_destination, limit)
    params = {
        "now": now,
        "wall_now": wall_now,
        "take": take,
        "limit": limit,
        "full": list(full),
    }
    return list(conn.execute(_CLAIM, params).scalars())
