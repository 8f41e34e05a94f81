"""harness/cli/main.py: a command line that names its command builds a parser from only the
module that registers it, so COMMANDS must say exactly what each module registers."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from harness.cli import main as cli_main


@pytest.mark.parametrize(("module", "commands"), cli_main.COMMANDS)
def test_each_module_registers_exactly_the_commands_listed_for_it(
    module: str, commands: tuple[str, ...]
) -> None:
    sub = argparse.ArgumentParser().add_subparsers()
    cli_main.command_module(module).register(sub)
    assert tuple(sub.choices) == commands


def test_every_command_module_of_the_package_is_listed() -> None:
    from pathlib import Path

    listed = {name for name, _ in cli_main.COMMANDS}
    package = Path(cli_main.__file__).parent
    registering = {p.stem for p in package.glob("*.py") if "def register(" in p.read_text()}
    assert registering == listed


@pytest.mark.parametrize(("argv", "command"), [
    (["topic", "create", "t"], "topic"),
    (["--log-level", "debug", "produce", "t"], "produce"),
    (["--log-level=info", "elect-leaders"], "elect-leaders"),
    (["--help"], None),
    (["-h", "topic"], None),
    (["no-such-command"], None),
    ([], None),
])
def test_the_named_command_is_the_first_word_past_the_top_level_options(
    argv: list[str], command: str | None
) -> None:
    assert cli_main.named_command(argv) == command


def test_one_command_parser_holds_that_module_only_and_the_full_one_every_command() -> None:
    def choices(parser: argparse.ArgumentParser) -> list[str]:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return list(action.choices)

    assert choices(cli_main.build_parser("consume")) == ["produce", "consume"]
    assert choices(cli_main.build_parser()) == [c for _, cs in cli_main.COMMANDS for c in cs]


def test_a_named_command_does_not_import_the_heavy_command_modules() -> None:
    script = (
        "import sys\n"
        "from harness.cli import main\n"
        "try:\n"
        "    main.main(['cluster', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('harness.cli.bench', 'harness.cli.jepsen', 'pyarrow')"
        " if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert "usage: kraftlab cluster" in done.stdout
