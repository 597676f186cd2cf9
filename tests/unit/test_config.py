import pytest
from pydantic import ValidationError

from treasury_core import TreasuryConfig, config_from_env


def test_env_and_overrides() -> None:
    config = config_from_env(
        {
            "TREASURY_DATABASE_URL": "postgresql://x/y",
            "TREASURY_CURRENCIES": "USD, EUR",
            "TREASURY_SANDBOX": "false",
        },
        pool_size=3,
    )
    assert config.database_url == "postgresql://x/y"
    assert config.currencies == ("USD", "EUR")
    assert config.sandbox is False
    assert config.pool_size == 3
    assert config.storage_name == "sqlalchemy"
    assert config_from_env({}, database_url="memory://").storage_name == "memory"


def test_defaults_are_the_sandbox_on_a_local_file() -> None:
    config = TreasuryConfig()
    assert config.database_url == "sqlite:///treasury.db"
    assert config.sandbox
    assert config.max_body_bytes == 65536
    assert config.max_amount == 99_999_999_999


def test_unknown_settings_are_refused() -> None:
    with pytest.raises(ValidationError):
        TreasuryConfig(colour="blue")  # type: ignore[call-arg]
