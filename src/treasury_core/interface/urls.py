"""The paths of the interface's hosted pages and URL-secret endpoints.

The services hand these out (a 3-D Secure ``return_url``, a PMTI's two URLs) through the
:class:`~treasury_core.ports.hosted_pages.HostedPages` they are given; :data:`INTERFACE_PATHS`
is the one the bundled app serves, and what :func:`treasury_core.bootstrap` gives them unless
told otherwise.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CHALLENGE_RETURN_PATH",
    "CONFIRM_PATH",
    "INTERFACE_PATHS",
    "TOKENIZATION_PATH",
    "InterfacePaths",
]

#: Where the card provider's 3-D Secure page sends the customer back (the hosted pages'
#: ``GET /pay/{lookup_id}/challenge/return``).
CHALLENGE_RETURN_PATH = "/pay/{lookup_id}/challenge/return"
#: Where the hosted tokenization form of a PMTI lives.
TOKENIZATION_PATH = "/tokenize/{pmti_id}/{secret}"
#: Where the server-to-server card submission of a PMTI goes.
CONFIRM_PATH = "/api/v1/payment_method_token_intent/{pmti_id}/confirm/{secret}"


class InterfacePaths:
    """The interface's paths (a :class:`~treasury_core.ports.hosted_pages.HostedPages`)."""

    def challenge_return_path(self, lookup_id: str) -> str:
        """``/pay/{lookup_id}/challenge/return``."""
        return CHALLENGE_RETURN_PATH.format(lookup_id=lookup_id)

    def tokenization_form_path(self, pmti_id: str, secret: str) -> str:
        """``/tokenize/{pmti_id}/{secret}``."""
        return TOKENIZATION_PATH.format(pmti_id=pmti_id, secret=secret)

    def confirm_path(self, pmti_id: str, secret: str) -> str:
        """``/api/v1/payment_method_token_intent/{pmti_id}/confirm/{secret}``."""
        return CONFIRM_PATH.format(pmti_id=pmti_id, secret=secret)


#: The bundled app's paths.
INTERFACE_PATHS: Final = InterfacePaths()
