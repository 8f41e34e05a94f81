"""`kraftlab bench KIND`: measured figures (never asserted in tests), docs/benchmarks.md.

Each kind is one module of harness/bench exposing `add_arguments(parser)` and `run(args) -> int`
(its docstring's first line is the kind's help); results are printed as a table, or as one JSON
object with `--json`.
"""

from __future__ import annotations

import argparse
from types import ModuleType
from typing import Any

from harness.bench import (
    check,
    codec,
    consume,
    failover,
    fsync,
    idle,
    kafka_produce,
    log,
    produce,
    quorum,
    raftcore,
    table,
)

KINDS: dict[str, ModuleType] = {
    "log": log,
    "quorum": quorum,
    "failover": failover,
    "check": check,
    "raftcore": raftcore,
    "codec": codec,
    "produce": produce,
    "consume": consume,
    "kafka-produce": kafka_produce,
    "fsync": fsync,
    "idle": idle,
    "table": table,
}


def register(sub: Any) -> None:
    parser = sub.add_parser("bench", help="measure throughput and latency")
    kinds = parser.add_subparsers(dest="bench_kind", metavar="KIND")
    kinds.required = True
    for kind, module in KINDS.items():
        # argparse %-formats help strings: a literal % in a summary must be doubled.
        summary = (module.__doc__ or kind).strip().splitlines()[0].replace("%", "%%")
        p: argparse.ArgumentParser = kinds.add_parser(kind, help=summary)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        module.add_arguments(p)
        p.set_defaults(handler=module.run)
