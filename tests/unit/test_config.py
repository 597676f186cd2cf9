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


def test_card_on_file_settings_from_the_environment() -> None:
    config = config_from_env(
        {
            "TREASURY_VAULT_KEY": "new-key",
            "TREASURY_VAULT_OLD_KEYS": "old-1, old-2",
            "TREASURY_FRAME_ANCESTORS": "https://shop.example https://*.shop.example",
            "TREASURY_PUBLIC_URL": "https://pay.example",
            "TREASURY_FORM_KEY": "form",
        }
    )
    assert config.vault_key is not None and config.vault_key.get_secret_value() == "new-key"
    assert [k.get_secret_value() for k in config.vault_old_keys] == ["old-1", "old-2"]
    assert config.frame_ancestors == ("https://shop.example", "https://*.shop.example")
    assert config.public_url == "https://pay.example"
    assert "new-key" not in repr(config)  # secrets stay out of reprs and logs


def test_private_callback_destinations_follow_the_mode_unless_set() -> None:
    assert TreasuryConfig().private_destinations_allowed
    assert not TreasuryConfig(sandbox=False).private_destinations_allowed
    assert TreasuryConfig(
        sandbox=False, allow_private_destinations=True
    ).private_destinations_allowed
    env = config_from_env({"TREASURY_ALLOW_PRIVATE_DESTINATIONS": "no"})
    assert not env.private_destinations_allowed


def test_a_delivery_lease_must_outlast_a_send() -> None:
    with pytest.raises(ValidationError, match="more than twice"):
        TreasuryConfig(webhook_timeout_seconds=30, delivery_lease_seconds=60)
    config = config_from_env(
        {"TREASURY_WEBHOOK_TIMEOUT_SECONDS": "2", "TREASURY_DELIVERY_LEASE_SECONDS": "5"}
    )
    assert (config.webhook_timeout_seconds, config.delivery_lease_seconds) == (2, 5)


def test_adapter_names_from_the_environment() -> None:
    # So `treasury serve` can run a third-party plugin's adapter without code.
    config = config_from_env(
        {
            "TREASURY_CARD_PROVIDER": "acme",
            "TREASURY_BANK_RAIL": "acme-bank",
            "TREASURY_FX_RATES": "ecb",
            "TREASURY_VAULT": "kms",
            "TREASURY_WEBHOOK_SENDER": "queue",
            "TREASURY_CLOCK": "system",
            "TREASURY_IDS": "uuid7",
            "TREASURY_STORAGE": "dynamo",
        }
    )
    assert (config.card_provider, config.bank_rail, config.fx_rates, config.vault) == (
        "acme",
        "acme-bank",
        "ecb",
        "kms",
    )
    assert (config.webhook_sender, config.clock, config.ids) == ("queue", "system", "uuid7")
    assert config.storage_name == "dynamo"
    assert config_from_env({}).card_provider == "sandbox"
