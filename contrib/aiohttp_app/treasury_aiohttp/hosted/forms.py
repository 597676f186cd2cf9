"""Reading the hosted forms' posts: the same fields as the JSON bodies, as text."""

from __future__ import annotations

from collections.abc import Collection
from typing import TypeVar

from aiohttp import web
from multidict import MultiDictProxy
from pydantic import BaseModel, ValidationError

from treasury_aiohttp.io import parse_body
from treasury_core.errors import ValidationFailed
from treasury_core.validation import validation_failed

M = TypeVar("M", bound=BaseModel)

#: A parsed form, as aiohttp gives it.
FormData = MultiDictProxy[str | bytes | bytearray | web.FileField]

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
#: Form fields that are not part of any body model.
CSRF_FIELD = "csrf_token"
#: The card submission's whole-number fields (typed as text into a form).
CARD_INT_FIELDS = ("expiry_month", "expiry_year")


def is_form(request: web.Request) -> bool:
    """Whether the body is form data: its ``Content-Type`` says so. (JSON under a form's
    ``Content-Type``, as ``curl -d`` sends it without ``-H``, is read as the form it claims to
    be, not guessed at.)"""
    return request.content_type in FORM_TYPES


def wants_html(request: web.Request) -> bool:
    """Whether the caller is a browser that expects a page back (it asks for HTML)."""
    return "text/html" in request.headers.get("Accept", "")


async def read_form(request: web.Request) -> FormData:
    """The form's fields; a body that is not valid form data is a 400."""
    try:
        return await request.post()
    except (UnicodeDecodeError, LookupError, ValueError):
        # Not UTF-8, a charset Python does not know, or a broken multipart body.
        raise ValidationFailed(
            "The request body is not valid form data", code="body_invalid"
        ) from None


def form_model(
    form: FormData,
    model: type[M],
    *,
    int_fields: Collection[str] = (),
) -> M:
    """``model`` from the form's text fields; ``int_fields`` are read as whole numbers.

    Unknown and repeated fields are refused as in JSON bodies (the CSRF token aside).
    """
    # len() counts every field, iteration each name once (multidict's views).
    if len(set(form)) < len(form):
        seen: set[str] = set()
        for name, _ in form.items():
            if name in seen:
                raise ValidationFailed(
                    f"Received duplicate parameter: {name}",
                    code="parameter_duplicated",
                    param=name,
                )
            seen.add(name)
    unknown = sorted(set(form) - set(model.model_fields) - {CSRF_FIELD})
    if unknown:
        raise ValidationFailed(
            f"Received unknown parameter: {unknown[0]}",
            code="parameter_unknown",
            param=unknown[0],
        )
    fields: dict[str, object] = {}
    for name in model.model_fields:
        value = form.get(name)
        if not isinstance(value, str):
            continue
        text = value.strip()
        if name in int_fields:
            # Browsers send what was typed; an empty optional field is absent, not "".
            # ASCII and short: str.isdigit() admits "²", and int() refuses 4,300+ digits.
            if text.isascii() and text.isdigit() and len(text) <= 10:
                fields[name] = int(text)
            elif text:
                fields[name] = text  # refused by the model, naming the field
        elif text or model.model_fields[name].is_required():
            fields[name] = text
    try:
        return model.model_validate(fields, strict=True)
    except ValidationError as exc:
        raise validation_failed(exc) from None


async def json_or_form(
    request: web.Request, model: type[M], *, int_fields: Collection[str] = ()
) -> tuple[M, str | None]:
    """The body as ``model`` and, for a form, its CSRF token (``None`` for JSON)."""
    if not is_form(request):
        return await parse_body(request, model), None
    form = await read_form(request)
    token = form.get(CSRF_FIELD)
    return form_model(form, model, int_fields=int_fields), token if isinstance(token, str) else ""
