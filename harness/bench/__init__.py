"""`kraftlab bench KIND`: measured figures (never asserted in tests). Each kind lives in its own
module `harness.bench.<kind>` exposing `add_arguments(parser)` and `run(args) -> int`; results are
printed as a table, or as one JSON object with `--json`."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

KINDS: dict[str, str] = {
    "log": "harness.bench.log",
    "quorum": "harness.bench.quorum",
    "failover": "harness.bench.failover",
    "check": "harness.bench.check",
    "raftcore": "harness.bench.raftcore",
    "produce": "harness.bench.produce",
    "consume": "harness.bench.consume",
    "kafka-produce": "harness.bench.kafka_produce",
}


def register(sub: Any) -> None:
    parser = sub.add_parser("bench", help="measure throughput and latency")
    kinds = parser.add_subparsers(dest="bench_kind", metavar="KIND")
    kinds.required = True
    for kind, module_name in KINDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # that benchmark is not built yet
        summary = (module.__doc__ or kind).strip().splitlines()[0]
        p: argparse.ArgumentParser = kinds.add_parser(kind, help=summary)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        module.add_arguments(p)
        p.set_defaults(handler=module.run)
