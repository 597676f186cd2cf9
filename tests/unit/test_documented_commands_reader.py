"""The reader of the docs' commands finds what tests/e2e/test_documented_commands.py runs.

Each case is one way the end-to-end check could pass while checking nothing: a command it does
not see, a sample it does not compare, a marker without a reason it does not notice.
"""

from __future__ import annotations

from pathlib import Path

from tests.documented_commands import parse_sample, read_page, shape_differences

PAGE = """# A page

```sh
COMPANY=$(treasury companies create "Acme") # trailing prose
echo "$COMPANY"
# {"company_id": 1,
#  "secret_key": "sk_…"}

# Prose, not a sample: {"looks": "like JSON"} but starts with a word.
curl -s http://127.0.0.1:8080/a \\
  -H "Authorization: Bearer $KEY"
```

<!-- not-run: starts a server -->
```bash
treasury serve
```

```console
$ treasury operator-keys create push
{"id": "opk_…", "key": "ok_…"}
$ treasury operator-keys list
```

<!-- not-run -->
```sh
pip install treasury-core
```

```python
print("not a shell block")
```
"""


def _page(tmp_path: Path) -> Path:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    return page


def test_commands_their_lines_and_samples(tmp_path: Path) -> None:
    blocks, _ = read_page(_page(tmp_path))
    assert [(b.language, b.line, b.not_run) for b in blocks] == [
        ("sh", 3, None),
        ("bash", 15, "starts a server"),
        ("console", 19, None),
        ("sh", 26, ""),
    ]
    script = blocks[0].commands
    assert [(c.line, c.text.split()[0]) for c in script] == [
        (4, "COMPANY=$(treasury"),
        (5, "echo"),
        (10, "curl"),
    ]
    assert script[1].sample == '{"company_id": 1,\n"secret_key": "sk_…"}'
    assert script[2].text.endswith('-H "Authorization: Bearer $KEY"')
    assert script[0].sample is None and script[2].sample is None
    console = blocks[2].commands
    assert [(c.text, c.sample) for c in console] == [
        ("treasury operator-keys create push", '{"id": "opk_…", "key": "ok_…"}'),
        ("treasury operator-keys list", None),
    ]


def test_a_marker_without_a_reason_is_found(tmp_path: Path) -> None:
    _, markers = read_page(_page(tmp_path))
    assert [(m.line, m.reason, m.before_a_shell_block) for m in markers] == [
        (14, "starts a server", True),
        (25, "", True),
    ]


def test_a_marker_before_no_shell_block_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- not-run: why -->\n```python\nprint(1)\n```\n")
    blocks, markers = read_page(page)
    assert blocks == []
    assert [(m.reason, m.before_a_shell_block) for m in markers] == [("why", False)]


def test_a_sample_missing_a_key_of_the_output_differs() -> None:
    sample, elided = parse_sample('{"id": "wal_…", "currency": {"code": "EUR"}}')
    assert not elided
    real = {"id": "wal_1", "currency": {"code": "EUR", "name": "Euro"}, "metadata": {}}
    assert shape_differences(sample, real, elided=elided) == [
        "$: the sample lacks ['metadata']",
        "$.currency: the sample lacks ['name']",
    ]
    assert shape_differences(sample, {"id": "x"}, elided=elided) == [
        "$: the output lacks ['currency']"
    ]


def test_a_bare_ellipsis_leaves_keys_out_but_not_the_ones_shown() -> None:
    sample, elided = parse_sample('{"transaction": {"id": "txn_…", "amount": 1,…}, "next": null}')
    assert elided
    assert sample == {"transaction": {"id": "txn_…", "amount": 1}, "next": None}
    real = {"transaction": {"id": "t", "amount": 2, "status": "completed"}, "next": None}
    assert shape_differences(sample, real, elided=elided) == []
    assert shape_differences(sample, {"transaction": {"id": "t"}, "next": None}, elided=elided) == [
        "$.transaction: the output lacks ['amount']"
    ]


def test_arrays_compare_their_first_items() -> None:
    sample, elided = parse_sample('[{"wallet_id": "wal_…", "balance": 0}]')
    assert shape_differences(sample, [{"wallet_id": "w"}], elided=elided) == [
        "$[0]: the output lacks ['balance']"
    ]
    assert shape_differences(sample, {"wallet_id": "w"}, elided=elided) == [
        "$: the sample is an array, the output dict"
    ]
