"""Hook specs, the plugin manager and bootstrap's choice of adapters."""

import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import Field, SecretStr, field_validator

from treasury_core import AdapterNotFound, TreasuryConfig, bootstrap
from treasury_core.config import AdapterSettings, from_json, split_items
from treasury_core.memory.storage import MemoryStorage
from treasury_core.plugins import (
    collect_factories,
    hookimpl,
    make_plugin_manager,
    settings_models,
)
from treasury_core.plugins.hookspecs import REGISTER_HOOKS
from treasury_core.plugins.manager import DuplicateAdapter
from treasury_vault.aesgcm import generate_key


def test_every_hook_is_documented() -> None:
    for kind, spec in REGISTER_HOOKS.items():
        assert spec.__name__ == f"register_{kind}"
        assert (spec.__doc__ or "").strip(), spec.__name__


def test_built_in_adapters_load_through_entry_points() -> None:
    pm = make_plugin_manager()
    assert {"memory", "sqlalchemy"} <= set(collect_factories(pm, "storage"))
    assert {"system", "sandbox"} <= set(collect_factories(pm, "clock"))
    assert "ulid" in collect_factories(pm, "id_source")


def test_two_plugins_registering_one_name_are_refused() -> None:
    class Impostor:
        @hookimpl
        def register_clock(self) -> Mapping[str, Any]:
            return {"system": lambda config: _FixedClock()}

    pm = make_plugin_manager(plugins=[Impostor()])
    with pytest.raises(
        DuplicateAdapter, match="Two plugins register a clock adapter named 'system'"
    ):
        collect_factories(pm, "clock")
    # Other kinds, where nothing collides, still resolve.
    assert "sandbox" in collect_factories(pm, "card_provider")


def test_no_entry_points_means_no_adapters() -> None:
    pm = make_plugin_manager(load_entry_points=False)
    assert collect_factories(pm, "storage") == {}
    with pytest.raises(KeyError):
        collect_factories(pm, "no_such_kind")


class _FixedClock:
    def now(self) -> datetime:
        return datetime(2030, 5, 5, tzinfo=UTC)


class _ThirdParty:
    """A plugin that registers one adapter of every kind, as a third party would."""

    made: list[str]

    def __init__(self) -> None:
        self.made = []

    def _factory(self, kind: str, result: Any) -> Mapping[str, Any]:
        def build(*args: Any) -> Any:
            self.made.append(kind)
            return result

        return {"acme": build}

    @hookimpl
    def register_storage(self) -> Mapping[str, Any]:
        return self._factory("storage", MemoryStorage())

    @hookimpl
    def register_clock(self) -> Mapping[str, Any]:
        return self._factory("clock", _FixedClock())

    @hookimpl
    def register_id_source(self) -> Mapping[str, Any]:
        from treasury_core.testing.fakes.clock import SequentialIds

        return self._factory("id_source", SequentialIds())

    @hookimpl
    def register_card_provider(self) -> Mapping[str, Any]:
        return self._factory("card_provider", object())

    @hookimpl
    def register_vault(self) -> Mapping[str, Any]:
        return self._factory("vault", object())

    @hookimpl
    def register_fx_rates(self) -> Mapping[str, Any]:
        return self._factory("fx_rates", object())

    @hookimpl
    def register_bank_rail(self) -> Mapping[str, Any]:
        return self._factory("bank_rail", object())

    @hookimpl
    def register_notifier(self) -> Mapping[str, Any]:
        return self._factory("notifier", object())


@pytest.mark.parametrize("kind", sorted(REGISTER_HOOKS))
def test_each_hook_collects_a_third_party_factory(kind: str) -> None:
    plugin = _ThirdParty()
    pm = make_plugin_manager(plugins=[plugin])
    factories = collect_factories(pm, kind)
    assert "acme" in factories
    factories["acme"]()
    assert plugin.made == [kind]


def test_bootstrap_picks_adapters_by_configured_name() -> None:
    plugin = _ThirdParty()
    pm = make_plugin_manager(plugins=[plugin])
    treasury = bootstrap(TreasuryConfig(storage="acme", clock="acme", ids="acme"), plugins=pm)
    assert treasury.clock.now().year == 2030
    assert isinstance(treasury.storage, MemoryStorage)
    assert treasury.ids.new_id("wal").startswith("wal_")
    assert sorted(plugin.made) == ["clock", "id_source", "storage"]


def test_unknown_adapter_name_is_a_clear_error() -> None:
    with pytest.raises(AdapterNotFound, match="No storage adapter named 'nope'"):
        bootstrap(TreasuryConfig(storage="nope"))


@pytest.mark.parametrize(
    "setting", ["bank_rail", "fx_rates", "card_provider", "vault", "webhook_sender", "clock", "ids"]
)
def test_every_adapter_name_is_checked_before_anything_is_built(
    tmp_path: Path, setting: str
) -> None:
    # The bank rail is built on first use, so an unknown rail used to start fine and answer
    # the first deposit with a 500. No name may wait that long, nor leave a database behind.
    database = tmp_path / "t.db"
    config = TreasuryConfig(database_url=f"sqlite:///{database}", **{setting: "nope"})
    with pytest.raises(AdapterNotFound, match="adapter named 'nope'"):
        bootstrap(config)
    assert not database.exists()


def test_an_adapter_passed_in_needs_no_registered_name() -> None:
    from treasury_sandbox import SandboxBankRail, SandboxClock

    clock = SandboxClock()
    rail = SandboxBankRail()
    config = TreasuryConfig(database_url="memory://", bank_rail="nope", clock="nope")
    treasury = bootstrap(config, rail=rail, clock=clock)
    assert treasury.adapters.rail is rail


def test_sandbox_mode_uses_the_advanceable_clock() -> None:
    from treasury_sandbox import SandboxClock
    from treasury_system import SystemClock

    assert isinstance(bootstrap(TreasuryConfig(database_url="memory://")).clock, SandboxClock)
    live = bootstrap(
        TreasuryConfig(database_url="memory://", sandbox=False, vault_key=SecretStr(generate_key()))
    )
    assert isinstance(live.clock, SystemClock)


def test_outside_sandbox_mode_a_vault_key_is_required() -> None:
    from treasury_vault.aesgcm import VaultKeyMissing

    with pytest.raises(VaultKeyMissing, match="TREASURY_VAULT_KEY"):
        bootstrap(TreasuryConfig(database_url="memory://", sandbox=False))


def test_a_plugin_may_supply_the_webhook_sender() -> None:
    class QueueSender:
        async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> int:
            return 202

    class Plugin:
        @hookimpl
        def register_notifier(self) -> Mapping[str, Any]:
            return {"queue": lambda config: QueueSender()}

    pm = make_plugin_manager(plugins=[Plugin()])
    treasury = bootstrap(
        TreasuryConfig(database_url="memory://", webhook_sender="queue"), plugins=pm
    )
    assert isinstance(treasury.notifications.sender, QueueSender)
    with pytest.raises(AdapterNotFound):
        bootstrap(TreasuryConfig(database_url="memory://", webhook_sender="nope"), plugins=pm)


def test_the_stripe_provider_refuses_to_be_built_without_a_key() -> None:
    # A config built in code is checked by the adapter's settings when the adapter is built.
    from treasury_core.settings import BadSetting

    config = TreasuryConfig(card_provider="stripe")
    with pytest.raises(BadSetting, match="TREASURY_STRIPE_API_KEY is required"):
        bootstrap(config, storage=MemoryStorage())


class _AcmeSettings(AdapterSettings):
    env_prefix: ClassVar[str] = "TREASURY_ACME_"

    region: str = "eu"
    api_key: SecretStr | None = None
    retries: int = Field(default=2, ge=0)
    zones: tuple[str, ...] = ()
    limits: dict[str, int] = Field(default_factory=dict)

    _split = field_validator("zones", mode="before")(split_items)
    _json = field_validator("limits", mode="before")(from_json)

    def missing(self, config: TreasuryConfig) -> list[str]:
        if config.card_provider == "acme" and self.api_key is None:
            return ["TREASURY_ACME_API_KEY is required when TREASURY_CARD_PROVIDER=acme"]
        return []


class _AcmePlugin:
    @hookimpl
    def treasury_settings_models(self) -> Iterable[type[AdapterSettings]]:
        return (_AcmeSettings,)


def test_a_plugins_settings_model_is_read_from_the_environment() -> None:
    from treasury_core.settings import config_from_env, known_variables

    pm = make_plugin_manager(plugins=[_AcmePlugin()])
    assert _AcmeSettings in settings_models(pm)
    assert {"TREASURY_ACME_REGION", "TREASURY_ACME_API_KEY"} <= known_variables(pm)
    config = config_from_env(
        {
            "TREASURY_ACME_REGION": "us",
            "treasury_acme_api_key": "k",
            "TREASURY_ACME_ZONES": "a, b c",
            "TREASURY_ACME_LIMITS": '{"EUR": 5}',
        },
        plugins=pm,
    )
    acme = config.adapter_settings(_AcmeSettings)
    assert (acme.region, acme.retries, acme.zones, acme.limits) == (
        "us",
        2,
        ("a", "b", "c"),
        {"EUR": 5},
    )
    assert acme.api_key is not None and acme.api_key.get_secret_value() == "k"
    assert "'k'" not in repr(config)
    assert config.adapters["acme_region"] == "us"


def test_a_plugins_settings_refuse_a_bad_value_and_name_what_is_missing() -> None:
    from treasury_core.settings import BadSetting, config_from_env

    pm = make_plugin_manager(plugins=[_AcmePlugin()])
    with pytest.raises(BadSetting) as refused:
        config_from_env({"TREASURY_ACME_RETRIES": "-1"}, plugins=pm)
    assert refused.value.message == (
        "TREASURY_ACME_RETRIES='-1' is not valid: Input should be greater than or equal to 0"
    )
    with pytest.raises(BadSetting, match=r"TREASURY_ACME_LIMITS='\{' is not valid: Invalid JSON"):
        config_from_env({"TREASURY_ACME_LIMITS": "{"}, plugins=pm)
    with pytest.raises(BadSetting) as missing:
        config_from_env({"TREASURY_CARD_PROVIDER": "acme"}, plugins=pm)
    assert missing.value.message == (
        "The settings are not valid: "
        "TREASURY_ACME_API_KEY is required when TREASURY_CARD_PROVIDER=acme"
    )


def test_a_plugins_settings_given_in_code() -> None:
    from pydantic import ValidationError

    by_model = TreasuryConfig(adapters=[_AcmeSettings(region="us")])
    by_name = TreasuryConfig(adapters={"acme_region": "us"})
    assert by_model == by_name
    assert by_model.adapter_settings(_AcmeSettings).region == "us"
    assert TreasuryConfig().adapter_settings(_AcmeSettings) == _AcmeSettings()
    with pytest.raises(ValidationError):
        TreasuryConfig(adapters={"acme_retries": -1}).adapter_settings(_AcmeSettings)
    # The bundled adapters' keywords land beside them; a keyword wins over the same name.
    both = TreasuryConfig(
        stripe_max_threads=4, adapters={"stripe_max_threads": 8, "acme_region": "us"}
    )
    assert both.adapters == {"stripe_max_threads": 4, "acme_region": "us"}


def test_the_stripe_provider_without_its_extra_says_which_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As on an install without the stripe extra: importing stripe fails.
    monkeypatch.setitem(sys.modules, "stripe", None)
    monkeypatch.delitem(sys.modules, "treasury_stripe.card_provider", raising=False)
    from treasury_core.settings import BadSetting

    config = TreasuryConfig(card_provider="stripe", stripe_api_key=SecretStr("sk_test_x"))
    with pytest.raises(BadSetting, match=r"pip install 'treasury-core\[stripe\]'"):
        bootstrap(config, storage=MemoryStorage())
