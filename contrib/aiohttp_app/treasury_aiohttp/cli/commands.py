"""The ``treasury`` command: serve, run workers, migrate, audit the ledger, manage companies
and the operator's keys, exchange files with the bank."""

from __future__ import annotations

import asyncio
import errno
import gc
import json
import logging
import socket
import sys
import time
from collections.abc import Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from treasury_aiohttp import logs
from treasury_core import KeyKind, Treasury, TreasuryError, bootstrap, config_from_env
from treasury_core.config import TreasuryConfig
from treasury_core.ports import Storage

if TYPE_CHECKING:
    from rich.console import Console

    from treasury_core.ledger.audit import AuditProgress

T = TypeVar("T")

DATABASE_HELP = (
    "Database URL (sqlite:///path, postgresql://…) or an SQLite file path."
    " [env: TREASURY_DATABASE_URL; default: ./treasury.db]"
)


def _database_url(value: str | None) -> str | None:
    if value is None or "://" in value or value.startswith("memory:"):
        return value
    return f"sqlite:///{value}"


def _config(database: str | None, *, serving: bool = False) -> TreasuryConfig:
    """The config from ``TREASURY_*`` and ``--database``; one line on a bad value, and every
    missing required setting at once: the config's, the plugins' (the vault key outside
    sandbox mode) and, for ``serving``, the form key."""
    from treasury_core.plugins import make_plugin_manager, missing_settings

    plugins = make_plugin_manager()

    def required(config: TreasuryConfig) -> list[str]:
        missing = missing_settings(plugins, config)
        if serving:
            from treasury_aiohttp.hosted.security import missing_form_key

            missing += missing_form_key(config)
        return missing

    try:
        return config_from_env(
            database_url=_database_url(database), plugins=plugins, also_required=required
        )
    except TreasuryError as exc:
        raise click.ClickException(exc.message) from exc


def _first_line(exc: BaseException) -> str:
    # Driver errors run to several lines (a hint, a link to SQLAlchemy's docs): the first says it.
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _open(config: TreasuryConfig) -> Treasury:
    try:
        return bootstrap(config)
    except TreasuryError as exc:
        raise click.ClickException(exc.message) from exc
    except Exception as exc:
        # A bad URL, an unreachable server, an unwritable path, a missing driver: say what,
        # not where in the code.
        raise click.ClickException(f"cannot open the treasury: {_first_line(exc)}") from exc


def _bootstrap(database: str | None) -> Treasury:
    return _open(_config(database))


SANDBOX_WARNING = (
    "SANDBOX MODE: any secret key can credit money from nowhere and move business time; "
    "set TREASURY_SANDBOX=false in production"
)


def _bind(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to ``host:port`` (every address it resolves to), not yet listening.

    Bound before anything else starts, so a busy port is one line and exit status 1 rather than
    "serving on …" and a traceback. They start listening when the app serves, so a client that
    connects earlier is refused rather than kept waiting through the migrations.
    """
    where = f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise click.ClickException(f"cannot listen on {where}: {exc.strerror}") from exc
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            # As asyncio's create_server does: a restart may reuse a port in TIME_WAIT, and an
            # IPv6 socket does not also claim the IPv4 address another entry binds.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        for sock in bound:
            sock.close()
        reason = (
            "the address is in use (is another server running?)"
            if exc.errno == errno.EADDRINUSE
            else exc.strerror or str(exc)
        )
        raise click.ClickException(f"cannot listen on {where}: {reason}") from exc
    return bound


#: The garbage collector's thresholds in ``treasury serve`` and ``treasury worker`` on CPython
#: 3.11 and 3.12: a young generation ten times the default (700), and each older generation
#: collected after twice as many collections of the one below it. A create-intent request makes
#: hundreds of short-lived containers, so with the default the young generation was collected
#: every request or two; with these, creates cost less CPU and reads the same (CHANGELOG.md,
#: "Performance history"). CPython 3.13 raised the default
#: (2,000) and 3.14 collects incrementally with other meanings for the numbers, so the commands
#: leave them alone there. Code that embeds the library keeps its own settings.
GC_THRESHOLDS = (7_000, 20, 20)


def _tune_collector() -> None:
    """Take what start-up made out of the garbage collector's sight, then set its thresholds.

    Start-up leaves a large heap of objects that live as long as the process (modules,
    pydantic and SQLAlchemy schemas, the app and its routes), which every full collection would
    traverse again; under load those pauses made the server's latency tail. Garbage is
    collected first, so nothing that is garbage already is kept for good.
    """
    gc.collect()
    gc.freeze()
    if sys.version_info < (3, 13):
        gc.set_threshold(*GC_THRESHOLDS)


LOG_FORMAT = click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    envvar="TREASURY_LOG_FORMAT",
    help="Log lines as text or as JSON objects; secrets are scrubbed either way.",
)

#: The logger of the command line's own lines (the sandbox banner, "serving on", errors).
cli_log = logging.getLogger("treasury.cli")

#: The key of ``click.Context.meta`` that says whether this command logs JSON lines.
_JSON_LOGS = "treasury.json_logs"


def _json_logs() -> bool:
    context = click.get_current_context(silent=True)
    return bool(context is not None and context.meta.get(_JSON_LOGS))


def _configure_logs(log_format: str, *, serving: bool) -> None:
    """Log as ``log_format`` (the group's or the command's: either may ask for JSON) says.

    ``serving`` (serve, worker): every INFO record through :func:`logs.configure`. A one-shot
    command keeps Python's default (warnings and errors on stderr) unless JSON is asked for,
    and never shows the vault's sandbox-key notice: that notice matters where cards are
    sealed, and repeated by every ``treasury companies list`` it only teaches to ignore
    warnings.
    """
    meta = click.get_current_context().meta
    json_lines = bool(meta.get(_JSON_LOGS)) or log_format == "json"
    meta[_JSON_LOGS] = json_lines
    if serving or json_lines:
        logs.configure(json_lines=json_lines, level=logging.INFO if serving else logging.WARNING)
    logging.getLogger("treasury.vault").setLevel(logging.NOTSET if serving else logging.ERROR)


def _say(line: str, *, err: bool = False, level: int = logging.INFO, **style: Any) -> None:
    """One line of the command's own on stdout (``err``: stderr): as it is, or, with JSON
    logs, as a log entry of ``treasury.cli``, so that every line of the process parses."""
    if not _json_logs():
        click.secho(line, err=err, **style)
        return
    entry = logs.JsonFormatter().line(cli_log.name, logging.getLevelName(level), line, time.time())
    stream = sys.stderr if err else sys.stdout
    stream.write(entry + "\n")
    stream.flush()


class _Commands(click.Group):
    """The ``treasury`` group: with JSON logs, a refusal or a crash is a JSON line too."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; with JSON logs, log what would have been printed as text."""
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            if not ctx.meta.get(_JSON_LOGS):
                raise
            cli_log.error("%s", exc.format_message())
            raise click.exceptions.Exit(exc.exit_code) from exc
        except Exception:
            if not ctx.meta.get(_JSON_LOGS):
                raise
            # The traceback goes into the entry's "exception" field, scrubbed like any other.
            cli_log.exception("the command failed")
            raise click.exceptions.Exit(1) from None


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    package_name="treasury-core", prog_name="treasury-core", message="%(prog)s %(version)s"
)
@LOG_FORMAT
def main(log_format: str) -> None:
    """treasury-core: payments and treasury server and tools.

    Settings come from TREASURY_* environment variables (TREASURY_DATABASE_URL,
    TREASURY_POOL_SIZE, TREASURY_VAULT_KEY, ...); a command's --database option overrides
    TREASURY_DATABASE_URL. A TREASURY_* variable that no setting or plugin reads is warned
    about with the closest known name. Run "treasury COMMAND --help" for each command's
    options.
    """
    _configure_logs(log_format, serving=False)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option(
    "--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="TCP port."
)
@click.option("--database", default=None, help=DATABASE_HELP)
@LOG_FORMAT
def serve(host: str, port: int, database: str | None, log_format: str) -> None:
    """Apply migrations and serve the HTTP interface."""
    from treasury_aiohttp.access_log import RedactingAccessLogger
    from treasury_aiohttp.app import create_app
    from treasury_aiohttp.server import serve as serve_app

    _configure_logs(log_format, serving=True)
    config = _config(database, serving=True)
    sockets = _bind(host, port)
    try:
        treasury = _open(config)
        app = create_app(treasury, close_treasury=True, run_jobs=True)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    if config.sandbox:
        _say(SANDBOX_WARNING, err=True, level=logging.WARNING, fg="yellow", bold=True)
    bound_port = sockets[0].getsockname()[1]
    _say(
        f"treasury-core serving on http://{host}:{bound_port}"
        f" (database {_redacted(config.database_url)})"
    )
    _tune_collector()
    # Not web.run_app: its runner answers malformed requests with aiohttp's plain text and an
    # ERROR traceback each (see treasury_aiohttp.server).
    asyncio.run(
        serve_app(
            app,
            sockets,
            # Client, request (bearer secrets in URLs blanked), status, size, duration; the
            # log line already starts with the time.
            access_log_class=RedactingAccessLogger,
        )
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
    """Run due jobs and deliver events, without HTTP.

    The background loop of "treasury serve" on its own: due jobs (settlements, payouts, hold
    expiry), event deliveries (webhooks, callbacks) and the purge of old idempotency records
    and events. Any number of workers may share one PostgreSQL database: each claims its own
    rows. Stops after the batch in progress on SIGINT or SIGTERM.
    """
    import asyncio

    from treasury_aiohttp.worker import run_worker

    _configure_logs(log_format, serving=True)
    treasury = _bootstrap(database)
    where = _redacted(treasury.config.database_url)
    try:
        _tune_collector()
        asyncio.run(run_worker(treasury, started=lambda: _say(f"treasury-core worker on {where}")))
    except KeyboardInterrupt:
        pass
    finally:
        treasury.close()


@main.command("vault-key")
def vault_key() -> None:
    """Print a new random vault key.

    Set it as TREASURY_VAULT_KEY (it encrypts stored card data) and keep it secret.
    """
    from treasury_vault.aesgcm import generate_key

    click.echo(generate_key())


def _json_option(what: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``--json`` (as ``as_json``): print ``what`` as one JSON object instead of text."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help=f"Print the {what} as one JSON object on stdout instead of text.",
    )


@main.group()
def ledger() -> None:
    """Audit the double-entry ledger."""


class _CannotVerify(click.ClickException):
    """The audit could not run (as opposed to finding differences, exit status 1)."""

    exit_code = 2


@ledger.command("verify")
@click.option("--database", default=None, help=DATABASE_HELP)
@_json_option("report")
@click.option(
    "--page-size",
    default=1_000,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Postings read per query: larger is faster, smaller holds less in memory.",
)
def verify(database: str | None, as_json: bool, page_size: int) -> None:
    """Re-sum every account's postings and check the ledger invariants.

    Compares each account's stored counters (posted and pending debits and credits) with the
    sum of its postings, and checks that every currency sums to zero, every journal balances,
    no counter is negative and each pending movement is resolved exactly once; and that each
    account mirroring a treasury bank account holds its opening balance plus the statement
    lines stored for it, one posting per line. It reads one
    consistent snapshot in a read-only transaction, so it is safe on a live database: it
    writes nothing and applies no migrations. A progress bar goes to stderr when it is a
    terminal; the summary and each difference go to stdout.

    Exit status: 0 when the ledger is sound, 1 when any difference is found, 2 when the
    audit cannot run (no database, no schema, unreachable server).
    """
    from rich.console import Console
    from rich.text import Text

    from treasury_core.ledger.audit import audit_ledger
    from treasury_core.services.movements.safeguarding import check_bank_mirrors

    storage = _open_storage(database)
    try:
        with _AuditProgressBar(Console(stderr=True)) as bar:
            report = audit_ledger(
                storage,
                page_size=page_size,
                progress=bar.update,
                bank_mirrors=check_bank_mirrors,
            )
    except Exception as exc:
        # Missing tables, a dropped connection, a refused login: the audit said nothing about
        # the ledger, which exit status 1 would claim.
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if "no such table" in first_line or "does not exist" in first_line:
            first_line += " (has `treasury migrate` run on this database?)"
        raise _CannotVerify(f"cannot read the ledger: {first_line}") from exc
    finally:
        storage.close()
    if as_json:
        sys.stdout.write(json.dumps(report.as_dict()) + "\n")
    else:
        out = Console(highlight=False)
        summary = (
            f"{report.accounts} accounts, {report.postings} postings, "
            f"{report.pending_movements} pending movements ({report.open_pending_movements} open)"
            f" in {', '.join(report.currencies) or 'no currencies'}"
        )
        if report.ok:
            out.print(
                Text(f"ledger sound: {summary}; no differences", style="green"), soft_wrap=True
            )
        else:
            out.print(
                Text(
                    f"ledger differs: {len(report.differences)} difference(s) in {summary}:",
                    style="bold red",
                ),
                soft_wrap=True,
            )
            for difference in report.differences:
                # Text, not markup: the messages start with "[3]", which rich would eat.
                out.print(Text(f"  - {difference}"), soft_wrap=True)
    if not report.ok:
        sys.exit(1)


_STAGE_LABELS = {"accounts": "accounts", "postings": "postings", "pendings": "pending movements"}


class _AuditProgressBar:
    """A rich progress bar with one line per audit stage (shown only on a terminal)."""

    def __init__(self, console: Console) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskID,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description:<18}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            # In a log file a progress bar is noise; the summary on stdout says it all.
            disable=not console.is_terminal,
        )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> _AuditProgressBar:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def update(self, step: AuditProgress) -> None:
        """Show how far the audit is."""
        task = self._tasks.get(step.stage)
        if task is None:
            task = self._tasks[step.stage] = self._progress.add_task(
                _STAGE_LABELS.get(step.stage, step.stage), total=step.total
            )
        self._progress.update(task, completed=step.done, total=step.total)


def _missing_sqlite_file(config: TreasuryConfig) -> Path | None:
    """The SQLite file ``config`` names when there is none, else ``None``.

    Opening a missing SQLite file would create an empty one: a command that only reads
    (an audit, a status) must refuse it instead of answering for an empty database.
    """
    url = config.database_url
    if config.storage_name != "sqlalchemy" or not url.startswith("sqlite:"):
        return None
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise click.ClickException(f"cannot open the treasury: {_first_line(exc)}") from exc
    if parsed.query.get("uri") == "true":
        return None  # a SQLite URI filename: its file is SQLite's to find, not a path here
    path = Path(parsed.database or "").expanduser()
    return None if path.is_file() else path


def _open_storage(database: str | None) -> Storage:
    """The configured storage alone: no migrations, no system accounts, nothing written."""
    from treasury_core.plugins import collect_factories, make_plugin_manager

    try:
        # Not _config: a bad setting here means the audit could not run (exit status 2).
        config = config_from_env(database_url=_database_url(database))
        missing = _missing_sqlite_file(config)
        if missing is not None:
            raise _CannotVerify(f"no database at {missing}")
        factories = collect_factories(make_plugin_manager(), "storage")
        if config.storage_name not in factories:
            raise _CannotVerify(f"no storage adapter named {config.storage_name!r}")
        storage: Storage = factories[config.storage_name](config)
        return storage
    except click.ClickException:
        raise
    except Exception as exc:
        raise _CannotVerify(f"cannot open the database: {exc}") from exc


@main.group()
def companies() -> None:
    """Manage companies (tenants) and their keys."""


@companies.command("create")
@click.argument("name")
@click.option("--database", default=None, help=DATABASE_HELP)
def create_company(name: str, database: str | None) -> None:
    """Create a company called NAME and print its keys.

    Prints the company's id, its merchant account's id and its secret and publishable keys as
    one JSON line. The keys are shown only this once: the database keeps only their digests.
    """
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


def _run_on(
    database: str | None,
    work: Callable[[Treasury], Coroutine[Any, Any, T]],
    *,
    existing: bool = True,
) -> T:
    """Open the treasury, run ``work`` on it, close it; a TreasuryError is one line.

    A missing SQLite file is refused, not created: a command about what a database holds must
    not answer from an empty one made for it. ``existing=False`` is for a command that sets a
    new install up (an operator's first key).
    """
    config = _config(database)
    if existing and (missing := _missing_sqlite_file(config)) is not None:
        raise click.ClickException(f"no database at {missing}")
    treasury = _open(config)
    try:
        return asyncio.run(work(treasury))
    except TreasuryError as exc:
        raise click.ClickException(exc.message) from exc
    finally:
        treasury.close()


def _json_line(value: Any) -> None:
    sys.stdout.write(json.dumps(value) + "\n")


def _when(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


@companies.command("list")
@click.option("--database", default=None, help=DATABASE_HELP)
def list_companies(database: str | None) -> None:
    """Print every company and its keys as JSON lines.

    One line per company, oldest first, with the company's id, name and creation time, its
    merchant account ids and its keys: id, kind, prefix (the first 7 characters), creation and
    revocation times. The keys themselves cannot be shown: the database keeps only their
    digests.
    """

    async def listing(treasury: Treasury) -> list[dict[str, Any]]:
        rows = []
        for company in await treasury.companies.list_companies():
            accounts = await treasury.companies.merchant_accounts(company.id)
            keys = await treasury.companies.api_keys(company.id)
            rows.append(
                {
                    "company_id": company.id,
                    "name": company.name,
                    "created_at": _when(company.created_at),
                    "account_ids": [a.id for a in accounts],
                    "keys": [
                        {
                            "id": k.id,
                            "kind": k.kind.value,
                            "prefix": k.prefix,
                            "created_at": _when(k.created_at),
                            "revoked_at": _when(k.revoked_at),
                        }
                        for k in keys
                    ],
                }
            )
        return rows

    for row in _run_on(database, listing):
        _json_line(row)


@companies.command("rotate-key")
@click.argument("company_id", type=int)
@click.option(
    "--kind",
    type=click.Choice([k.value for k in KeyKind]),
    default=KeyKind.SECRET.value,
    show_default=True,
    help="The kind of key to issue.",
)
@click.option(
    "--keep-old",
    is_flag=True,
    help="Leave the company's other keys of this kind working (revoke them later with "
    "revoke-key), so the new key can be deployed first.",
)
@click.option("--database", default=None, help=DATABASE_HELP)
def rotate_key(company_id: int, kind: str, keep_old: bool, database: str | None) -> None:
    """Issue a new key; revoke the old ones of its kind.

    Issues a key of --kind for company COMPANY_ID and revokes the company's other live keys of
    that kind, unless --keep-old. Prints one JSON line: the company id, the new key's id, kind
    and the key itself, shown only this once, and the ids of the keys revoked. Issuing and
    revoking are one transaction. Server processes stop accepting a revoked key within
    TREASURY_API_KEY_CACHE_SECONDS (2 s).
    """
    rotated = _run_on(
        database,
        lambda treasury: treasury.companies.rotate_api_key(
            company_id, KeyKind(kind), revoke_old=not keep_old
        ),
    )
    _json_line(
        {
            "company_id": rotated.key.company_id,
            "key_id": rotated.key.id,
            "kind": rotated.key.kind.value,
            "key": rotated.raw_key,
            "revoked_key_ids": list(rotated.revoked_key_ids),
        }
    )


@companies.command("revoke-key")
@click.argument("key_id")
@click.option("--database", default=None, help=DATABASE_HELP)
def revoke_key(key_id: str, database: str | None) -> None:
    """Revoke the API key KEY_ID.

    KEY_ID is a key's id as "treasury companies list" shows it. Prints one JSON line with the
    key id and the time of revocation. A key that does not exist or is already revoked is an
    error and changes nothing. Server processes stop accepting the key within
    TREASURY_API_KEY_CACHE_SECONDS (2 s).
    """

    revoked_at = _run_on(database, lambda treasury: treasury.companies.revoke_api_key(key_id))
    _json_line({"key_id": key_id, "revoked_at": _when(revoked_at)})


@main.group()
def events() -> None:
    """Watch the event pipeline (outbox, deliveries)."""


@events.command("status")
@click.option("--database", default=None, help=DATABASE_HELP)
@_json_option("status")
def events_status(database: str | None, as_json: bool) -> None:
    """Print how far behind event delivery is.

    The backlog (events not yet fanned out into deliveries; deliveries pending, and how many
    of them are due), the oldest undelivered event and its age (business time), deliveries per
    second (deliveries attempted in the last 60 s of real time, divided by 60) and the failing
    endpoints: those whose pending deliveries have failed every attempt so far, with their
    company, URL host, the most failures in a row of one delivery, how many deliveries are
    failing and when the next is tried. Callbacks (no endpoint) count per company. Reads only
    unfinished work, so it is quick on a large database; it writes nothing.
    """
    from treasury_core.notifications.status import PipelineStatus

    async def read(treasury: Treasury) -> PipelineStatus:
        await treasury.sandbox.sync_clock()  # business time as the server sees it
        return await treasury.notifications.status()

    status = _run_on(database, read)
    if as_json:
        _json_line(status.as_dict())
        return
    for line in _status_lines(status.as_dict()):
        click.echo(line)


def _status_lines(status: dict[str, Any]) -> list[str]:
    """``treasury events status`` as text: the fields of ``--json``, one thing a line."""
    age = status["oldest_undelivered_age_seconds"]
    oldest = "none" if age is None else f"{status['oldest_undelivered_at']} ({age:.0f} s old)"
    failing = status["failing_endpoints"]
    lines = [
        f"event pipeline at {status['as_of']}",
        f"  events not fanned out:   {status['undispatched_events']}",
        f"  deliveries pending:      {status['pending_deliveries']}"
        f" ({status['due_deliveries']} due)",
        f"  oldest undelivered:      {oldest}",
        f"  deliveries per second:   {status['deliveries_per_second']:.2f}"
        f" (last {status['rate_window_seconds']} s)",
        f"  failing endpoints:       {len(failing) or 'none'}",
    ]
    for f in failing:
        who = f["endpoint_id"] or f"{f['kind']} (no endpoint)"
        lines.append(
            f"    {who} of company {f['company_id']} at {f['host']}:"
            f" {f['consecutive_failures']} consecutive failures,"
            f" {f['failing_deliveries']} deliveries failing, next attempt {f['next_attempt_at']}"
        )
    return lines


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1]


def _bank_and_operator_commands() -> None:
    from treasury_aiohttp.cli import bank as bank_cli
    from treasury_aiohttp.cli import operator_keys as operator_cli

    for command in [
        *bank_cli.commands(_run_on, DATABASE_HELP),
        *operator_cli.commands(_run_on, DATABASE_HELP),
    ]:
        main.add_command(command)


_bank_and_operator_commands()

if __name__ == "__main__":  # pragma: no cover
    main()
