"""Acme's settings: ``TREASURY_ACME_*``, read the way the built-in adapters read theirs."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, SecretStr

from treasury_core.config import AdapterSettings


class AcmeSettings(AdapterSettings):
    """What the ``acme`` card provider needs: ``TREASURY_ACME_API_KEY``, ``_REGION``."""

    env_prefix: ClassVar[str] = "TREASURY_ACME_"

    api_key: SecretStr | None = Field(default=None, description="Acme's secret key.")
    region: Literal["eu", "us"] = Field(default="eu", description="Acme's data centre.")
