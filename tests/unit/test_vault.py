"""The AES-256-GCM vault: round trips, binding to the token, rotation, fingerprints, keys."""

from __future__ import annotations

import base64
import dataclasses
import logging
import os
import re

import pytest
from pydantic import SecretStr

from treasury_core.config import TreasuryConfig
from treasury_core.errors import TreasuryError
from treasury_core.plugins import collect_factories, make_plugin_manager
from treasury_core.ports import SealedCard, Vault, VaultError
from treasury_vault.aesgcm import (
    MSG_BAD_KEY,
    MSG_VAULT_KEY_MISSING,
    SANDBOX_KEY,
    SANDBOX_KEY_PHRASE,
    AesGcmVault,
    VaultKeyMissing,
    generate_key,
    parse_key,
)

NUMBER = "4242424242424242"
OTHER_NUMBER = "5555555555554444"
CONTEXT = "pm_01HZZZZZZZZZZZZZZZZZZZZZZZ"
KEY = bytes(range(32))
NEW_KEY = bytes(range(32, 64))
CIPHERTEXT = re.compile(r"v1\.([0-9a-f]{8})\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]+)")


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


@pytest.fixture
def vault() -> AesGcmVault:
    return AesGcmVault(KEY)


# --- sealing and opening --------------------------------------------------------------------


def test_vault_implements_the_port(vault: AesGcmVault) -> None:
    assert isinstance(vault, Vault)


def test_round_trip(vault: AesGcmVault) -> None:
    sealed = vault.seal(NUMBER, 12, 2031, context=CONTEXT)
    assert vault.open(sealed, context=CONTEXT) == NUMBER
    assert sealed.brand == "visa"
    assert sealed.last4 == "4242"
    assert (sealed.expiry_month, sealed.expiry_year) == (12, 2031)
    assert sealed.fingerprint == vault.fingerprint(NUMBER)
    match = CIPHERTEXT.fullmatch(sealed.ciphertext)
    assert match is not None
    assert match.group(1) == vault.key_id


def test_amex_round_trip(vault: AesGcmVault) -> None:
    sealed = vault.seal("378282246310005", 1, 2030, context=CONTEXT)
    assert (sealed.brand, sealed.last4) == ("amex", "0005")
    assert vault.open(sealed, context=CONTEXT) == "378282246310005"


def test_each_seal_uses_a_new_nonce(vault: AesGcmVault) -> None:
    first = vault.seal(NUMBER, 12, 2031, context=CONTEXT)
    second = vault.seal(NUMBER, 12, 2031, context=CONTEXT)
    assert first.ciphertext != second.ciphertext
    assert first.fingerprint == second.fingerprint


def test_a_vault_with_the_same_key_opens(vault: AesGcmVault) -> None:
    sealed = vault.seal(NUMBER, 12, 2031, context=CONTEXT)
    assert AesGcmVault(KEY).open(sealed, context=CONTEXT) == NUMBER


def test_wrong_context_fails(vault: AesGcmVault) -> None:
    sealed = vault.seal(NUMBER, 12, 2031, context=CONTEXT)
    with pytest.raises(VaultError) as info:
        vault.open(sealed, context=CONTEXT + "x")
    assert info.value.code == "vault_error"
    with pytest.raises(VaultError):
        vault.open(sealed, context="")


def _replace_ciphertext(sealed: SealedCard, ciphertext: str) -> SealedCard:
    return dataclasses.replace(sealed, ciphertext=ciphertext)


def test_tampered_ciphertext_fails(vault: AesGcmVault) -> None:
    sealed = vault.seal(NUMBER, 12, 2031, context=CONTEXT)
    version, kid, nonce, ct = sealed.ciphertext.split(".")
    raw_ct = base64.urlsafe_b64decode(ct + "=" * (-len(ct) % 4))
    raw_nonce = base64.urlsafe_b64decode(nonce + "=" * (-len(nonce) % 4))
    for index in range(len(raw_ct)):
        flipped = bytearray(raw_ct)
        flipped[index] ^= 0x01
        tampered = ".".join((version, kid, nonce, b64(bytes(flipped))))
        with pytest.raises(VaultError):
            vault.open(_replace_ciphertext(sealed, tampered), context=CONTEXT)
    flipped_nonce = bytes([raw_nonce[0] ^ 0x80]) + raw_nonce[1:]
    tampered = ".".join((version, kid, b64(flipped_nonce), ct))
    with pytest.raises(VaultError):
        vault.open(_replace_ciphertext(sealed, tampered), context=CONTEXT)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda c: "",
        lambda c: "garbage",
        lambda c: c.replace("v1.", "v2.", 1),
        lambda c: c + ".extra",
        lambda c: c.rsplit(".", 1)[0],
        lambda c: c + "=",
        lambda c: c + "!",
        lambda c: c[:-4],  # the tag cut short
        lambda c: ".".join((*c.split(".")[:3], "AAAA")),  # shorter than a tag
        lambda c: ".".join((c.split(".")[0], "00000000", *c.split(".")[2:])),  # unknown key id
        lambda c: ".".join((*c.split(".")[:2], "AAAA", c.split(".")[3])),  # short nonce
    ],
)
def test_malformed_ciphertexts_fail_with_vault_error(vault: AesGcmVault, mangle: object) -> None:
    sealed = vault.seal(NUMBER, 12, 2031, context=CONTEXT)
    text = mangle(sealed.ciphertext)  # type: ignore[operator]
    with pytest.raises(VaultError) as info:
        vault.open(_replace_ciphertext(sealed, text), context=CONTEXT)
    _assert_no_secrets(str(info.value), KEY)


def test_another_key_cannot_open(vault: AesGcmVault) -> None:
    sealed = vault.seal(NUMBER, 12, 2031, context=CONTEXT)
    with pytest.raises(VaultError) as info:
        AesGcmVault(NEW_KEY).open(sealed, context=CONTEXT)
    _assert_no_secrets(str(info.value), KEY)
    _assert_no_secrets(str(info.value), NEW_KEY)


def test_seal_refuses_non_digits_without_echoing(vault: AesGcmVault) -> None:
    with pytest.raises(ValueError, match="digits only") as info:
        vault.seal("4242 4242 4242 4242", 12, 2031, context=CONTEXT)
    assert "4242" not in str(info.value)
    with pytest.raises(ValueError, match="digits only"):
        vault.fingerprint("")


# --- rotation -------------------------------------------------------------------------------


def test_old_key_still_opens_after_rotation() -> None:
    before = AesGcmVault(KEY)
    old_sealed = before.seal(NUMBER, 12, 2031, context=CONTEXT)

    after = AesGcmVault(NEW_KEY, old_keys=[KEY])
    assert after.open(old_sealed, context=CONTEXT) == NUMBER
    assert after.key_ids == {before.key_id, after.key_id}

    new_sealed = after.seal(OTHER_NUMBER, 1, 2032, context=CONTEXT)
    new_match = CIPHERTEXT.fullmatch(new_sealed.ciphertext)
    assert new_match is not None
    assert new_match.group(1) == after.key_id != before.key_id
    assert after.open(new_sealed, context=CONTEXT) == OTHER_NUMBER
    # The new seal is under the new key only: a vault holding just the old key cannot open it.
    with pytest.raises(VaultError):
        before.open(new_sealed, context=CONTEXT)
    # Fingerprints follow the current key.
    assert new_sealed.fingerprint == AesGcmVault(NEW_KEY).fingerprint(OTHER_NUMBER)


def test_dropping_the_old_key_stops_opening_its_cards() -> None:
    old_sealed = AesGcmVault(KEY).seal(NUMBER, 12, 2031, context=CONTEXT)
    with pytest.raises(VaultError):
        AesGcmVault(NEW_KEY).open(old_sealed, context=CONTEXT)


def test_duplicate_keys_are_harmless() -> None:
    vault = AesGcmVault(KEY, old_keys=[KEY, NEW_KEY, NEW_KEY])
    assert len(vault.key_ids) == 2
    sealed = AesGcmVault(NEW_KEY).seal(NUMBER, 12, 2031, context=CONTEXT)
    assert vault.open(sealed, context=CONTEXT) == NUMBER


@pytest.mark.parametrize("bad", [b"", bytes(31), bytes(33)])
def test_constructor_refuses_wrong_key_sizes(bad: bytes) -> None:
    with pytest.raises(ValueError, match=re.escape(MSG_BAD_KEY)):
        AesGcmVault(bad)
    with pytest.raises(ValueError, match=re.escape(MSG_BAD_KEY)):
        AesGcmVault(KEY, old_keys=[bad])


# --- fingerprints and key ids ---------------------------------------------------------------


def test_fingerprint_is_stable_and_keyed(vault: AesGcmVault) -> None:
    fingerprint = vault.fingerprint(NUMBER)
    assert re.fullmatch(r"fp_[0-9a-f]{32}", fingerprint)
    assert vault.fingerprint(NUMBER) == fingerprint
    assert AesGcmVault(KEY).fingerprint(NUMBER) == fingerprint
    assert vault.fingerprint(OTHER_NUMBER) != fingerprint
    assert AesGcmVault(NEW_KEY).fingerprint(NUMBER) != fingerprint
    assert NUMBER not in fingerprint


def test_key_id_reveals_nothing_of_the_key(vault: AesGcmVault) -> None:
    assert re.fullmatch(r"[0-9a-f]{8}", vault.key_id)
    assert vault.key_id != KEY.hex()[:8]
    assert vault.key_id not in KEY.hex()
    assert AesGcmVault(NEW_KEY).key_id != vault.key_id
    assert KEY.hex() not in repr(vault)


# --- nothing leaks --------------------------------------------------------------------------


def _encodings(text: str) -> list[str]:
    raw = text.encode("ascii")
    return [
        text,
        raw.hex(),
        raw.hex().upper(),
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        base64.b32encode(raw).decode().rstrip("="),
        text[::-1],
        int(text).to_bytes(8, "big").hex(),
    ]


def _assert_no_secrets(text: str, key: bytes) -> None:
    for encoding in _encodings(NUMBER):
        assert encoding not in text
    assert key.hex() not in text
    assert b64(key) not in text
    assert base64.b64encode(key).decode() not in text


def test_ciphertext_does_not_contain_the_number(vault: AesGcmVault) -> None:
    for _ in range(20):
        sealed = vault.seal(NUMBER, 12, 2031, context=CONTEXT)
        ciphertext = sealed.ciphertext
        decoded = b"".join(
            base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
            for part in ciphertext.split(".")[2:]
        )
        for encoding in _encodings(NUMBER):
            assert encoding not in ciphertext
            assert encoding.encode() not in decoded
        assert NUMBER[:6] not in ciphertext  # not even the BIN
        assert NUMBER.encode() not in decoded
        _assert_no_secrets(repr(sealed).replace(sealed.last4, ""), KEY)


# --- keys -----------------------------------------------------------------------------------


def test_parse_key_accepts_every_base64_spelling() -> None:
    key = bytes([0xFB, 0xFF, 0xFE] * 10 + [0x3E, 0x3F])  # bytes whose encodings use +/ or -_
    standard = base64.b64encode(key).decode()
    urlsafe = base64.urlsafe_b64encode(key).decode()
    assert "+" in standard or "/" in standard
    for text in (standard, standard.rstrip("="), urlsafe, urlsafe.rstrip("="), f" {urlsafe}\n"):
        assert parse_key(text) == key


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(bytes(31)).decode(),
        base64.b64encode(bytes(33)).decode(),
        base64.urlsafe_b64encode(bytes(range(31))).decode().rstrip("="),
        base64.urlsafe_b64encode(bytes(range(33))).decode().rstrip("="),
        "",
        "not base64 at all!",
        "@" * 43,
        base64.b64encode(bytes(32)).decode() + "==",  # too much padding
        base64.b64encode(bytes(32)).decode()[:-1] + "A",  # padding replaced by data: 33 bytes
        "A" * 41,  # a length no base64 has
        bytes(32).hex(),  # hex is not base64 of 32 bytes
    ],
)
def test_parse_key_refuses_without_echoing(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(MSG_BAD_KEY)) as info:
        parse_key(text)
    assert str(info.value) == MSG_BAD_KEY
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__ or info.value.__context__ is None


def test_generate_key_is_url_safe_and_parses() -> None:
    text = generate_key()
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", text)
    assert len(parse_key(text)) == 32
    assert generate_key() != text


def test_sandbox_key_is_derived_from_the_public_phrase() -> None:
    import hashlib

    assert hashlib.sha256(SANDBOX_KEY_PHRASE.encode()).digest() == SANDBOX_KEY
    assert len(SANDBOX_KEY) == 32


# --- the plugin -----------------------------------------------------------------------------


def _factory() -> object:
    return collect_factories(make_plugin_manager(), "vault")["aesgcm"]


def test_plugin_registers_aesgcm() -> None:
    assert "aesgcm" in collect_factories(make_plugin_manager(), "vault")
    assert TreasuryConfig().vault == "aesgcm"


def test_sandbox_without_key_uses_the_sandbox_key_and_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="treasury.vault"):
        vault = _factory()(TreasuryConfig(sandbox=True))  # type: ignore[operator]
    assert isinstance(vault, Vault)
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("treasury.vault", logging.WARNING, "no vault key configured; using the public sandbox key")
    ]
    sealed = vault.seal(NUMBER, 12, 2031, context=CONTEXT)
    assert AesGcmVault(SANDBOX_KEY).open(sealed, context=CONTEXT) == NUMBER


def test_outside_sandbox_without_key_raises() -> None:
    with pytest.raises(VaultKeyMissing) as info:
        _factory()(TreasuryConfig(sandbox=False))  # type: ignore[operator]
    assert str(info.value) == MSG_VAULT_KEY_MISSING
    assert "TREASURY_VAULT_KEY" in info.value.message
    assert isinstance(info.value, TreasuryError)
    assert info.value.code == "vault_key_missing"


def test_outside_sandbox_the_public_sandbox_key_is_refused() -> None:
    config = TreasuryConfig(sandbox=False, vault_key=SecretStr(b64(SANDBOX_KEY)))
    with pytest.raises(VaultKeyMissing, match="sandbox"):
        _factory()(config)  # type: ignore[operator]


@pytest.mark.parametrize("sandbox", [True, False])
def test_configured_key_is_used(sandbox: bool, caplog: pytest.LogCaptureFixture) -> None:
    config = TreasuryConfig(
        sandbox=sandbox,
        vault_key=SecretStr(b64(NEW_KEY)),
        vault_old_keys=(SecretStr(base64.b64encode(KEY).decode()),),
    )
    with caplog.at_level(logging.WARNING, logger="treasury.vault"):
        vault = _factory()(config)  # type: ignore[operator]
    assert caplog.records == []
    sealed = vault.seal(NUMBER, 12, 2031, context=CONTEXT)
    assert AesGcmVault(NEW_KEY).open(sealed, context=CONTEXT) == NUMBER
    old_sealed = AesGcmVault(KEY).seal(NUMBER, 12, 2031, context=CONTEXT)
    assert vault.open(old_sealed, context=CONTEXT) == NUMBER


def test_a_bad_configured_key_is_refused_without_echoing() -> None:
    secret = "definitely-not-a-32-byte-key"
    with pytest.raises(ValueError, match=re.escape(MSG_BAD_KEY)) as info:
        _factory()(TreasuryConfig(vault_key=SecretStr(secret)))  # type: ignore[operator]
    assert secret not in str(info.value)


def test_derived_secrets_are_stable_and_separated() -> None:
    vault = AesGcmVault(os.urandom(32))
    secret = vault.derive_secret("pmti-confirm", "pmti_1:salt")
    assert secret == vault.derive_secret("pmti-confirm", "pmti_1:salt")
    assert len(secret) == 43
    assert secret != vault.derive_secret("pmti-tokenization-form", "pmti_1:salt")
    assert secret != vault.derive_secret("pmti-confirm", "pmti_2:salt")
    assert secret != AesGcmVault(os.urandom(32)).derive_secret("pmti-confirm", "pmti_1:salt")
