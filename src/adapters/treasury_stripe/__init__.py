"""The Stripe card provider: Stripe PaymentIntents (``TREASURY_CARD_PROVIDER=stripe``)."""
