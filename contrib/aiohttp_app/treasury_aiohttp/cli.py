"""The ``treasury`` command: serve, migrate, and manage companies."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import click

from treasury_aiohttp import logs
from treasury_core import Treasury, TreasuryError, bootstrap, config_from_env
from treasury_core.config import TreasuryConfig

DATABASE_HELP = (
    "Database URL (sqlite:///path, postgresql://…) or an SQLite file path."
    " [env: TREASURY_DATABASE_URL; default: ./treasury.db]"
)


def _database_url(value: str | None) -> str | None:
    if value is None or "://" in value or value.startswith("memory:"):
        return value
    return f"sqlite:///{value}"


def _config(database: str | None, **overrides: Any) -> TreasuryConfig:
    return config_from_env(database_url=_database_url(database), **overrides)


def _bootstrap(database: str | None) -> Treasury:
    try:
        return bootstrap(_config(database))
    except TreasuryError as exc:
        raise click.ClickException(exc.message) from exc
    except Exception as exc:
        # A bad URL, an unreachable server, an unwritable path, a malformed setting: say what,
        # not where in the code.
        raise click.ClickException(f"cannot open the treasury: {exc}") from exc


LOG_FORMAT = click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    envvar="TREASURY_LOG_FORMAT",
    help="Log lines as text or as JSON objects; secrets are scrubbed either way.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """treasury-core: payments and treasury server and tools."""


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option(
    "--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="TCP port."
)
@click.option("--database", default=None, help=DATABASE_HELP)
@LOG_FORMAT
def serve(host: str, port: int, database: str | None, log_format: str) -> None:
    """Apply migrations and serve the HTTP interface."""
    from aiohttp import web

    from treasury_aiohttp.access_log import RedactingAccessLogger
    from treasury_aiohttp.app import create_app

    logs.configure(json_lines=log_format == "json")
    treasury = _bootstrap(database)
    click.echo(
        f"treasury-core serving on http://{host}:{port}"
        f" (database {_redacted(treasury.config.database_url)})"
    )
    web.run_app(
        create_app(treasury, close_treasury=True, run_jobs=True),
        host=host,
        port=port,
        print=None,
        # Client, request (bearer secrets in URLs blanked), status, size, duration; the log
        # line already starts with the time.
        access_log_class=RedactingAccessLogger,
    )


@main.command()
@click.option("--database", default=None, help=DATABASE_HELP)
def migrate(database: str | None) -> None:
    """Bring the database schema up to date."""
    treasury = _bootstrap(database)
    treasury.close()
    click.echo("database is up to date")


@main.command()
@click.option("--database", default=None, help=DATABASE_HELP)
@LOG_FORMAT
def worker(database: str | None, log_format: str) -> None:
    """Run due jobs and deliver events (webhooks, callbacks), without serving HTTP.

    Any number of workers may share one PostgreSQL database: each claims its own rows.
    """
    import asyncio

    from treasury_aiohttp.worker import run_worker

    logs.configure(json_lines=log_format == "json")
    treasury = _bootstrap(database)
    click.echo(f"treasury-core worker on {_redacted(treasury.config.database_url)}")
    try:
        asyncio.run(run_worker(treasury))
    except KeyboardInterrupt:
        pass
    finally:
        treasury.close()


@main.command("vault-key")
def vault_key() -> None:
    """Print a new random vault key (set it as TREASURY_VAULT_KEY; keep it secret)."""
    from treasury_vault.aesgcm import generate_key

    click.echo(generate_key())


@main.group()
def companies() -> None:
    """Manage companies (tenants) and their keys."""


@companies.command("create")
@click.argument("name")
@click.option("--database", default=None, help=DATABASE_HELP)
def create_company(name: str, database: str | None) -> None:
    """Create a company; prints its ids and keys as one JSON line (keys are shown only once)."""
    treasury = _bootstrap(database)
    try:
        created = asyncio.run(treasury.companies.create_company(name))
    except TreasuryError as exc:
        raise click.ClickException(exc.message) from exc
    finally:
        treasury.close()
    sys.stdout.write(
        json.dumps(
            {
                "company_id": created.company.id,
                "account_id": created.merchant_account.id,
                "secret_key": created.secret_key,
                "publishable_key": created.publishable_key,
            }
        )
        + "\n"
    )


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1]


if __name__ == "__main__":  # pragma: no cover
    main()
