"""Application services: async, one business operation per storage transaction."""

from treasury_core.idempotency import Claim
from treasury_core.services.companies import CompanyService, CreatedCompany
from treasury_core.services.idempotency import IdempotencyService, Replay
from treasury_core.services.wallets import WalletService

__all__ = [
    "Claim",
    "CompanyService",
    "CreatedCompany",
    "IdempotencyService",
    "Replay",
    "WalletService",
]
