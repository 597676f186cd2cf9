"""The HTTP status the service interface gives each kind of error (:mod:`.errors` holds it)."""

from __future__ import annotations

from treasury_core.interface.errors import HTTP_STATUS, http_status

__all__ = ["HTTP_STATUS", "http_status"]
