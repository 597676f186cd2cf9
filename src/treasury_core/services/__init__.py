"""Application services: async, one business operation per storage transaction."""

from treasury_core.services.companies import CompanyService, CreatedCompany
from treasury_core.services.idempotency import Claim, IdempotencyService, Replay
from treasury_core.services.wallets import WalletService

__all__ = [
    "Claim",
    "CompanyService",
    "CreatedCompany",
    "IdempotencyService",
    "Replay",
    "WalletService",
]
