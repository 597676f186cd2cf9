"""The JSON of the records clients poll most, remembered per instance at the HTTP edge.

A polled payment intent renders to the same bytes again and again, and the SQL storage hands out
one instance per stored version of an intent, so the server renders each version once
(:class:`~treasury_aiohttp.memo.InstanceMemo`). The memo lives here, not in the domain records:
the core renders on every call and holds no process-wide state, and only the server, which
answers the same reads over and over, pays for remembering.
"""

from __future__ import annotations

from treasury_aiohttp.memo import InstanceMemo
from treasury_core.interface.projections import record_json
from treasury_core.ledger import BalanceRecord
from treasury_core.payments import PaymentIntent

__all__ = ["balance_json", "intent_json"]

#: Intents' rendered records, by the instance the storage handed out.
_INTENTS: InstanceMemo[PaymentIntent, bytes] = InstanceMemo()


def intent_json(intent: PaymentIntent) -> bytes:
    """The interface's record of ``intent`` as JSON (:func:`~treasury_core.interface.projections.
    record_json`), rendered
    once per intent instance: an intent is frozen and holds only immutable values."""
    rendered = _INTENTS.get(intent)
    if rendered is None:
        rendered = _INTENTS.put(intent, record_json(intent))
    return rendered


def balance_json(balance: BalanceRecord) -> bytes:
    """A wallet's balance record as JSON, rendered on every read: a balance record is made
    afresh from its account on each read, and hashing one by value to remember its JSON
    costs more than rendering it."""
    return balance.record_json()
