"""`kraftlab check linearizable|queue FILE`: run a checker over a history file.

Exit codes (docs/api.md): linearizable 0 valid, 1 invalid, 2 unknown (timeout or memory
bound); queue 0 valid, 1 anomalies found. Bad input (unreadable file, malformed history) exits
3 with an INVALID_REQUEST message on stderr, so it can never be mistaken for a verdict.
A short human summary goes to stdout, or one JSON object with `--json`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from harness.check.history import FORMATS, HistoryError, load_history
from harness.check.linearizable import DEFAULT_MAX_CACHE_ENTRIES, check_linearizable
from harness.check.models import MODELS, get_model
from harness.check.queue import check_queue

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN, EXIT_BAD_INPUT = 0, 1, 2, 3


def register(sub: Any) -> None:
    parser = sub.add_parser("check", help="check a Jepsen-style history (linearizability, queue)")
    kinds = parser.add_subparsers(dest="check_kind", metavar="CHECKER")
    kinds.required = True

    lin = kinds.add_parser("linearizable", help="Wing-Gong-Lowe linearizability check")
    lin.add_argument("file", type=Path, help="history file")
    lin.add_argument("--model", choices=sorted(MODELS), default="kv")
    lin.add_argument("--format", choices=FORMATS, default="jsonl", dest="fmt")
    lin.add_argument(
        "--timeout", type=float, default=None, metavar="S", help="seconds; then exit 2"
    )
    lin.add_argument(
        "--max-cache",
        type=int,
        default=DEFAULT_MAX_CACHE_ENTRIES,
        metavar="N",
        help="memory bound: explored configurations before giving up (exit 2)",
    )
    lin.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="processes for checking keys concurrently (keys still undecided after a 0.2 s "
        "quick pass each)",
    )
    lin.add_argument(
        "--html",
        type=Path,
        default=None,
        help="write the failure view (a timeline of the window) to PATH; none is written unasked",
    )
    lin.add_argument("--json", action="store_true", help="print one JSON object")
    lin.set_defaults(handler=run_linearizable)

    queue = kinds.add_parser("queue", help="Kafka queue/log anomalies (Jepsen's names)")
    queue.add_argument("file", type=Path, help="history file (JSON lines)")
    queue.add_argument("--json", action="store_true", help="print one JSON object")
    queue.set_defaults(handler=run_queue)


def _bad_input(message: str) -> int:
    print(json.dumps({"error": "INVALID_REQUEST", "message": message}), file=sys.stderr)
    return EXIT_BAD_INPUT


def run_linearizable(args: argparse.Namespace) -> int:
    from harness.check.timeline import write_failure_html

    model = get_model(args.model)
    try:
        ops = load_history(args.file, args.fmt)
        result = check_linearizable(
            ops,
            model,
            timeout_s=args.timeout,
            max_cache_entries=args.max_cache,
            workers=args.workers,
        )
    except (OSError, HistoryError) as exc:
        return _bad_input(f"{args.file}: {exc}")
    report = result.to_json(model)
    if result.failure is not None and args.html is not None:
        report["html"] = str(write_failure_html(result, model, args.html, source=str(args.file)))
    if args.json:
        print(json.dumps(report, default=repr))
    else:
        _print_linearizable(report)
    return {"valid": EXIT_VALID, "invalid": EXIT_INVALID}.get(result.verdict, EXIT_UNKNOWN)


def _print_linearizable(report: dict[str, Any]) -> None:
    head = (
        f"{report['verdict'].upper()}: {report['ops']} ops, model {report['model']}, "
        f"{report['partitions_checked']}/{report['partitions']} partitions checked, "
        f"{report['cache_entries']} configurations explored, {report['elapsed_s']:.3f} s"
    )
    print(head)
    if report["reason"]:
        print(f"  gave up: {report['reason']}")
    failure = report["failure"]
    if failure is None:
        return
    where = f" (key {failure['partition']})" if failure["partition"] is not None else ""
    print(f"  longest linearizable prefix{where}: {failure['prefix_length']} ops, ending:")
    for row in failure["prefix_tail"]:
        ret = "open" if row["return_index"] is None else row["return_index"]
        print(f"    p{row['process']:<4} [{row['call_index']}, {ret}] {row['op']}")
    print(f"  state after it: {failure['state_after_prefix']}")
    print(
        "  none of these can be linearized next "
        f"(window {failure['window'][0]}..{failure['window'][1]}):"
    )
    for row in failure["stuck"]:
        ret = "open" if row["return_index"] is None else row["return_index"]
        mark = "  <- returned first" if row["op_id"] == failure["blocking"]["op_id"] else ""
        print(f"    p{row['process']:<4} [{row['call_index']}, {ret}] {row['op']}{mark}")
    if "html" in report:
        print(f"  view: {report['html']}")


def run_queue(args: argparse.Namespace) -> int:
    try:
        result = check_queue(load_history(args.file, "jsonl"))
    except (OSError, HistoryError) as exc:
        return _bad_input(f"{args.file}: {exc}")
    report = result.to_json()
    if args.json:
        print(json.dumps(report, default=repr))
    else:
        stats = report["stats"]
        verdict = "VALID" if result.valid else "ANOMALIES"
        print(
            f"{verdict}: {stats['partitions']} partitions, sends {stats['sends']}, "
            f"{stats['polls']} polls ({stats['final_polls']} in the final drain)"
        )
        for name in report["anomaly_types"]:
            print(f"  {name}: {report['counts'][name]}")
            for example in report["anomalies"][name][:3]:
                print(f"    {json.dumps(example, default=repr)}")
    return EXIT_VALID if result.valid else EXIT_INVALID
