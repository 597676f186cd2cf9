import pytest
from pydantic import ValidationError

from treasury_core.validation import is_resource_id
from treasury_core.wallets import CreateWalletRequest


@pytest.mark.parametrize("name", ["a\x00b", "a\ud800b", "tab\there", "line\nbreak", "\x7f"])
def test_names_refuse_control_characters_and_surrogates(name: str) -> None:
    with pytest.raises(ValidationError) as caught:
        CreateWalletRequest(name=name, currency_id="USD")
    assert caught.value.errors()[0]["loc"] == ("name",)


def test_descriptions_allow_line_breaks_but_not_nul() -> None:
    assert (
        CreateWalletRequest(name="n", currency_id="USD", description="a\nb\tc").description
        == "a\nb\tc"
    )
    with pytest.raises(ValidationError):
        CreateWalletRequest(name="n", currency_id="USD", description="a\x00")


def test_names_are_trimmed_and_unicode_is_welcome() -> None:
    assert (
        CreateWalletRequest(name="  Caisse d’épargne 💶 ", currency_id="EUR").name
        == "Caisse d’épargne 💶"
    )


@pytest.mark.parametrize(
    ("value", "prefix", "expected"),
    [
        ("wal_01jd3k", "wal", True),
        ("wal_01jd3k", None, True),
        ("trf_01jd3k", "wal", False),
        ("wal_", "wal", False),
        ("wal_\x00", "wal", False),
        ("wal_" + "a" * 65, "wal", False),
        ("WAL_abc", "wal", False),
        (5, "wal", False),
    ],
)
def test_resource_id_shape(value: object, prefix: str | None, expected: bool) -> None:
    assert is_resource_id(value, prefix) is expected
