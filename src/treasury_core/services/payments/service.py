"""The payments service, assembled from its parts (one module each, beside this one)."""

from __future__ import annotations

from treasury_core.services.payments.adoption import Adoption
from treasury_core.services.payments.capture import CaptureAndVoid
from treasury_core.services.payments.refunds import Refunds


class PaymentService(Adoption, CaptureAndVoid, Refunds):
    """Payment intents over a card provider (see the package docstring for the call pattern).

    Its operations live in one class per seam, all over one shared
    :class:`~treasury_core.services.payments.core.PaymentCore`: create and pay
    (:class:`~treasury_core.services.payments.charging.Charging`), 3-D Secure
    (:class:`~treasury_core.services.payments.challenges.Challenges`), capture and cancel
    (:class:`~treasury_core.services.payments.capture.CaptureAndVoid`) and refunds
    (:class:`~treasury_core.services.payments.refunds.Refunds`). Every public method takes the
    company's id first (when the caller is a merchant), then the record's id, then the request.
    """
