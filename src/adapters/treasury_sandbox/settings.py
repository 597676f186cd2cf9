"""The sandbox bank rail's settings: ``TREASURY_SETTLEMENT_DELAYS_SECONDS``."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from treasury_core.config import AdapterSettings, from_json


class SandboxRailSettings(AdapterSettings):
    """How long the sandbox rail takes to settle each kind of movement."""

    env_prefix: ClassVar[str] = "TREASURY_SETTLEMENT_"

    delays_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="Sandbox rail delays by kind (deposit, withdrawal, fx_transfer); "
        "decisions.md's defaults (24 h, 24 h, 60 s) otherwise. From the environment, a JSON "
        'object: {"deposit": 5}.',
    )

    _json = field_validator("delays_seconds", mode="before")(from_json)
