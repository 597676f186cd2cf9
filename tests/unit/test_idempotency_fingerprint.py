"""The request fingerprint an idempotency key is bound to (docs/decisions.md, "Idempotency
fingerprint"): the method, the path with its query, and the exact body bytes. Same bytes are the
same request; any other byte is another request, with no JSON canonicalisation."""

from __future__ import annotations

import pytest

from treasury_core.interface.idempotency import fingerprint

PATH = "/api/v1/deposit"
BODY = b'{"wallet_id":"wal_1","from_amount":1000,"from_currency_id":"USD"}'


def test_the_digest_is_stable_across_releases() -> None:
    # Stored with every key: a release that computed it otherwise would refuse every retry of a
    # request made before the upgrade as "another request".
    assert fingerprint("POST", PATH, BODY) == (
        "f2127574c484453cbdcc46685068963227858b6cd121741ca3016b10262b26df"
    )
    assert fingerprint("GET", "/", b"") == (
        "975d4d6b1234968642ee96c943739619291e4381c6eda0c73db4a6d4d1c4c88e"
    )


def test_the_same_bytes_are_the_same_request() -> None:
    assert fingerprint("POST", PATH, BODY) == fingerprint("POST", PATH, bytes(BODY))
    # The method's case is not part of the request.
    assert fingerprint("post", PATH, BODY) == fingerprint("POST", PATH, BODY)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        pytest.param("PUT", PATH, BODY, id="another method"),
        pytest.param("POST", "/api/v1/withdraw", BODY, id="another path"),
        pytest.param("POST", f"{PATH}?expand=wallet", BODY, id="a query"),
        pytest.param("POST", PATH, BODY.replace(b"1000", b"1001"), id="another amount"),
        pytest.param(
            "POST",
            PATH,
            b'{"from_amount":1000,"wallet_id":"wal_1","from_currency_id":"USD"}',
            id="the same fields in another order",
        ),
        pytest.param("POST", PATH, BODY.replace(b",", b", "), id="other white space"),
        pytest.param("POST", PATH, BODY + b"\n", id="a trailing newline"),
        pytest.param("POST", PATH, b"", id="no body"),
    ],
)
def test_any_other_byte_is_another_request(method: str, path: str, body: bytes) -> None:
    assert fingerprint(method, path, body) != fingerprint("POST", PATH, BODY)


def test_parts_are_not_run_together() -> None:
    # Each part is length-prefixed, so moving bytes from the path into the body (or from the
    # method into the path) is another request.
    assert fingerprint("POST", "/a/b", b"c") != fingerprint("POST", "/a/", b"bc")
    assert fingerprint("POST", "/x", b"") != fingerprint("POS", "T/x", b"")
