"""Schemathesis hooks of the fuzz test, loaded by the CLI through ``SCHEMATHESIS_HOOKS``.

Schemathesis draws ``Idempotency-Key`` values independently of the requests they go with, so it
sends one key with two different bodies, which the API answers 400 ``idempotency_error`` as
documented. That is a client's mistake, not schema-valid data refused, and it would stop the
positive-data check from saying anything about the request itself. A well-behaved client uses
one key per distinct request: each valid key gets a digest of its request appended, so a key
is reused exactly when the request is (a replay, which the API answers like the first time).
Keys the API refuses (empty, too long, non-ASCII) are left as drawn, so they are still tested.

A replay answers the first request's resource as it was created, even when a later step deleted
it; schemathesis' stateful check "created resource not found" (ST302) then follows the replayed
id into a 404. That is the documented replay, not a lost resource: such failures are dropped
for ids that only ever came back in replays, and kept for every other id.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import schemathesis

from treasury_core.idempotency import is_valid_key

_HEADER = "Idempotency-Key"
#: Room for ``-`` and the digest within the 255 characters a key may have.
_KEPT = 255 - 1 - 32


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    """One ``Idempotency-Key`` per distinct request."""
    headers = case.headers
    key = headers.get(_HEADER) if headers else None
    if not isinstance(key, str) or not is_valid_key(key):
        return
    # Keys in the order the body is sent: the server compares body bytes, and two drawn bodies
    # with the same fields in another order are two requests to it.
    request = json.dumps(
        [case.method, case.path, case.path_parameters, case.query, case.body],
        default=repr,
    )
    digest = hashlib.sha256(request.encode()).hexdigest()[:32]
    headers[_HEADER] = f"{key[:_KEPT]}-{digest}"


#: Refusals of schema-valid requests that no JSON Schema can state, by error code: they depend
#: on what the server holds (an intent's state, a movement already settled, a challenge that is
#: not waiting, the funds of a wallet), relate two fields (``same_wallet``, a manual capture of a
#: payment type that cannot have one, an amount below its currency's minimum) or are arithmetic
#: over the whole value (the Luhn digit and length of a card number, a statement's ``to``
#: before its ``from`` or a period past a year), or are a document's structure (a camt.053
#: statement). Each is a documented 400 of its operation.
_STATEFUL_OR_ARITHMETIC = frozenset(
    {
        "payment_intent_unexpected_state",
        "refund_not_allowed",
        "movement_not_pending",
        "no_action_required",
        "same_wallet",
        "insufficient_funds",
        "invalid_number",
        "incorrect_number",
        "capture_method_not_supported",
        # A bank statement's body is a camt.053 document; the schema can only say "a string".
        "statement_invalid",
        "statement_period_invalid",
        "statement_too_large",
        # Issue 24: a minimum that depends on the currency, a link closed by the clock.
        "amount_too_small",
        "payment_intent_expired",
        "expires_at_in_past",
    }
)
#: Fields whose refusal of a schema-valid value is arithmetic, a lookup or the clock's: a bank
#: account's number and routing number (IBAN mod 97 and ABA checksums, per-currency formats
#: after normalisation), a webhook URL's host (numeric hosts and private addresses, checked on
#: the address the name stands for; like a ``callback_url``'s, a host that cannot be encoded
#: for DNS) and a PMTI's ``expiry_date`` (not before today).
_CHECKED_BEYOND_SCHEMA = frozenset(
    {"account_number", "routing_number", "url", "callback_url", "expiry_date"}
)


#: Resource ids answered by a replayed request (``Idempotent-Replayed: true``).
_REPLAYED_IDS: set[str] = set()


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    """Remember the ids that replays answered (see the module docstring)."""
    replayed = {name.lower(): value for name, value in response.headers.items()}.get(
        "idempotent-replayed"
    )
    if replayed not in ("true", ["true"]):
        return
    try:
        created = json.loads(response.content)
    except (ValueError, TypeError):
        return
    if isinstance(created, dict) and isinstance(created.get("id"), str | int):
        _REPLAYED_IDS.add(str(created["id"]))


def _follows_a_replay(failure: Any, case: Any) -> bool:
    return getattr(failure, "code", None) == "ST302" and any(
        str(value) in _REPLAYED_IDS for value in (case.path_parameters or {}).values()
    )


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep every failure except a positive-data refusal the schema cannot express (an expired
    link's 410 among them), and a replayed resource followed into a 404."""
    if _follows_a_replay(failure, case):
        return False
    if getattr(failure, "code", None) == "ST202" and response.status_code == 410:
        # A hosted page whose link expired (the business clock's doing, documented as 410).
        return False
    if getattr(failure, "code", None) != "ST202" or response.status_code != 400:
        return True
    try:
        error = json.loads(response.content)["error"]
    except (ValueError, KeyError, TypeError):
        return True
    if error.get("code") in _STATEFUL_OR_ARITHMETIC:
        return False
    return not (
        error.get("code") == "parameter_invalid" and error.get("param") in _CHECKED_BEYOND_SCHEMA
    )
