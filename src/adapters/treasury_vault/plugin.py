"""Registers the AES-256-GCM card vault under ``aesgcm``."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterable, Mapping

from treasury_core.config import AdapterSettings, TreasuryConfig
from treasury_core.plugins.hookspecs import VaultFactory, hookimpl
from treasury_core.ports import Vault

logger = logging.getLogger("treasury.vault")


def _aesgcm_vault(config: TreasuryConfig) -> Vault:
    # Imported here: registering the plugin must not load cryptography, building the vault does.
    from treasury_vault.aesgcm import (
        MSG_SANDBOX_KEY_OUTSIDE_SANDBOX,
        MSG_VAULT_KEY_MISSING,
        SANDBOX_KEY,
        AesGcmVault,
        VaultKeyMissing,
        parse_key,
    )
    from treasury_vault.settings import VaultSettings

    settings = config.adapter_settings(VaultSettings)
    old_keys = [parse_key(secret.get_secret_value()) for secret in settings.old_keys]
    if settings.key is not None:
        key = parse_key(settings.key.get_secret_value())
        if not config.sandbox and hmac.compare_digest(key, SANDBOX_KEY):
            # The sandbox key is published; real cards sealed under it would be readable by all.
            raise VaultKeyMissing(MSG_SANDBOX_KEY_OUTSIDE_SANDBOX)
        return AesGcmVault(key, old_keys)
    if not config.sandbox:
        raise VaultKeyMissing(MSG_VAULT_KEY_MISSING)
    # The sandbox runs without setup; the key it falls back to is public, hence the warning.
    logger.warning("no vault key configured; using the public sandbox key")
    return AesGcmVault(SANDBOX_KEY, old_keys)


@hookimpl
def register_vault() -> Mapping[str, VaultFactory]:
    """The AES-256-GCM vault: ``TREASURY_VAULT_KEY``, or the public sandbox key in sandbox mode."""
    return {"aesgcm": _aesgcm_vault}


@hookimpl
def treasury_missing_settings(config: TreasuryConfig) -> Iterable[str]:
    """``TREASURY_VAULT_KEY`` outside sandbox mode, when this vault is the configured one."""
    if config.vault != "aesgcm" or config.sandbox:
        return ()
    from treasury_vault.aesgcm import MSG_VAULT_KEY_MISSING
    from treasury_vault.settings import VaultSettings

    if config.adapter_settings(VaultSettings).key is not None:
        return ()

    return (MSG_VAULT_KEY_MISSING,)


@hookimpl
def treasury_settings_models() -> Iterable[type[AdapterSettings]]:
    """``TREASURY_VAULT_KEY`` and ``_OLD_KEYS``: :class:`~treasury_vault.settings.VaultSettings`."""
    from treasury_vault.settings import VaultSettings

    return (VaultSettings,)
