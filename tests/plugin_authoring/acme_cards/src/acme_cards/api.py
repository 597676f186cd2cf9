"""Acme Payments' API as the adapter sees it, and an in-memory stand-in for the real service.

A real package would implement :class:`AcmeApi` with an HTTP client; this example ships only
:class:`InMemoryAcmeApi`, which behaves like Acme's test mode: every card is approved except
the two decline test numbers, and ``available = False`` makes every call fail like an outage.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Protocol

#: Acme's test cards that are declined, with Acme's own decline codes.
ACME_DECLINES = {
    "4000000000000002": "do_not_honor",
    "4000000000009995": "insufficient_funds",
}


class AcmeApiError(Exception):
    """An error answer from Acme: the HTTP status and Acme's error code."""

    def __init__(self, status: int, code: str) -> None:
        super().__init__(f"Acme answered {status} {code}")
        self.status = status
        self.code = code


@dataclass
class AcmeCharge:
    """A charge as Acme keeps it."""

    id: str
    amount: int
    currency: str
    status: str  # authorized, captured, voided
    last4: str
    captured: int = 0
    refunded: int = 0
    refunds: list[str] = field(default_factory=list)


class AcmeApi(Protocol):
    """The calls the adapter makes; each raises :class:`AcmeApiError` on an error answer."""

    async def create_charge(
        self,
        number: str,
        exp_month: int,
        exp_year: int,
        cvc: str | None,
        amount: int,
        currency: str,
        *,
        capture: bool,
    ) -> AcmeCharge:
        """Authorize (``capture=False``) or charge ``amount`` on a card."""
        ...

    async def capture(self, charge_id: str, amount: int) -> AcmeCharge:
        """Capture an authorized charge."""
        ...

    async def void(self, charge_id: str) -> AcmeCharge:
        """Release an authorized charge."""
        ...

    async def refund(self, charge_id: str, amount: int) -> str:
        """Refund part or all of a captured charge; the refund's id."""
        ...


class InMemoryAcmeApi:
    """Acme's test mode, in process: what the example's tests run against."""

    def __init__(self, region: str = "eu") -> None:
        self.region = region
        self.charges: dict[str, AcmeCharge] = {}
        self.available = True
        self._ids = itertools.count(1)

    async def create_charge(
        self,
        number: str,
        exp_month: int,
        exp_year: int,
        cvc: str | None,
        amount: int,
        currency: str,
        *,
        capture: bool,
    ) -> AcmeCharge:
        """Authorize or charge; the decline test cards answer 402."""
        self._check_up()
        if number in ACME_DECLINES:
            raise AcmeApiError(402, ACME_DECLINES[number])
        charge = AcmeCharge(
            id=f"acme_ch_{next(self._ids)}",
            amount=amount,
            currency=currency,
            status="captured" if capture else "authorized",
            last4=number[-4:],
            captured=amount if capture else 0,
        )
        self.charges[charge.id] = charge
        return charge

    async def capture(self, charge_id: str, amount: int) -> AcmeCharge:
        """Capture up to the authorized amount, once."""
        charge = self._charge(charge_id)
        if charge.status != "authorized":
            raise AcmeApiError(409, f"charge_{charge.status}")
        if amount > charge.amount:
            raise AcmeApiError(422, "amount_too_large")
        charge.status, charge.captured = "captured", amount
        return charge

    async def void(self, charge_id: str) -> AcmeCharge:
        """Release an authorization (again: harmless)."""
        charge = self._charge(charge_id)
        if charge.status == "captured":
            raise AcmeApiError(409, "charge_captured")
        charge.status = "voided"
        return charge

    async def refund(self, charge_id: str, amount: int) -> str:
        """Refund up to what is captured and not yet refunded."""
        charge = self._charge(charge_id)
        if charge.status != "captured":
            raise AcmeApiError(409, "charge_not_captured")
        if charge.refunded + amount > charge.captured:
            raise AcmeApiError(422, "amount_too_large")
        charge.refunded += amount
        refund_id = f"acme_re_{next(self._ids)}"
        charge.refunds.append(refund_id)
        return refund_id

    def _charge(self, charge_id: str) -> AcmeCharge:
        self._check_up()
        charge = self.charges.get(charge_id)
        if charge is None:
            raise AcmeApiError(404, "no_such_charge")
        return charge

    def _check_up(self) -> None:
        if not self.available:
            raise AcmeApiError(503, "service_unavailable")
