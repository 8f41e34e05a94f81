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
    "harness.cluster_cli",
    "harness.config_cli",  # `kraftlab config show` (issue 6)
    "harness.quorum_cli",
    "harness.kv_cli",
    "harness.topic_cli",
    "harness.client_cli",  # `kraftlab produce` and `kraftlab consume` (harness.client)
    "harness.nemesis_cli",  # `kraftlab nemesis` (faults by hand on a running cluster)
    "harness.compare",
    "harness.bench",
    "harness.sim.cli",
    "harness.sim.cluster_cli",  # adds `sim cluster` to the sim group (after harness.sim.cli)
    "harness.sim.matrix_cli",  # adds `sim matrix` (data-plane scenario matrix, issue 8)
    "harness.jepsen.cli",
    "harness.jepsen.run_cli",  # `kraftlab jepsen run` (real-process runs)
    "harness.spark.cli",  # `kraftlab analyze` (Spark comparison, docs/compare.md)
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
    from harness.logs import configure_logging

    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(level=args.log_level)
    handler = args.handler
    try:
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
