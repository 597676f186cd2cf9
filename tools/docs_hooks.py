"""MkDocs hooks: the pages that describe code are filled in from the code at build time.

A page asks for generated content with a marker on a line of its own::

    <!-- generated: payments-diagram -->

and :func:`on_page_markdown` replaces it with Markdown built from the running library, so the
site cannot drift from the transition tables or the OpenAPI document. An unknown marker fails
the build rather than leaving a hole in a page.

Markers:

- ``payments-diagram`` / ``payments-table``: ``treasury_core.payments.TRANSITIONS``;
- ``movements-diagram`` / ``movements-table``: the table
  ``treasury_core.movements.states.MOVEMENT_TRANSITIONS`` and the settlement kinds
  (``treasury_core.services.movements.settlement.KINDS``);
- ``pending-diagram``: what the ledger kernel does with each phase-two leg, found by asking
  :func:`treasury_core.ledger.plan_journal` itself;
- ``http-reference``: the OpenAPI document the aiohttp app serves, built by ``create_app`` on an
  in-memory sandbox treasury exactly as ``GET /api/v1/openapi.json`` would return it.

:func:`on_files` also publishes that document as ``openapi.json`` at the site root, a file of
the site like any other, so pages can link to it and the link is checked.

Lives outside ``docs/`` so MkDocs does not copy it into the site as a static file.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from pydantic import SecretStr

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)

# --- the payment intent table ----------------------------------------------------------------


def payments_diagram() -> str:
    """The Mermaid diagram ``state_diagram()`` draws from the payment intent table."""
    from treasury_core.payments import state_diagram

    return f"```mermaid\n{state_diagram()}```\n"


def payments_table() -> str:
    """Every row of ``TRANSITIONS``, one table row each, in the table's own order."""
    from treasury_core.payments import TRANSITIONS, Effect, Guard

    effects = {
        Effect.NONE: "",
        Effect.AUTHORIZE: (
            "`authorized_at = now`, `authorization_expires_at = now + 7 days`, "
            "`cancellation_reason` cleared"
        ),
        Effect.VOID: "`cancellation_reason = voided`",
        Effect.EXPIRE: "`cancellation_reason = expired`",
    }
    rows = [
        "| Capture method | From | Trigger | Condition | To | Events | Also changes |",
        "|---|---|---|---|---|---|---|",
    ]
    for (method, source, trigger), rule in TRANSITIONS.items():
        events = ", ".join(f"`{event.value}`" for event in rule.events)
        condition = "" if rule.guard is Guard.NONE else f"now {rule.guard.value}"
        rows.append(
            f"| `{method.value}` | {f'`{source.value}`' if source else '(none)'} "
            f"| `{trigger.value}` | {condition} | `{rule.target.value}` | {events} "
            f"| {effects[rule.effect]} |"
        )
    return "\n".join(rows) + "\n"


# --- treasury movements ----------------------------------------------------------------------


def _movement_kinds() -> list[tuple[str, str, str]]:
    """``(noun, completed event, failed event)`` for each kind the settlement code knows."""
    from treasury_core.services.movements.settlement import KINDS

    return [(k.noun, k.completed.value, k.failed.value) for k in KINDS.values()]


def movements_diagram() -> str:
    """Deposits, withdrawals and transfers, drawn from ``MOVEMENT_TRANSITIONS``."""
    from treasury_core.movements.states import movement_state_diagram

    return "```mermaid\n" + movement_state_diagram() + "```\n"


def movements_table() -> str:
    """One row per settlement kind: the events its settling fires."""
    rows = ["| Movement | On completion | On failure |", "|---|---|---|"]
    for noun, completed, failed in _movement_kinds():
        rows.append(f"| {noun} | `{completed}` | `{failed}` |")
    return "\n".join(rows) + "\n"


# --- ledger pending movements ----------------------------------------------------------------


def pending_outcomes() -> list[tuple[str, str, str]]:
    """``(leg, condition, resulting PendingStatus)`` for each phase-two leg, asked of the kernel.

    Each leg is planned against a fresh pending movement before and at its deadline; what the
    kernel accepts, and the status it gives the movement, is what the diagram draws.
    """
    from treasury_core.errors import LedgerRejected
    from treasury_core.ledger import (
        ExpirePending,
        Journal,
        PendingCategory,
        PendingMovement,
        PostPending,
        VoidPending,
        plan_journal,
    )

    deadline = datetime(2030, 1, 8, tzinfo=UTC)
    pending = PendingMovement(
        id="jr_reserve.0",
        debit_account_id="wal_a",
        credit_account_id="world:EUR",
        currency="EUR",
        amount=100,
        category=PendingCategory.HOLD,
        deadline=deadline,
    )
    outcomes: list[tuple[str, str, str]] = []
    for leg in (PostPending(pending.id), VoidPending(pending.id), ExpirePending(pending.id)):
        accepted: list[tuple[str, str]] = []
        for when, now in (
            ("before the deadline", deadline - timedelta(seconds=1)),
            ("at or after the deadline", deadline),
        ):
            try:
                plan = plan_journal(Journal("jr_resolve", (leg,)), {pending.id: pending}, now)
            except LedgerRejected:
                continue
            accepted.append((when, plan.resolved_pendings[0].status.value))
        statuses = {status for _, status in accepted}
        condition = accepted[0][0] if len(accepted) == 1 else ""
        for status in sorted(statuses):
            outcomes.append((type(leg).__name__, condition, status))
    return outcomes


def pending_diagram() -> str:
    """The pending movement's states, drawn from :func:`pending_outcomes`."""
    from treasury_core.ledger import PendingStatus

    lines = ["stateDiagram-v2", f"    [*] --> {PendingStatus.PENDING.value}: Reserve"]
    terminals: list[str] = []
    for leg, condition, status in pending_outcomes():
        label = f"{leg} [{condition}]" if condition else leg
        lines.append(f"    {PendingStatus.PENDING.value} --> {status}: {label}")
        if status not in terminals:
            terminals.append(status)
    lines += [f"    {status} --> [*]" for status in terminals]
    return "```mermaid\n" + "\n".join(lines) + "\n```\n"


# --- the HTTP reference ----------------------------------------------------------------------


@cache
def openapi_document() -> dict[str, Any]:
    """The document ``GET /api/v1/openapi.json`` serves, for a sandbox server."""
    from treasury_aiohttp.app import create_app
    from treasury_aiohttp.keys import OPENAPI_KEY
    from treasury_core import TreasuryConfig, bootstrap

    # Throwaway vault and form keys: without them the sandbox warns that it falls back to its
    # public vault key and to a random form key, and this treasury never seals a card or
    # serves a form anyway.
    key = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    treasury = bootstrap(
        TreasuryConfig(
            database_url="memory://",
            sandbox=True,
            vault_key=SecretStr(key),
            form_key=SecretStr(secrets.token_urlsafe(32)),
        )
    )
    try:
        document: dict[str, Any] = create_app(treasury)[OPENAPI_KEY]
        return document
    finally:
        treasury.close()


_ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]+\.)?([\w]+)`")


def _prose(text: str | None) -> str:
    """A docstring as Markdown: reST literals and roles become code spans."""
    if not text:
        return ""
    # Docstring continuation lines keep their source indentation, which Markdown would read
    # as a code block; the descriptions are prose, so every line starts at the margin.
    text = "\n".join(line.strip() for line in text.splitlines())
    return _ROLE.sub(r"`\1`", text).replace("``", "`").strip()


def _cell(text: str) -> str:
    """Text fit for one table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _schema_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _anchor(name: str) -> str:
    return "schema-" + name.lower().replace("_", "-").strip("-")


def _type(schema: dict[str, Any]) -> str:
    """A JSON schema as a short type: ``string``, ``integer | null``, ``array of WalletRecord``."""
    if "$ref" in schema:
        name = _schema_name(schema["$ref"])
        return f"[{name}](#{_anchor(name)})"
    if "anyOf" in schema:
        return " \\| ".join(_type(option) for option in schema["anyOf"])
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _type(schema["allOf"][0])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        return " \\| ".join(kind)
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {_type(schema['additionalProperties'])}"
    if "format" in schema:
        return f"{kind} ({schema['format']})"
    return str(kind)


_CONSTRAINTS = (
    ("minLength", "length ≥ {}"),
    ("maxLength", "length ≤ {}"),
    ("minimum", "≥ {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "≤ {}"),
    ("minItems", "at least {} items"),
    ("maxProperties", "at most {} keys"),
)


def _notes(schema: dict[str, Any]) -> str:
    """Description, constraints, enum values and default of one property."""
    parts: list[str] = []
    if schema.get("description"):
        parts.append(_prose(schema["description"]).rstrip("."))
    for option in [schema, *schema.get("anyOf", [])]:
        constraints = dict(option)
        if "minLength" in constraints and constraints["minLength"] == constraints.get("maxLength"):
            parts.append(f"length {constraints.pop('minLength')}")
            del constraints["maxLength"]
        for key, template in _CONSTRAINTS:
            if key in constraints:
                parts.append(template.format(constraints[key]))
        if "enum" in constraints:
            parts.append("one of " + ", ".join(f"`{json.dumps(v)}`" for v in constraints["enum"]))
        if "pattern" in constraints:
            parts.append(f"pattern `{constraints['pattern']}`")
    if schema.get("type") == "object" and schema.get("properties"):
        # An inline object (the error body's ``error``): name its fields here, since it has no
        # schema section of its own to link to.
        required = set(schema.get("required", []))
        parts.append(
            "fields "
            + ", ".join(
                f"`{name}`" + ("" if name in required else " (optional)")
                for name in schema["properties"]
            )
        )
    if "default" in schema and schema["default"] is not None:
        parts.append(f"default `{json.dumps(schema['default'])}`")
    return _cell("; ".join(parts))


def _fields(schema: dict[str, Any]) -> list[str]:
    """A table of an object schema's properties."""
    properties: dict[str, Any] = schema.get("properties", {})
    if not properties:
        return ["No fields."]
    required = set(schema.get("required", []))
    rows = ["| Field | Type | Required | Notes |", "|---|---|---|---|"]
    for name, prop in properties.items():
        rows.append(
            f"| `{name}` | {_type(prop)} | {'yes' if name in required else 'no'} | {_notes(prop)} |"
        )
    return rows


def _auth(operation: dict[str, Any]) -> str:
    # The document says "bearer" for both key kinds; a route that refuses a publishable key is
    # the one that documents a 403 "A secret key is required".
    if not operation.get("security"):
        return "none"
    if "403" in operation["responses"]:
        return "`Authorization: Bearer` with a secret key"
    return "`Authorization: Bearer` with a secret or a publishable key"


def _operation(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    out = [
        f"### `{method.upper()} {path}` {{ #op-{operation['operationId']} }}",
        "",
        f"**{operation['summary']}.** Auth: {_auth(operation)}.",
        "",
    ]
    if operation.get("description"):
        out += [_prose(operation["description"]), ""]
    parameters = operation.get("parameters", [])
    if parameters:
        out += ["| Parameter | In | Type | Required | Notes |", "|---|---|---|---|---|"]
        for parameter in parameters:
            notes = _cell(
                "; ".join(
                    p
                    for p in (
                        _prose(parameter.get("description")).rstrip("."),
                        _notes(parameter["schema"]),
                    )
                    if p
                )
            )
            out.append(
                f"| `{parameter['name']}` | {parameter['in']} | {_type(parameter['schema'])} "
                f"| {'yes' if parameter.get('required') else 'no'} | {notes} |"
            )
        out.append("")
    body = operation.get("requestBody")
    if body:
        # JSON, a hosted page's form, or a document (a bank statement's XML).
        kind, media = next(iter(body["content"].items()))
        label = {"application/json": "JSON", "application/x-www-form-urlencoded": "form"}.get(
            kind, " or ".join(f"`{m}`" for m in body["content"])
        )
        out += [f"Request body ({label}): {_type(media['schema'])}", ""]
    out += ["| Status | Meaning | Body |", "|---|---|---|"]
    for status, response in sorted(operation["responses"].items()):
        content = response.get("content", {})
        if "application/json" in content:
            shape = _type(content["application/json"]["schema"])
        else:
            shape = "HTML page" if "text/html" in content else ""
        headers = ", ".join(f"`{name}`" for name in response.get("headers", {}))
        meaning = _prose(response["description"]) + (f" (headers: {headers})" if headers else "")
        out.append(f"| {status} | {_cell(meaning)} | {shape} |")
    return [*out, ""]


def http_reference(document: dict[str, Any] | None = None) -> str:
    """Every operation of the document, grouped by tag in route-table order, then every schema."""
    document = openapi_document() if document is None else document
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            tag = (operation.get("tags") or ["Other"])[0]
            by_tag.setdefault(tag, []).append((path, method, operation))
    out: list[str] = []
    for tag, operations in by_tag.items():
        out += [f"## {tag}", ""]
        for path, method, operation in operations:
            out += _operation(path, method, operation)
    out += ["## Schemas", ""]
    schemas: dict[str, Any] = document["components"]["schemas"]
    for name in sorted(schemas, key=str.lower):
        schema = schemas[name]
        out += [f"### {name} {{ #{_anchor(name)} }}", ""]
        if schema.get("description"):
            out += [_prose(schema["description"]), ""]
        if "enum" in schema:
            out += ["One of: " + ", ".join(f"`{value}`" for value in schema["enum"]) + ".", ""]
        elif "properties" not in schema and "additionalProperties" in schema:
            # A shared map type (``Metadata``): its keys are the caller's, not fields.
            notes = _notes(schema)
            out += [f"{_type(schema)}" + (f": {notes}." if notes else "."), ""]
        else:
            out += [*_fields(schema), ""]
    return "\n".join(out)


# --- hooks -----------------------------------------------------------------------------------

GENERATORS = {
    "payments-diagram": payments_diagram,
    "payments-table": payments_table,
    "movements-diagram": movements_diagram,
    "movements-table": movements_table,
    "pending-diagram": pending_diagram,
    "http-reference": http_reference,
}


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace each ``<!-- generated: NAME -->`` line with what ``GENERATORS[NAME]`` builds."""

    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise PluginError(f"{page.file.src_uri}: unknown generated block {name!r}")
        return GENERATORS[name]()

    return MARKER.sub(generate, markdown)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Publish the OpenAPI document beside the pages, for tools, download and links."""
    content = json.dumps(openapi_document(), indent=2) + "\n"
    files.append(File.generated(config, "openapi.json", content=content))
    return files
