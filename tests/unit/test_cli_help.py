"""``treasury --help`` is complete: every command, group, option and argument is explained."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from treasury_aiohttp.cli.commands import main


def walk(
    command: click.Command, path: tuple[str, ...] = ("treasury",)
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command in the tree under ``command``, with the words that invoke it."""
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from walk(sub, (*path, name))


COMMANDS = list(walk(main))


def test_the_tree_has_every_command() -> None:
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {
        "treasury",
        "treasury serve",
        "treasury migrate",
        "treasury worker",
        "treasury vault-key",
        "treasury companies",
        "treasury companies create",
        "treasury companies list",
        "treasury companies rotate-key",
        "treasury companies revoke-key",
        "treasury operator-keys",
        "treasury operator-keys create",
        "treasury operator-keys list",
        "treasury operator-keys revoke",
        "treasury ledger",
        "treasury ledger verify",
    } <= names


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else ""
)
def test_every_command_explains_itself(path: tuple[str, ...], command: click.Command) -> None:
    context = click.Context(command, info_name=path[-1])
    assert (command.help or "").strip(), f"{' '.join(path)} has no help"
    assert command.get_short_help_str(limit=80).strip(), f"{' '.join(path)} has no short help"
    for param in command.get_params(context):
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"{' '.join(path)} {param.opts[0]} has no help"
        else:
            # click arguments take no help text: the command's help must name them instead.
            assert param.human_readable_name in (command.help or ""), (
                f"{' '.join(path)}'s help does not mention {param.human_readable_name}"
            )
    # And the help page renders, listing every subcommand with its one-line summary.
    result = CliRunner().invoke(main, [*path[1:], "--help"])
    assert result.exit_code == 0, result.output
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            line = next(
                line for line in result.output.splitlines() if line.strip().startswith(name)
            )
            assert sub.get_short_help_str(limit=45).split()[0] in line
            # The one-line summary fits an 80-column listing whole, not cut off with "...".
            assert not line.endswith("..."), f"{name}: summary too long: {line}"
