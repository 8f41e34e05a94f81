"""The `kraftlab` command line (also `python -m harness`).

Each command group lives in its own module of this package exposing `register(subparsers)`;
this module only builds the parser and dispatches. A handler returns the process exit code.
Verbs parse, call one package below (launcher, admin client, jepsen, sim, spark, study, bench)
and print; what they share is in common.py. Heavy dependencies (the simulator, pyspark) are
imported by the handlers that need them, so `kraftlab --help` stays fast.

A command line that names its command (`kraftlab topic create ...`) imports only the module
that registers that command (COMMANDS): the bench and jepsen modules pull in pyarrow, numpy and
aiohttp at import, which every `kraftlab cluster ...` or `kraftlab produce` would otherwise pay
for at start. `kraftlab --help`, a bad command or none builds the whole parser.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from harness.runtime.logs import configure_logging

# Modules that contribute commands, in the order they appear in --help, and the commands each
# one registers (tests/test_cli_main.py checks these against what `register` adds).
COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cluster", ("cluster",)),
    ("config", ("config",)),  # `kraftlab config show|alter|describe`
    ("quorum", ("quorum",)),
    ("kv", ("kv",)),
    ("topic", ("topic", "elect-leaders")),
    ("group", ("group",)),  # `kraftlab group list|describe` (consumer groups)
    ("client", ("produce", "consume")),  # harness.client
    ("nemesis", ("nemesis",)),  # `kraftlab nemesis` (faults by hand on a running cluster)
    ("compare", ("compare",)),
    ("bench", ("bench",)),
    # `sim quorum`, `sim cluster`, `sim matrix` (data-plane scenario matrix), `sim replay`
    ("sim", ("sim",)),
    ("check", ("check",)),
    ("jepsen", ("jepsen",)),  # `kraftlab jepsen run` (real-process runs)
    ("analyze", ("analyze",)),  # `kraftlab analyze` (Spark comparison, docs/compare.md)
    ("ui", ("ui",)),  # `kraftlab ui` (the web view, docs/ui.md)
    ("peer", ("peer",)),  # `kraftlab peer kafka` (Apache Kafka itself beside kraftlab)
)
MODULE_OF = {command: module for module, commands in COMMANDS for command in commands}


def command_module(name: str) -> ModuleType:
    return importlib.import_module(f"harness.cli.{name}")


def command_modules() -> list[ModuleType]:
    """Every module that contributes commands, in --help order."""
    return [command_module(name) for name, _ in COMMANDS]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with only the module that registers `command`."""
    parser = argparse.ArgumentParser(
        prog="kraftlab",
        description="A runnable model of Kafka's replication stack (KRaft quorum + ISR partitions).",
    )
    parser.add_argument("--log-level", default="warning", help="structlog level for this command")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    modules = ([command_module(MODULE_OF[command])] if command in MODULE_OF
               else command_modules())  # fmt: skip
    for module in modules:
        module.register(sub)
    return parser


def named_command(argv: Sequence[str]) -> str | None:
    """The command an argument list names (its first word past the top-level options), if it
    names one before any help flag; None otherwise."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--log-level":
            i += 2
            continue
        if arg.startswith("--log-level="):
            i += 1
            continue
        return arg if arg in MODULE_OF else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(named_command(args_list))
    args = parser.parse_args(args_list)
    configure_logging(level=args.log_level)
    handler = args.handler
    try:
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
