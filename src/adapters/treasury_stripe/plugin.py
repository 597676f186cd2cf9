"""Registers the Stripe card provider under ``stripe``."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from treasury_core.config import TreasuryConfig
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
    if config.stripe_api_key is None:
        # TreasuryConfig refuses this already; an embedding application may have built the
        # config with model_construct, which skips that check.
        raise BadSetting("TREASURY_STRIPE_API_KEY is required when TREASURY_CARD_PROVIDER=stripe")
    if not config.public_url:
        # Not refused: the API still works, and a front end may authenticate with Stripe.js.
        logging.getLogger("treasury.stripe").warning(
            "TREASURY_PUBLIC_URL is not set: Stripe gets no return_url, so the hosted challenge "
            "page cannot send customers to Stripe's 3-D Secure page"
        )
    secret = config.stripe_webhook_secret
    return StripeCardProvider(
        config.stripe_api_key.get_secret_value(),
        clock,
        api_base=config.stripe_api_base,
        timeout_seconds=config.stripe_timeout_seconds,
        webhook_secret=None if secret is None else secret.get_secret_value(),
        max_threads=config.stripe_max_threads,
    )


@hookimpl
def register_card_provider() -> Mapping[str, CardProviderFactory]:
    """The Stripe card provider (PaymentIntents; needs ``TREASURY_STRIPE_API_KEY``)."""
    return {"stripe": _stripe_card_provider}
