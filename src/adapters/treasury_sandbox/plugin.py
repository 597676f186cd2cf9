"""Registers the sandbox clock, bank rail, FX rates and card provider, each under ``sandbox``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta

from treasury_core.config import AdapterSettings, TreasuryConfig
from treasury_core.plugins.hookspecs import (
    BankRailFactory,
    CardProviderFactory,
    ClockFactory,
    FxRatesFactory,
    hookimpl,
)
from treasury_core.ports import BankRail, CardProvider, Clock, FxRates, Settlement


def _sandbox_clock(config: TreasuryConfig) -> Clock:
    from treasury_sandbox.clock import SandboxClock

    return SandboxClock()


def _sandbox_bank_rail(config: TreasuryConfig, clock: Clock) -> BankRail:
    # Imported here: the rail loads schwifty's registries, registering it should not.
    from treasury_sandbox.bank_rail import SandboxBankRail
    from treasury_sandbox.settings import SandboxRailSettings

    rail = SandboxBankRail()
    delays = config.adapter_settings(SandboxRailSettings).delays_seconds

    def delay(kind: Settlement) -> timedelta:
        seconds = delays.get(kind.value)
        return rail.settlement_delay(kind) if seconds is None else timedelta(seconds=seconds)

    return SandboxBankRail(
        deposit_delay=delay(Settlement.DEPOSIT),
        withdrawal_delay=delay(Settlement.WITHDRAWAL),
        fx_transfer_delay=delay(Settlement.FX_TRANSFER),
    )


def _sandbox_fx_rates(config: TreasuryConfig, clock: Clock) -> FxRates:
    from treasury_sandbox.fx import SandboxFxRates

    return SandboxFxRates(clock, max_age_seconds=config.fx_max_age_seconds)


def _sandbox_card_provider(config: TreasuryConfig, clock: Clock) -> CardProvider:
    from treasury_sandbox.card_provider import SandboxCardProvider

    return SandboxCardProvider(clock)


@hookimpl
def register_clock() -> Mapping[str, ClockFactory]:
    """The sandbox clock."""
    return {"sandbox": _sandbox_clock}


@hookimpl
def register_fx_rates() -> Mapping[str, FxRatesFactory]:
    """The sandbox FX rates: a table against USD, always fresh."""
    return {"sandbox": _sandbox_fx_rates}


@hookimpl
def register_bank_rail() -> Mapping[str, BankRailFactory]:
    """The sandbox bank rail: real account formats and checksums, simulated settlement."""
    return {"sandbox": _sandbox_bank_rail}


@hookimpl
def register_card_provider() -> Mapping[str, CardProviderFactory]:
    """The sandbox card provider: the test-card table, stateless references."""
    return {"sandbox": _sandbox_card_provider}


@hookimpl
def treasury_settings_models() -> Iterable[type[AdapterSettings]]:
    """``TREASURY_SETTLEMENT_DELAYS_SECONDS``: the sandbox rail's
    :class:`~treasury_sandbox.settings.SandboxRailSettings`."""
    from treasury_sandbox.settings import SandboxRailSettings

    return (SandboxRailSettings,)
