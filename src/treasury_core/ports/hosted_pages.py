"""Where the pages and URLs the services hand out live: an interface's, not the core's.

A payment whose card asks for 3-D Secure sends the provider a ``return_url``; a payment method
token intent hands its client two URLs. The services build them from the server's public base
URL (config ``public_url``) and these paths, which the wire layer supplies
(:data:`treasury_core.interface.urls.INTERFACE_PATHS`, the bundled app's routes) or an
embedding application that serves those pages elsewhere.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["HostedPages"]


class HostedPages(Protocol):
    """The paths, relative to the server's public base URL, of what a customer is sent to."""

    def challenge_return_path(self, lookup_id: str) -> str:
        """Where the card provider's 3-D Secure page sends the customer of the payment intent
        with ``lookup_id`` back to."""
        ...

    def tokenization_form_path(self, pmti_id: str, secret: str) -> str:
        """The hosted form where a customer submits the card of PMTI ``pmti_id``."""
        ...

    def confirm_path(self, pmti_id: str, secret: str) -> str:
        """Where the client's server submits the card of PMTI ``pmti_id``."""
        ...
