"""The `kraftlab` command line (also `python -m harness`).

Each command group lives in its own module exposing `register(subparsers)`; this module only
builds the parser and dispatches. A handler returns the process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Modules that contribute commands, in the order they appear in --help.
COMMAND_MODULES: tuple[str, ...] = (
    "harness.cli.cluster",
    "harness.cli.config",  # `kraftlab config show` (issue 6)
    "harness.cli.quorum",
    "harness.cli.kv",
    "harness.cli.topic",
    "harness.cli.client",  # `kraftlab produce` and `kraftlab consume` (harness.client)
    "harness.cli.nemesis",  # `kraftlab nemesis` (faults by hand on a running cluster)
    "harness.study.compare",
    "harness.bench",
    "harness.cli.sim",
    "harness.cli.sim_cluster",  # adds `sim cluster` to the sim group (after harness.cli.sim)
    "harness.cli.sim_matrix",  # adds `sim matrix` (data-plane scenario matrix, issue 8)
    "harness.cli.sim_replay",  # adds `sim replay` (a recorded run in the web view)
    "harness.cli.check",
    "harness.cli.jepsen",  # `kraftlab jepsen run` (real-process runs)
    "harness.cli.analyze",  # `kraftlab analyze` (Spark comparison, docs/compare.md)
    "harness.cli.ui",  # `kraftlab ui` (web view, docs/ui.md)
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kraftlab",
        description="A runnable model of Kafka's replication stack (KRaft quorum + ISR partitions).",
    )
    parser.add_argument("--log-level", default="warning", help="structlog level for this command")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from harness.runtime.logs import configure_logging

    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(level=args.log_level)
    handler = args.handler
    try:
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
