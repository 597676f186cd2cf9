"""``treasury operator-keys …``: the operator's own keys, bound to no company.

An operator key (``ok_…``) is what ``POST /api/v1/bank-statements`` accepts, and nothing else
does; no merchant route accepts it. Built by :func:`commands` with the main command's helpers
passed in, as :mod:`treasury_aiohttp.cli.bank` is.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

import click

from treasury_core import OperatorKey, Treasury

T = TypeVar("T")


class RunOn(Protocol):
    """The main command's way to run work on the treasury (see ``cli._run_on``)."""

    def __call__(
        self,
        database: str | None,
        work: Callable[[Treasury], Coroutine[Any, Any, T]],
        *,
        existing: bool = True,
    ) -> T: ...


def _line(value: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(value) + "\n")


def _shown(key: OperatorKey) -> dict[str, Any]:
    """What may be shown of a stored key: never the key, which is not stored."""
    return {
        "id": key.id,
        "name": key.name,
        "prefix": key.prefix,
        "created_at": key.created_at.isoformat(),
        "revoked_at": None if key.revoked_at is None else key.revoked_at.isoformat(),
    }


def commands(run_on: RunOn, database_help: str) -> list[click.Command]:
    """The ``operator-keys`` group."""

    @click.group("operator-keys")
    def operator_keys() -> None:
        """Manage the operator's keys (for bank statements)."""

    @operator_keys.command("create")
    @click.argument("name")
    @click.option("--database", default=None, help=database_help)
    def create(name: str, database: str | None) -> None:
        """Issue an operator key called NAME and print it.

        Prints one JSON line: the key's id, name, prefix, creation time and the key itself,
        shown only this once (the database keeps only its digest). NAME must be unique among
        live operator keys. The key is bound to no company: it is accepted by
        POST /api/v1/bank-statements and refused on every merchant route.
        """
        # The first key of a new install may come before any company: it may make the database.
        key, raw = run_on(
            database, lambda treasury: treasury.companies.create_operator_key(name), existing=False
        )
        _line({**_shown(key), "key": raw})

    @operator_keys.command("list")
    @click.option("--database", default=None, help=database_help)
    def list_(database: str | None) -> None:
        """Print every operator key as JSON lines.

        Oldest first, revoked ones too: id, name, prefix (the first 7 characters), creation
        and revocation times. The keys themselves cannot be shown: only their digests are kept.
        """
        keys: list[OperatorKey] = run_on(
            database, lambda treasury: treasury.companies.operator_keys()
        )
        for key in keys:
            _line(_shown(key))

    @operator_keys.command("revoke")
    @click.argument("id_or_name")
    @click.option("--database", default=None, help=database_help)
    def revoke(id_or_name: str, database: str | None) -> None:
        """Revoke the live operator key with id or name ID_OR_NAME.

        Prints one JSON line: the key's id, name and time of revocation. No live key of that
        id or name is an error and changes nothing. Server processes stop accepting the key
        within TREASURY_API_KEY_CACHE_SECONDS (2 s).
        """
        key: OperatorKey = run_on(
            database, lambda treasury: treasury.companies.revoke_operator_key(id_or_name)
        )
        _line(_shown(key))

    return [operator_keys]
