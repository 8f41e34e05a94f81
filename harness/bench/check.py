"""Linearizability checker speed on the 102 Jepsen etcd histories (Porcupine's test set).

Checks every history in the directory against its `expected.json` verdict with the
cas-register model and reports the wall time: parsing and checking separately, the best of
`--repeat` runs (the machine is shared, the minimum is the least disturbed figure), with its
CPU time beside it (less sensitive to other processes than wall time). Porcupine
(Go) checks the same set in about 0.7 s; the ratio is printed beside it. Exit 1 if any verdict
disagrees with expected.json (a wrong checker has no meaningful speed).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from harness.check.history import load_history
from harness.check.linearizable import check_linearizable
from harness.check.models import get_model

# The histories ship with the source tree (tests/data/jepsen-etcd, provenance and licence there).
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "jepsen-etcd"
PORCUPINE_S = 0.7


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir", type=Path, default=DEFAULT_DIR, help="etcd histories + expected.json"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best is reported")


def _one_run(paths: list[Path], expected: dict[str, bool]) -> tuple[float, float, float, list[str]]:
    """(parse wall s, check wall s, total CPU s, disagreements) for one pass over the set."""
    model = get_model("cas-register")
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    histories = [load_history(p, "jepsen-log") for p in paths]
    t1 = time.perf_counter()
    wrong = []
    for path, ops in zip(paths, histories, strict=True):
        result = check_linearizable(ops, model)
        if result.verdict != ("valid" if expected[path.name] else "invalid"):
            wrong.append(f"{path.name}: {result.verdict}, expected {expected[path.name]}")
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, time.process_time() - cpu0, wrong


def run(args: argparse.Namespace) -> int:
    expected: dict[str, bool] = json.loads((args.dir / "expected.json").read_text())
    paths = [args.dir / name for name in sorted(expected)]
    runs = [_one_run(paths, expected) for _ in range(max(1, args.repeat))]
    parse_s, check_s, cpu_s, wrong = min(runs, key=lambda r: r[0] + r[1])
    total = parse_s + check_s
    figures = {
        "histories": len(paths),
        "parse_s": round(parse_s, 3),
        "check_s": round(check_s, 3),
        "total_s": round(total, 3),
        "cpu_s": round(cpu_s, 3),
        "porcupine_s": PORCUPINE_S,
        "ratio_vs_porcupine": round(total / PORCUPINE_S, 2),
        "runs": len(runs),
        "disagreements": wrong,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(
            f"{len(paths)} etcd histories: parse {parse_s:.3f} s + check {check_s:.3f} s = "
            f"{total:.3f} s wall, {cpu_s:.3f} s CPU (best of {len(runs)}); "
            f"Porcupine {PORCUPINE_S} s; ratio {total / PORCUPINE_S:.2f}x"
        )
        for line in wrong:
            print(f"  DISAGREES {line}")
    return 1 if wrong else 0
