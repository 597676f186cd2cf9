"""The Stripe card provider's settings: ``TREASURY_STRIPE_*``."""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field, SecretStr, model_validator

from treasury_core.config import AdapterSettings

if TYPE_CHECKING:
    from treasury_core.config import TreasuryConfig


class StripeSettings(AdapterSettings):
    """What the ``stripe`` card provider needs beside the core's settings."""

    env_prefix: ClassVar[str] = "TREASURY_STRIPE_"

    api_key: SecretStr | None = Field(
        default=None,
        description="The Stripe secret key (sk_…) of the stripe card provider; required with it.",
    )
    api_base: str | None = Field(
        default=None,
        description="Stripe's API base URL, for a local fake such as localstripe; Stripe's own "
        "when unset. https://, or http:// to a loopback host only.",
    )
    webhook_secret: SecretStr | None = Field(
        default=None, description="Verifies Stripe's webhook signatures (whsec_…)."
    )
    timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="How long one HTTP request to Stripe may take (connecting, then each "
        "read) before it counts as a timeout; the SDK retries it twice.",
    )
    max_threads: int = Field(
        default=32,
        ge=1,
        description="The stripe card provider's own threads: how many Stripe calls may be in "
        "flight at once; more wait their turn, and no other work waits for them.",
    )

    @model_validator(mode="after")
    def _base_is_private(self) -> StripeSettings:
        # The API key travels in every request's headers: plain HTTP only to a fake on this
        # machine (localstripe), never across a network.
        if self.api_base is not None:
            base = urllib.parse.urlsplit(self.api_base)
            host = base.hostname or ""
            loopback = host in ("localhost", "::1") or host.startswith("127.")
            if not (base.scheme == "https" or (base.scheme == "http" and loopback)):
                raise ValueError(
                    "TREASURY_STRIPE_API_BASE must be https:// unless its host is loopback"
                )
        return self

    def missing(self, config: TreasuryConfig) -> list[str]:
        """The API key, when ``config`` picks the ``stripe`` provider."""
        if config.card_provider == "stripe" and self.api_key is None:
            return ["TREASURY_STRIPE_API_KEY is required when TREASURY_CARD_PROVIDER=stripe"]
        return []
