"""Registers the Stripe card provider under ``stripe``."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from treasury_core.config import AdapterSettings, TreasuryConfig
from treasury_core.plugins.hookspecs import CardProviderFactory, hookimpl
from treasury_core.ports import CardProvider, Clock


def _stripe_card_provider(config: TreasuryConfig, clock: Clock) -> CardProvider:
    # Here, not at the top: treasury_core.settings loads the environment reader, which an
    # embedding application that never reads TREASURY_* variables does not import.
    from treasury_core.settings import BadSetting

    # Imported here: registering the adapter must not need the stripe extra installed.
    try:
        from treasury_stripe.card_provider import StripeCardProvider
    except ModuleNotFoundError as exc:
        if exc.name != "stripe":
            raise
        raise BadSetting(
            "TREASURY_CARD_PROVIDER=stripe needs the stripe extra: "
            "pip install 'treasury-core[stripe]'"
        ) from None
    from treasury_stripe.settings import StripeSettings

    settings = config.adapter_settings(StripeSettings)
    if settings.api_key is None:
        # config_from_env refuses this already; a config built in code is checked here.
        raise BadSetting("TREASURY_STRIPE_API_KEY is required when TREASURY_CARD_PROVIDER=stripe")
    if not config.public_url:
        # Not refused: the API still works, and a front end may authenticate with Stripe.js.
        logging.getLogger("treasury.stripe").warning(
            "TREASURY_PUBLIC_URL is not set: Stripe gets no return_url, so the hosted challenge "
            "page cannot send customers to Stripe's 3-D Secure page"
        )
    secret = settings.webhook_secret
    return StripeCardProvider(
        settings.api_key.get_secret_value(),
        clock,
        api_base=settings.api_base,
        timeout_seconds=settings.timeout_seconds,
        webhook_secret=None if secret is None else secret.get_secret_value(),
        max_threads=settings.max_threads,
    )


@hookimpl
def register_card_provider() -> Mapping[str, CardProviderFactory]:
    """The Stripe card provider (PaymentIntents; needs ``TREASURY_STRIPE_API_KEY``)."""
    return {"stripe": _stripe_card_provider}


@hookimpl
def treasury_settings_models() -> Iterable[type[AdapterSettings]]:
    """``TREASURY_STRIPE_*``: :class:`~treasury_stripe.settings.StripeSettings`."""
    from treasury_stripe.settings import StripeSettings

    return (StripeSettings,)
