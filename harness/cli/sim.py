"""`kraftlab sim quorum`: seeded deterministic simulations of the metadata quorum.

    kraftlab sim quorum --seeds N [--seed S] [--voters 3|5] [--duration-ms D] [--jobs J]
                        [--clock-weight W]

runs seeds S, S+1, ..., S+N-1 (S defaults to 1), shows progress, and ends with a summary (runs,
violations, simulated seconds per wall-clock second). Every failing seed prints the violation and
ONE command that replays it exactly. `--seed S` alone runs that one seed and prints its trace
digest (same seed, same digest) and, with `--history FILE`, its Jepsen-style history;
`--determinism` runs every seed twice and compares the digests (the self-test).
Exit code: 0 no violation, 1 at least one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from harness.cli import sim_cluster, sim_matrix, sim_replay

if TYPE_CHECKING:
    from harness.sim.runs.runner import RunSummary, Totals
    from harness.sim.runs.simulation import SimConfig

# The simulation itself is imported by the handlers only, so `kraftlab --help` stays fast.


def register(sub: Any) -> None:
    parser = sub.add_parser("sim", help="deterministic simulation (one seed reproduces one run)")
    kinds = parser.add_subparsers(dest="sim_kind", metavar="KIND")
    kinds.required = True
    q = kinds.add_parser(
        "quorum",
        help="simulate voters and observers with faults and check Raft safety and liveness",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    q.add_argument("--seeds", type=int, default=None, help="number of seeds to run (default 1)")
    q.add_argument("--seed", type=int, default=None, help="first seed (default 1)")
    q.add_argument("--voters", type=int, choices=(3, 5), default=3)
    q.add_argument(
        "--observers",
        type=int,
        choices=(1, 2),
        default=None,
        help="observers (default: 1 or 2, drawn from the seed)",
    )
    q.add_argument(
        "--duration-ms", type=int, default=3000, help="simulated length of the safety (fault) phase"
    )
    q.add_argument(
        "--clock-weight", type=int, default=0, metavar="W",
        help="weight of clock jumps among the nemesis steps (default 0: none; crash, restart, "
        "partition, heal and pause weigh 1-5)",
    )
    q.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes")
    q.add_argument(
        "--history", metavar="FILE", help="with one seed: write its history (JSON lines)"
    )
    q.add_argument("--trace", action="store_true", help="print the last events of a failing seed")
    q.add_argument("--membership", action="store_true",
                   help="add and remove voters during the run (KIP-853; 2 spare controllers)")
    q.add_argument(
        "--determinism",
        action="store_true",
        help="self-test: run every seed twice (in separate workers when --jobs > 1) and fail "
        "if the two trace digests differ",
    )
    q.set_defaults(handler=run_quorum)
    sim_cluster.add_kind(kinds)  # `sim cluster`
    sim_matrix.add_kind(kinds)  # `sim matrix`
    sim_replay.add_kind(kinds)  # `sim replay` (a recorded run in the web view)


def _log_level(args: argparse.Namespace) -> int:
    """ERROR unless `kraftlab --log-level debug|info` asked for more (the default, warning, would
    print every recovery and truncation warning of thousands of runs)."""
    import logging

    name = str(getattr(args, "log_level", "warning")).upper()
    return logging.getLevelNamesMapping()[name] if name in ("DEBUG", "INFO") else logging.ERROR


def _check_args(args: argparse.Namespace) -> str | None:
    if args.seeds is not None and args.seeds < 1:
        return "--seeds must be >= 1"
    if args.duration_ms < 100:
        return "--duration-ms must be >= 100"
    if args.jobs < 1:
        return "--jobs must be >= 1"
    if args.clock_weight < 0:
        return "--clock-weight must be >= 0"
    if args.history and (args.seeds or 1) != 1:
        return "--history needs exactly one seed"
    return None


def run_quorum(args: argparse.Namespace) -> int:
    from harness.sim.runs.runner import Totals, code_fingerprint, quiet_logging, run_many
    from harness.sim.runs.simulation import SimConfig

    quiet_logging(_log_level(args))

    error = _check_args(args)
    if error:
        print(f"kraftlab sim quorum: INVALID_REQUEST: {error}", file=sys.stderr)
        return 2
    first = 1 if args.seed is None else args.seed
    count = args.seeds or 1
    configs = [
        SimConfig(
            seed=s, voters=args.voters, observers=args.observers, duration_ms=args.duration_ms,
            membership=args.membership,
            clock_weight=args.clock_weight,
        )
        for s in range(first, first + count)
    ]
    if count == 1 and not args.determinism:
        return _run_single(configs[0], args)
    totals = Totals(wall_started=time.monotonic())
    failures: list[RunSummary] = []
    print(f"code {code_fingerprint()} (a seed replays exactly on the same code)", file=sys.stderr)
    last_progress = 0.0
    if args.determinism:
        configs = [c for c in configs for _ in (0, 1)]
        count *= 2
    digests: dict[int, str] = {}
    for summary in run_many(configs, jobs=args.jobs):
        totals.add(summary)
        if args.determinism:
            first_digest = digests.setdefault(summary.seed, summary.digest)
            if first_digest != summary.digest:
                totals.violations += 1
                failures.append(summary)
                print(
                    f"NONDETERMINISM seed {summary.seed}: digests {first_digest} and "
                    f"{summary.digest}\nreplay: {summary.replay_command}",
                    flush=True,
                )
        if not summary.ok:
            failures.append(summary)
            _print_failure(summary, args.trace)
        if totals.wall_s - last_progress >= 2 or totals.runs == count:
            last_progress = totals.wall_s
            print(
                f"[{totals.runs}/{count}] violations={totals.violations} "
                f"sim-s/wall-s={totals.speed():.1f}",
                file=sys.stderr,
                flush=True,
            )
    _print_summary(totals)
    return 1 if failures else 0


def _run_single(config: SimConfig, args: argparse.Namespace) -> int:
    from harness.sim.runs.runner import Totals, code_fingerprint, quiet_logging
    from harness.sim.runs.simulation import run_seed

    quiet_logging(_log_level(args))
    started = time.monotonic()
    result = run_seed(config)
    wall_s = time.monotonic() - started
    print(
        f"seed {config.seed}: code {code_fingerprint()} digest {result.digest} events {result.events} "
        f"simulated {result.sim_ms} ms committed {result.stats.get('committed')} "
        f"epochs {result.stats.get('epochs')}"
    )
    if args.history:
        with open(args.history, "w") as out:
            for op in result.history:
                out.write(json.dumps(op, sort_keys=True) + "\n")
    totals = Totals(
        runs=1,
        violations=0 if result.ok else 1,
        events=result.events,
        sim_ms=result.sim_ms,
        wall_started=started,
    )
    if not result.ok:
        print(f"VIOLATION seed {config.seed}: {result.violation}")
        if args.trace:
            for line in result.trace_tail:
                print(f"  {line}")
        print(f"replay: {config.replay_command()}")
    print(
        f"runs 1, violations {totals.violations}, "
        f"{(result.sim_ms / 1000) / max(wall_s, 1e-9):.1f} simulated s per wall s"
    )
    return 0 if result.ok else 1


def _print_failure(summary: RunSummary, trace: bool) -> None:
    print(f"VIOLATION seed {summary.seed}: {summary.violation}", flush=True)
    if trace:
        for line in summary.trace_tail:
            print(f"  {line}")
    print(f"replay: {summary.replay_command}", flush=True)


def _print_summary(totals: Totals) -> None:
    print(
        f"runs {totals.runs}, violations {totals.violations}, events {totals.events}, "
        f"simulated {totals.sim_ms / 1000:.1f} s in {totals.wall_s:.1f} wall s "
        f"({totals.speed():.1f} simulated s per wall s)"
    )
