"""The AES-256-GCM vault's settings: ``TREASURY_VAULT_KEY`` and ``TREASURY_VAULT_OLD_KEYS``."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, SecretStr, field_validator

from treasury_core.config import AdapterSettings, split_items


class VaultSettings(AdapterSettings):
    """The ``aesgcm`` vault's keys."""

    env_prefix: ClassVar[str] = "TREASURY_VAULT_"

    key: SecretStr | None = Field(
        default=None,
        description="The vault's key: 32 random bytes, base64 (url-safe or standard). Required "
        "outside sandbox mode; the sandbox falls back to a fixed, public test key.",
    )
    old_keys: tuple[SecretStr, ...] = Field(
        default=(),
        description="Earlier vault keys, still used to open cards sealed with them (rotation); "
        "from the environment, separated by commas or spaces.",
    )

    _split = field_validator("old_keys", mode="before")(split_items)
