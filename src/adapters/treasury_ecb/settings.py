"""The ``ecb`` FX adapter's settings: ``TREASURY_ECB_*``.

- ``TREASURY_ECB_FETCH``: fetch current rates (default ``true``); ``false`` for a fully
  offline install, which then quotes only from its file;
- ``TREASURY_ECB_URL``: the ECB rates file to fetch (default the ECB's daily XML);
- ``TREASURY_ECB_FILE``: a snapshot file to start from instead of the packaged history;
- ``TREASURY_ECB_MARKUP_BPS``: basis points taken off every cross rate (0 to 9999, default 0);
- ``TREASURY_ECB_MAX_AGE_DAYS``: refuse a rate dated more days before today (default 5).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from treasury_core.config import AdapterSettings
from treasury_ecb.fx import DEFAULT_MAX_AGE_DAYS

# The spellings treasury_core.settings accepts for a boolean, and nothing else.
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")

#: The whole-number settings' bounds.
_BOUNDS = {"markup_bps": (0, 9_999), "max_age_days": (0, 36_500)}


def _refused(message: str) -> PydanticCustomError:
    # The message as it is, so the error reads "TREASURY_ECB_…='…' is not valid: <message>".
    return PydanticCustomError("ecb_setting", message)


class EcbSettings(AdapterSettings):
    """Where the ECB's rates come from and how they are used."""

    env_prefix: ClassVar[str] = "TREASURY_ECB_"

    fetch: bool = Field(default=True, description="Fetch current rates from the ECB.")
    url: str | None = Field(
        default=None, description="The rates file to fetch; the ECB's daily XML when unset."
    )
    file: str | None = Field(
        default=None, description="A snapshot file to start from instead of the packaged one."
    )
    markup_bps: int = Field(default=0, description="Basis points taken off every cross rate.")
    max_age_days: int = Field(
        default=DEFAULT_MAX_AGE_DAYS,
        description="A rate dated more days before today is refused.",
    )

    @field_validator("fetch", mode="before")
    @classmethod
    def _flag(cls, value: object) -> object:
        if value == "":
            return True
        if isinstance(value, str):
            if value.lower() in _TRUE:
                return True
            if value.lower() in _FALSE:
                return False
            raise _refused("must be true or false")
        return value

    @field_validator("url", "file", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return value or None

    @field_validator("url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("https://", "http://")):
            raise _refused("must be an http(s) URL")
        return value

    @field_validator("markup_bps", "max_age_days", mode="before")
    @classmethod
    def _whole(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return int(value, 10)
            except ValueError:
                raise _refused("not a whole number") from None
        return value

    @field_validator("markup_bps", "max_age_days")
    @classmethod
    def _within(cls, value: int, info: ValidationInfo) -> int:
        low, high = _BOUNDS[info.field_name or ""]
        if not low <= value <= high:
            raise _refused(f"must be from {low} to {high}")
        return value
