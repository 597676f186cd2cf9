"""How each treasury movement is written to the ledger. Pure: builds legs, moves nothing.

Rules:
- The outside world is ``world:{CUR}`` (money arriving from or leaving to banks), fees collect
  in ``fees:{CUR}``, and currency exchange goes through the platform's liquidity accounts
  ``fx:{CUR}``: the source wallet pays ``fx:{FROM}``, ``fx:{TO}`` pays the target. Each leg stays
  in one currency, so every journal balances per currency (TigerBeetle's currency exchange).
- A movement that waits for a bank (deposits, withdrawals, cross-currency transfers) is written
  as reservations; completing posts them all, failing voids them all, in one journal.
- Withdrawal reservations and transfer debits use the ``out`` counter, so they show as
  ``pending_out``; money on its way in shows as ``pending_in``.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from treasury_core.ledger import Account, AccountKind, Leg, Move, PendingCategory, Reserve
from treasury_core.money import round_minor


def world_account(currency: str) -> Account:
    """The outside world (banks, card networks) in ``currency``; unguarded."""
    return Account(f"world:{currency}", currency, AccountKind.WORLD)


def fx_account(currency: str) -> Account:
    """The platform's FX liquidity in ``currency``; unguarded (the platform funds it)."""
    return Account(f"fx:{currency}", currency, AccountKind.FX_LIQUIDITY)


def fee_account(currency: str) -> Account:
    """Fee income in ``currency``."""
    return Account(f"fees:{currency}", currency, AccountKind.FEES)


def system_accounts(*currencies: str) -> list[Account]:
    """Every system account the movements in these currencies may touch."""
    return [f(c) for c in sorted(set(currencies)) for f in (world_account, fx_account, fee_account)]


@dataclass(frozen=True, slots=True)
class FeeRule:
    """A withdrawal fee: ``fixed`` minor units plus ``basis_points`` of the amount."""

    fixed: int = 0
    basis_points: int = 0

    def fee(self, amount: int) -> int:
        """The fee on ``amount``, rounded by the one rounding rule."""
        return self.fixed + round_minor(Decimal(amount) * self.basis_points / Decimal(10_000))


def _exchange(
    source_account: str, source: str, amount: int, target_account: str, target: str, converted: int
) -> tuple[Reserve, ...]:
    if source == target:
        return (Reserve(source_account, target_account, source, amount, PendingCategory.OUT),)
    return (
        Reserve(source_account, fx_account(source).id, source, amount, PendingCategory.OUT),
        Reserve(fx_account(target).id, target_account, target, converted, PendingCategory.OUT),
    )


def deposit_legs(
    wallet_id: str, from_currency: str, from_amount: int, to_currency: str, to_amount: int
) -> tuple[Leg, ...]:
    """Reserve money arriving from the world into the wallet (``pending_in`` until completed)."""
    return _exchange(
        world_account(from_currency).id,
        from_currency,
        from_amount,
        wallet_id,
        to_currency,
        to_amount,
    )


def completed_deposit_legs(
    wallet_id: str, from_currency: str, from_amount: int, to_currency: str, to_amount: int
) -> tuple[Leg, ...]:
    """Money already received (virtual-account credits): posted at once."""
    world = world_account(from_currency).id
    if from_currency == to_currency:
        return (Move(world, wallet_id, to_currency, to_amount),)
    return (
        Move(world, fx_account(from_currency).id, from_currency, from_amount),
        Move(fx_account(to_currency).id, wallet_id, to_currency, to_amount),
    )


def withdrawal_legs(
    wallet_id: str,
    from_currency: str,
    from_amount: int,
    fee: int,
    to_currency: str,
    to_amount: int,
) -> tuple[Leg, ...]:
    """Reserve the amount (converted on its way out if need be) and the fee from the wallet."""
    legs: tuple[Leg, ...] = _exchange(
        wallet_id, from_currency, from_amount, world_account(to_currency).id, to_currency, to_amount
    )
    if fee:
        legs += (Reserve(wallet_id, fee_account(from_currency).id, from_currency, fee),)
    return legs


def transfer_legs(
    from_wallet: str,
    from_currency: str,
    from_amount: int,
    to_wallet: str,
    to_currency: str,
    to_amount: int,
) -> tuple[Leg, ...]:
    """Same currency: one posted move. Cross currency: reservations through FX liquidity."""
    if from_currency == to_currency:
        return (Move(from_wallet, to_wallet, from_currency, from_amount),)
    return _exchange(from_wallet, from_currency, from_amount, to_wallet, to_currency, to_amount)
