import pytest
from pydantic import ValidationError

from treasury_aiohttp.settings import app_settings
from treasury_bankfiles.settings import BankFilesSettings
from treasury_core import TreasuryConfig, bootstrap, config_from_env
from treasury_core.plugins import make_plugin_manager
from treasury_core.settings import (
    BadSetting,
    TreasurySettings,
    known_variables,
    unknown_variables,
    warn_unknown_variables,
)
from treasury_sandbox.settings import SandboxRailSettings
from treasury_sqlalchemy.settings import SqlSettings
from treasury_stripe.settings import StripeSettings
from treasury_vault.settings import VaultSettings


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
    assert config.adapter_settings(SqlSettings).pool_size == 3
    assert config.storage_name == "sqlalchemy"
    assert config_from_env({}, database_url="memory://").storage_name == "memory"


def test_defaults_are_the_sandbox_on_a_local_file() -> None:
    config = TreasuryConfig()
    assert config.database_url == "sqlite:///treasury.db"
    assert config.sandbox
    assert app_settings(config).max_body_bytes == 65536
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
    vault = config.adapter_settings(VaultSettings)
    assert vault.key is not None and vault.key.get_secret_value() == "new-key"
    assert [k.get_secret_value() for k in vault.old_keys] == ["old-1", "old-2"]
    assert app_settings(config).frame_ancestors == (
        "https://shop.example",
        "https://*.shop.example",
    )
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


# --- The environment, read by one settings model (issue 20, item 8) ---------------------------


@pytest.mark.parametrize("value", ["False ", "0 ", " off", "flase", "disabled", "", "2"])
def test_a_sandbox_flag_that_is_not_a_boolean_is_refused_with_one_line(value: str) -> None:
    # Each of these used to turn sandbox mode ON, where any secret key credits money from
    # nowhere. Padding is refused too rather than guessed at: the flag is never silently on.
    with pytest.raises(BadSetting) as refused:
        config_from_env({"TREASURY_SANDBOX": value})
    message = refused.value.message
    assert "TREASURY_SANDBOX" in message
    assert repr(value) in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("value", "sandbox"),
    [
        *[("false", False), ("FALSE", False), ("0", False), ("no", False), ("off", False)],
        *[("true", True), ("True", True), ("1", True), ("yes", True), ("on", True)],
    ],
)
def test_the_sandbox_flag_accepts_the_usual_booleans(value: str, sandbox: bool) -> None:
    assert config_from_env({"TREASURY_SANDBOX": value}).sandbox is sandbox


def test_every_setting_has_a_variable() -> None:
    # A setting added to TreasuryConfig without a variable would be unreachable from the
    # command line, as the withdrawal fee table was (so `treasury serve` always charged 0).
    # The adapters' own settings are their models' (each read with its own prefix).
    assert set(TreasurySettings.model_fields) == set(TreasuryConfig.model_fields) - {"adapters"}


def test_tables_come_from_the_environment_as_json() -> None:
    config = config_from_env(
        {
            "TREASURY_WITHDRAWAL_FEES": '{"*": [0, 0], "EUR": [25, 50]}',
            "TREASURY_CURRENCY_EXPONENTS": '{"JPY": 0}',
            "TREASURY_SETTLEMENT_DELAYS_SECONDS": '{"deposit": 5}',
            "TREASURY_PAYMENT_DELAYS_SECONDS": '{"payout": 60.5}',
            "TREASURY_MAX_AMOUNT": "1000000",
            "TREASURY_API_KEY_CACHE_SECONDS": "0",
            "TREASURY_EVENT_RETENTION_DAYS": "7",
            "TREASURY_IDEMPOTENCY_TTL_SECONDS": "3600",
        }
    )
    assert config.withdrawal_fee("EUR") == (25, 50)
    assert config.withdrawal_fee("USD") == (0, 0)
    assert config.currency_exponents == {"JPY": 0}
    assert config.adapter_settings(SandboxRailSettings).delays_seconds == {"deposit": 5.0}
    assert config.payment_delays_seconds == {"payout": 60.5}
    assert (config.max_amount, config.api_key_cache_seconds) == (1_000_000, 0)
    assert (config.event_retention_days, config.idempotency_ttl_seconds) == (7, 3600)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("TREASURY_POOL_SIZE", "eight", "integer"),
        ("TREASURY_POOL_SIZE", "0", "greater than or equal to 1"),
        ("TREASURY_JOB_POLL_SECONDS", "soon", "number"),
        ("TREASURY_API_KEY_CACHE_SECONDS", "inf", "finite"),
        ("TREASURY_WITHDRAWAL_FEES", "{nope", "JSON"),
        ("TREASURY_WITHDRAWAL_FEES", '{"EUR": [25]}', "EUR"),
        ("TREASURY_ALLOW_PRIVATE_DESTINATIONS", "maybe", "boolean"),
        ("TREASURY_FRAME_ANCESTORS", "javascript:alert(1)", "pattern"),
        ("TREASURY_STRIPE_TIMEOUT_SECONDS", "0", "greater than 0"),
        ("TREASURY_STRIPE_TIMEOUT_SECONDS", "-5", "greater than 0"),
        ("TREASURY_STRIPE_TIMEOUT_SECONDS", "inf", "finite"),
        ("TREASURY_STRIPE_TIMEOUT_SECONDS", "soon", "number"),
        ("TREASURY_STRIPE_MAX_THREADS", "0", "greater than or equal to 1"),
        ("TREASURY_STRIPE_MAX_THREADS", "2.5", "integer"),
        ("TREASURY_STRIPE_MAX_THREADS", "many", "integer"),
    ],
)
def test_a_bad_value_names_its_variable_and_value(name: str, value: str, says: str) -> None:
    with pytest.raises(BadSetting) as refused:
        config_from_env({name: value})
    message = refused.value.message
    assert message.startswith(f"{name}={value!r}")
    assert says in message
    assert "\n" not in message


def test_a_rule_across_settings_is_one_line_too() -> None:
    with pytest.raises(BadSetting) as refused:
        config_from_env(
            {"TREASURY_WEBHOOK_TIMEOUT_SECONDS": "30", "TREASURY_DELIVERY_LEASE_SECONDS": "60"}
        )
    assert refused.value.message == (
        "The settings are not valid: "
        "delivery_lease_seconds must be more than twice webhook_timeout_seconds"
    )


def test_the_stripe_provider_without_a_key_is_refused_with_one_line() -> None:
    with pytest.raises(BadSetting) as refused:
        config_from_env({"TREASURY_CARD_PROVIDER": "stripe"})
    assert refused.value.message == (
        "The settings are not valid: "
        "TREASURY_STRIPE_API_KEY is required when TREASURY_CARD_PROVIDER=stripe"
    )


def test_stripe_settings_from_the_environment_keep_their_secrets() -> None:
    config = config_from_env(
        {
            "TREASURY_CARD_PROVIDER": "stripe",
            "TREASURY_STRIPE_API_KEY": "sk_test_abc",
            "TREASURY_STRIPE_API_BASE": "http://127.0.0.1:8420",
            "TREASURY_STRIPE_WEBHOOK_SECRET": "whsec_xyz",
        }
    )
    stripe = config.adapter_settings(StripeSettings)
    assert stripe.api_key is not None
    assert stripe.api_key.get_secret_value() == "sk_test_abc"
    assert stripe.api_base == "http://127.0.0.1:8420"
    assert "sk_test_abc" not in repr(config)
    assert "whsec_xyz" not in repr(config)
    # A key alone, with the sandbox provider, is fine: it is simply not used.
    assert config_from_env({"TREASURY_STRIPE_API_KEY": "sk_test_abc"}).card_provider == "sandbox"


def test_stripe_timeout_and_threads_from_the_environment() -> None:
    defaults = config_from_env({}).adapter_settings(StripeSettings)
    assert (defaults.timeout_seconds, defaults.max_threads) == (30.0, 32)
    config = config_from_env(
        {"TREASURY_STRIPE_TIMEOUT_SECONDS": "2.5", "TREASURY_STRIPE_MAX_THREADS": "8"}
    )
    stripe = config.adapter_settings(StripeSettings)
    assert (stripe.timeout_seconds, stripe.max_threads) == (2.5, 8)


def test_an_infinite_stripe_timeout_is_refused_in_code_too() -> None:
    # Checked by the adapter's model when the adapter reads it (at bootstrap).
    config = TreasuryConfig(stripe_timeout_seconds=float("inf"))
    with pytest.raises(ValidationError, match="finite"):
        config.adapter_settings(StripeSettings)
    with pytest.raises(ValidationError, match="finite"):
        StripeSettings(timeout_seconds=float("inf"))


def test_a_bad_override_is_not_blamed_on_a_variable() -> None:
    with pytest.raises(BadSetting, match=r"^pool_size") as refused:
        config_from_env({"TREASURY_POOL_SIZE": "4"}, pool_size=0)
    assert "TREASURY_POOL_SIZE" not in refused.value.message


def test_every_missing_required_setting_is_named_in_one_error() -> None:
    with pytest.raises(BadSetting) as refused:
        config_from_env({"TREASURY_CARD_PROVIDER": "stripe", "TREASURY_BANK_RAIL": "files"})
    assert refused.value.message.splitlines() == [
        "The settings are not valid: 2 required settings are missing:",
        # In the order the plugins are registered (the built-in ones: their entry points').
        "- TREASURY_BANK_DEBTOR_NAME and TREASURY_BANK_DEBTOR_IBAN are required when "
        "TREASURY_BANK_RAIL=files",
        "- TREASURY_STRIPE_API_KEY is required when TREASURY_CARD_PROVIDER=stripe",
    ]
    # Built in code, each adapter's settings name what they lack, and its factory refuses it.
    config = TreasuryConfig(database_url="memory://", card_provider="stripe", bank_rail="files")
    assert config.adapter_settings(StripeSettings).missing(config) == [
        "TREASURY_STRIPE_API_KEY is required when TREASURY_CARD_PROVIDER=stripe"
    ]
    assert (
        "TREASURY_BANK_DEBTOR_IBAN" in config.adapter_settings(BankFilesSettings).missing(config)[0]
    )
    with pytest.raises(BadSetting, match="TREASURY_STRIPE_API_KEY is required"):
        bootstrap(config)


def test_what_the_caller_requires_is_named_with_the_rest() -> None:
    from treasury_core.plugins import missing_settings

    plugins = make_plugin_manager()
    with pytest.raises(BadSetting) as refused:
        config_from_env(
            {"TREASURY_SANDBOX": "0", "TREASURY_CARD_PROVIDER": "stripe"},
            also_required=lambda config: missing_settings(plugins, config),
        )
    lines = refused.value.message.splitlines()
    assert len(lines) == 3
    assert "TREASURY_STRIPE_API_KEY" in lines[1]
    assert "TREASURY_VAULT_KEY" in lines[2]  # the aesgcm vault's, outside sandbox mode
    # In sandbox mode the vault needs no key.
    assert config_from_env({}, also_required=lambda c: missing_settings(plugins, c)).sandbox


def test_known_variables_are_the_settings_the_plugins_and_the_command_line() -> None:
    known = known_variables(make_plugin_manager())
    assert {"TREASURY_SANDBOX", "TREASURY_STRIPE_MAX_THREADS", "TREASURY_ECB_URL"} <= known
    assert "TREASURY_LOG_FORMAT" in known
    assert known == known_variables()


def test_unknown_variables_name_the_closest_known_one() -> None:
    environ = {
        "TREASURY_SANDBOXX": "1",
        "treasury_pool_sise": "4",
        "TREASURY_POOL_SIZE": "4",
        "TREASURY_TEST_ANYTHING": "x",
        "TREASURY_QQQQQQQQQQ": "x",
        "HOME": "/root",
    }
    assert unknown_variables(environ, known_variables()) == [
        ("TREASURY_QQQQQQQQQQ", None),
        ("TREASURY_SANDBOXX", "TREASURY_SANDBOX"),
        ("treasury_pool_sise", "TREASURY_POOL_SIZE"),
    ]


def test_an_unknown_variable_is_warned_about_once_per_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    environ = {"TREASURY_DELIVERY_CONCURENCY": "8"}
    with caplog.at_level("WARNING", logger="treasury.settings"):
        config_from_env(environ)
        config_from_env(environ)
    assert [r.getMessage() for r in caplog.records] == [
        "TREASURY_DELIVERY_CONCURENCY is not a treasury setting and is ignored; "
        "did you mean TREASURY_DELIVERY_CONCURRENCY?"
    ]
    assert warn_unknown_variables(environ) == []


def test_other_treasury_variables_are_left_alone() -> None:
    # TREASURY_LOG_FORMAT belongs to the command line, TREASURY_TEST_POSTGRES_URL to the tests.
    config = config_from_env({"TREASURY_LOG_FORMAT": "json", "TREASURY_TEST_POSTGRES_URL": "x"})
    assert config == TreasuryConfig()


def test_the_process_environment_is_read_when_no_mapping_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TREASURY_SANDBOX", "off")
    monkeypatch.setenv("TREASURY_WITHDRAWAL_FEES", '{"*": [100, 0]}')
    config = config_from_env()
    assert config.sandbox is False
    assert config.withdrawal_fee("GBP") == (100, 0)
    monkeypatch.setenv("TREASURY_SANDBOX", "flase")
    with pytest.raises(BadSetting, match="TREASURY_SANDBOX='flase'"):
        config_from_env()


@pytest.mark.parametrize(
    "base", ["http://api.stripe.example", "http://10.0.0.5:8420", "ftp://127.0.0.1", "127.0.0.1"]
)
def test_a_plain_http_stripe_base_off_loopback_is_refused(base: str) -> None:
    with pytest.raises(BadSetting) as refused:
        config_from_env({"TREASURY_STRIPE_API_BASE": base})
    assert refused.value.message == (
        "The settings are not valid: "
        "TREASURY_STRIPE_API_BASE must be https:// unless its host is loopback"
    )


@pytest.mark.parametrize(
    "base",
    ["https://api.stripe.com", "http://127.0.0.1:8420", "http://localhost:1", "http://[::1]:8"],
)
def test_https_or_a_loopback_stripe_base_is_accepted(base: str) -> None:
    config = config_from_env({"TREASURY_STRIPE_API_BASE": base})
    assert config.adapter_settings(StripeSettings).api_base == base
