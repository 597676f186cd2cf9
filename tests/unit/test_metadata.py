"""Metadata rules (treasury_core.metadata) and the minimum amounts (payments.minimums)."""

from __future__ import annotations

import pytest

from treasury_core.errors import ValidationFailed
from treasury_core.metadata import (
    MAX_KEYS,
    checked_metadata,
    is_metadata_param,
    merged_metadata,
    metadata_filter,
    metadata_matches,
)
from treasury_core.payments.minimums import DEFAULT_MIN_AMOUNTS, check_min_amount, min_amount
from treasury_core.settings import BadSetting, config_from_env


def _param(call: object) -> str | None:
    with pytest.raises(ValidationFailed) as caught:
        call()  # type: ignore[operator]
    return caught.value.param


def test_create_drops_empty_values_and_checks_each_pair() -> None:
    assert checked_metadata(None) == {}
    assert checked_metadata({"a": "1", "b": ""}) == {"a": "1"}
    assert checked_metadata({"k" * 40: "v" * 500, "note": "two\nlines"}) == {
        "k" * 40: "v" * 500,
        "note": "two\nlines",
    }
    assert _param(lambda: checked_metadata({"k" * 41: "v"})) == "metadata[…]"
    assert _param(lambda: checked_metadata({"a]": "v"})) == "metadata[…]"
    assert _param(lambda: checked_metadata({"bell\x07": "v"})) == "metadata[…]"
    assert _param(lambda: checked_metadata({"": "v"})) == "metadata"
    assert _param(lambda: checked_metadata({"a": "v" * 501})) == "metadata[a]"
    assert _param(lambda: checked_metadata({"a": "\u202e"})) == "metadata[a]"
    too_many = {f"k{n}": "v" for n in range(MAX_KEYS + 1)}
    assert _param(lambda: checked_metadata(too_many)) == "metadata"
    # Fifty keys and one empty value: the empty one is not kept, so it is not too many.
    assert len(checked_metadata({**{f"k{n}": "v" for n in range(MAX_KEYS)}, "x": ""})) == MAX_KEYS


def test_merge_adds_replaces_and_deletes() -> None:
    current = {"a": "1", "b": "2"}
    assert merged_metadata(current, {"b": "", "c": "3", "a": "9"}) == {"a": "9", "c": "3"}
    assert current == {"a": "1", "b": "2"}  # not changed in place
    assert merged_metadata(current, {"missing": ""}) == current
    full = {f"k{n}": "v" for n in range(MAX_KEYS)}
    assert _param(lambda: merged_metadata(full, {"one_more": "v"})) == "metadata"
    assert len(merged_metadata(full, {"k0": "", "new": "v"})) == MAX_KEYS


def test_the_list_filter_reads_only_metadata_parameters() -> None:
    assert metadata_filter({"limit": "5", "status": "PROCESSED"}) is None
    assert metadata_filter({"metadata[a]": "1", "metadata[b c]": "2", "limit": "5"}) == {
        "a": "1",
        "b c": "2",
    }
    assert _param(lambda: metadata_filter({"metadata[a]b]": "1"})) == "metadata[…]"
    assert _param(lambda: metadata_filter({"metadata[]": "1"})) == "metadata"
    assert is_metadata_param("metadata[x]") and not is_metadata_param("metadata")
    assert metadata_matches({"a": "1", "b": "2"}, {"a": "1"})
    assert not metadata_matches({"a": "1"}, {"a": "1", "b": "2"})
    assert not metadata_matches({"a": "1"}, {"a": ""})
    assert metadata_matches({}, None)


def test_minimum_amounts_default_and_override() -> None:
    assert (DEFAULT_MIN_AMOUNTS["USD"], DEFAULT_MIN_AMOUNTS["GBP"]) == (50, 30)
    assert DEFAULT_MIN_AMOUNTS["JPY"] == 50
    assert min_amount("USD", {}) == 50
    assert min_amount("USD", {"USD": 100}) == 100
    assert min_amount("NOK", {}) == 1
    check_min_amount(50, "USD", {})
    with pytest.raises(ValidationFailed) as caught:
        check_min_amount(49, "USD", {})
    assert caught.value.code == "amount_too_small"
    assert "at least 50" in caught.value.message


def test_minimum_amounts_from_the_environment() -> None:
    config = config_from_env({"TREASURY_MIN_AMOUNTS": '{"USD": 100, "NOK": 300}'})
    assert config.min_amounts == {"USD": 100, "NOK": 300}
    assert min_amount("EUR", config.min_amounts) == 50
    with pytest.raises(BadSetting):
        config_from_env({"TREASURY_MIN_AMOUNTS": '{"USD": 0}'})
    with pytest.raises(BadSetting):
        config_from_env({"TREASURY_MIN_AMOUNTS": "[50]"})
