"""The hosted pages a customer's browser sees: payment, 3-D Secure challenge, tokenization."""
