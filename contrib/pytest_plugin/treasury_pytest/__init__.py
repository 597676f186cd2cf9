"""pytest fixtures for code that embeds treasury-core; registered through the ``pytest11``
entry point, so installing treasury-core makes them available to every test suite.

The fixtures live in :mod:`treasury_pytest.plugin`; the classes they hand out are importable
from here for annotations: ``def test_x(treasury_server: TreasuryServer) -> None``.
"""

from treasury_pytest.receiver import ReceivedWebhook, RejectedRequest, WebhookReceiver
from treasury_pytest.server import TreasuryServer

__all__ = ["ReceivedWebhook", "RejectedRequest", "TreasuryServer", "WebhookReceiver"]
