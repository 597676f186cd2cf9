"""Registers the bank-file rail under ``files``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from treasury_core.config import AdapterSettings, TreasuryConfig
from treasury_core.plugins.hookspecs import BankRailFactory, hookimpl
from treasury_core.ports import BankRail, Clock


def _files_bank_rail(config: TreasuryConfig, clock: Clock) -> BankRail:
    # Imported here: the rail loads sepaxml and schwifty, registering it should not.
    from treasury_bankfiles.rail import Debtor, FilesBankRail
    from treasury_bankfiles.settings import BankFilesSettings

    if not (config.bank_debtor_name and config.bank_debtor_iban):  # config_from_env refuses it too
        raise ValueError("the files rail needs TREASURY_BANK_DEBTOR_NAME and _IBAN")
    return FilesBankRail(
        Debtor(config.bank_debtor_name, config.bank_debtor_iban, config.bank_debtor_bic),
        batch_booking=config.adapter_settings(BankFilesSettings).batch_booking,
    )


@hookimpl
def register_bank_rail() -> Mapping[str, BankRailFactory]:
    """The bank-file rail: pain.001 out, camt.053, camt.054 and MT940 in."""
    return {"files": _files_bank_rail}


@hookimpl
def treasury_settings_models() -> Iterable[type[AdapterSettings]]:
    """``TREASURY_BANK_BATCH_BOOKING``: :class:`~treasury_bankfiles.settings.BankFilesSettings`
    (which also requires the core's debtor with this rail)."""
    from treasury_bankfiles.settings import BankFilesSettings

    return (BankFilesSettings,)
