"""The `kraftlab` command line (also `python -m harness`).

Each command group lives in its own module of this package exposing `register(subparsers)`;
this module only builds the parser and dispatches. A handler returns the process exit code.
Verbs parse, call one package below (launcher, admin client, jepsen, sim, spark, study, bench)
and print; what they share is in common.py. Heavy dependencies (the simulator, pyspark) are
imported by the handlers that need them, so `kraftlab --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from harness.cli import (
    analyze,
    bench,
    check,
    client,
    cluster,
    compare,
    config,
    group,
    jepsen,
    kv,
    nemesis,
    peer,
    quorum,
    sim,
    topic,
    ui,
)
from harness.runtime.logs import configure_logging

# Modules that contribute commands, in the order they appear in --help.
COMMAND_MODULES = (
    cluster,
    config,  # `kraftlab config show|alter|describe`
    quorum,
    kv,
    topic,
    group,  # `kraftlab group list|describe` (consumer groups)
    client,  # `kraftlab produce` and `kraftlab consume` (harness.client)
    nemesis,  # `kraftlab nemesis` (faults by hand on a running cluster)
    compare,
    bench,
    sim,  # `sim quorum`, `sim cluster`, `sim matrix` (data-plane scenario matrix), `sim replay`
    check,
    jepsen,  # `kraftlab jepsen run` (real-process runs)
    analyze,  # `kraftlab analyze` (Spark comparison, docs/compare.md)
    ui,  # `kraftlab ui` (the web view, docs/ui.md)
    peer,  # `kraftlab peer kafka` (Apache Kafka itself beside kraftlab, docs/kafka-peer.md)
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kraftlab",
        description="A runnable model of Kafka's replication stack (KRaft quorum + ISR partitions).",
    )
    parser.add_argument("--log-level", default="warning", help="structlog level for this command")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(level=args.log_level)
    handler = args.handler
    try:
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
