"""Card on file: card checks, payment method token intents and saved-card tokens."""
