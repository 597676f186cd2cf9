"""The HTTP app's own settings: body limits, the rate limits, the hosted pages' keys.

Read by the app alone, so they are the app's model, not the core's config. Their variables are
``TREASURY_`` and the setting's name (``TREASURY_RATE_LIMIT_PER_SECOND``,
``TREASURY_MAX_BODY_BYTES``, ``TREASURY_FORM_KEY``, …). ``config_from_env`` reads them (the
app's plugin lists the model in ``treasury_settings_models``), ``TreasuryConfig(
rate_limit_per_second=...)`` files them like the bundled adapters' settings, and the app reads
them with ``config.adapter_settings(AppSettings)``: :func:`app_settings`. A value built in code
is checked there, when the app is built.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field, SecretStr, StringConstraints, field_validator

from treasury_core.config import AdapterSettings, TreasuryConfig, split_items

#: An origin allowed to frame the hosted pages (``https://shop.example``, ``https://*.example``):
#: a scheme, a host and an optional port, nothing that could add a CSP directive.
FrameAncestor = Annotated[
    str, StringConstraints(pattern=r"^https?://(\*\.)?[A-Za-z0-9.-]+(:[0-9]{1,5})?$")
]


class AppSettings(AdapterSettings):
    """What the HTTP app takes from the configuration and nothing else reads."""

    env_prefix: ClassVar[str] = "TREASURY_"
    # The Redis URL may hold a password: an error names its variable, never its value.
    secret_fields: ClassVar[frozenset[str]] = frozenset({"rate_limit_redis_url"})

    max_body_bytes: int = Field(default=64 * 1024, gt=0)
    body_timeout_seconds: float = Field(
        default=30.0, gt=0, description="How long a client may take to send a request body (408)."
    )
    bank_statement_max_bytes: int = Field(
        default=5 * 1024 * 1024,
        gt=0,
        description="Largest statement POST /api/v1/bank-statements accepts.",
    )
    rate_limit_per_second: float = Field(
        default=100.0,
        ge=0,
        description="Requests per second each API key may make on average (0: no limit).",
    )
    rate_limit_burst: int = Field(
        default=200, ge=1, description="Requests an API key may make at once."
    )
    auth_failure_limit_per_second: float = Field(
        default=0.2,
        ge=0,
        description="Failed authentications (a wrong API key, a wrong dashboard sign-in) each "
        "client address may make per second on average before it is answered 429 without a "
        "lookup (0: no limit); kept in the rate limit's Redis when one is set.",
    )
    auth_failure_limit_burst: int = Field(
        default=20, ge=1, description="Failed authentications a client address may make at once."
    )
    rate_limit_redis_url: str | None = Field(
        default=None,
        pattern=r"^(rediss?|unix)://",
        description="Keep the rate limit's buckets in this Redis (redis://, rediss://, unix://; "
        "the `redis` extra), shared by every server process that names it; unset: a bucket per "
        "process, so N processes allow N times the limit.",
    )
    rate_limit_redis_timeout_seconds: float = Field(
        default=0.25,
        gt=0,
        le=60,
        description="How long a request waits for the rate limit's Redis (a free connection, "
        "connecting, the answer) before it is limited by the process's own bucket instead.",
    )
    form_key: SecretStr | None = Field(
        default=None,
        description="Signs the hosted forms' CSRF tokens; every server process behind one "
        "address needs the same. Random per process when unset.",
    )
    frame_ancestors: tuple[FrameAncestor, ...] = Field(
        default=(),
        description="Origins allowed to embed the hosted pages in an iframe (CSP "
        "frame-ancestors); the server's own origin always may.",
    )
    event_backlog_warning_seconds: float = Field(
        default=300.0,
        ge=0,
        description="The worker logs a warning when the oldest undelivered event is older "
        "than this (business time), at most once every 5 minutes, and a line when it "
        "recovers (0: never).",
    )

    _split_lists = field_validator("frame_ancestors", mode="before")(split_items)


def app_settings(config: TreasuryConfig) -> AppSettings:
    """The app's settings in ``config`` (its defaults for those not given)."""
    return config.adapter_settings(AppSettings)
