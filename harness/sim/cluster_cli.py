"""`kraftlab sim cluster`: seeded simulations of controllers and brokers (metadata only).

    kraftlab sim cluster --seeds N [--seed S] [--brokers B] [--duration-ms D] [--trace]

runs seeds S..S+N-1 (S defaults to 1) of harness/sim/cluster_simulation.py, shows progress, and
ends with a summary; every failing seed prints its violation and the command that replays it.
Exit code: 0 no violation, 1 at least one.

The `sim` command group is S's (harness/sim/cli.py); this module adds the `cluster` kind to it
from outside (it is listed after harness.sim.cli in COMMAND_MODULES), so S's file is unchanged.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def _sim_kinds(sub: Any) -> Any:
    """The `sim` parser's sub-command action (created by harness.sim.cli.register)."""
    sim = sub.choices.get("sim")
    if sim is None:
        return None
    for action in sim._actions:  # argparse keeps sub-parsers as a private action
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def register(sub: Any) -> None:
    kinds = _sim_kinds(sub)
    if kinds is None:
        return
    c = kinds.add_parser(
        "cluster",
        help="simulate controllers and brokers with faults and check the metadata invariants",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("--seeds", type=int, default=None, help="number of seeds to run (default 1)")
    c.add_argument("--seed", type=int, default=None, help="first seed (default 1)")
    c.add_argument("--brokers", type=int, default=3, help="brokers (observers), ids 101..")
    c.add_argument(
        "--duration-ms", type=int, default=3000, help="simulated length of the safety (fault) phase"
    )
    c.add_argument("--trace", action="store_true", help="print the last events of a failing seed")
    c.set_defaults(handler=run_cluster)


def replay_command(seed: int, args: argparse.Namespace) -> str:
    return (
        f"kraftlab sim cluster --seed {seed} --brokers {args.brokers} "
        f"--duration-ms {args.duration_ms} --trace"
    )


def run_cluster(args: argparse.Namespace) -> int:
    import logging

    from harness.sim.cluster_simulation import cluster_config, run_cluster_seed
    from harness.sim.runner import quiet_logging

    quiet_logging(logging.ERROR)
    if (
        (args.seeds is not None and args.seeds < 1)
        or args.duration_ms < 100
        or not (1 <= args.brokers <= 9)
    ):
        print(
            "kraftlab sim cluster: INVALID_REQUEST: --seeds >= 1, --duration-ms >= 100, "
            "--brokers 1..9",
            file=sys.stderr,
        )
        return 2
    first = 1 if args.seed is None else args.seed
    count = args.seeds or 1
    started = time.monotonic()
    failures = 0
    sim_ms = 0
    last_progress = started
    for i, seed in enumerate(range(first, first + count), 1):
        result = run_cluster_seed(cluster_config(seed, args.brokers, args.duration_ms))
        sim_ms += result.sim_ms
        if count == 1:
            print(
                f"seed {seed}: digest {result.digest} events {result.events} simulated "
                f"{result.sim_ms} ms admin ops {result.stats.get('admin_ops')} partition "
                f"epochs {result.stats.get('partition_epochs_seen')}"
            )
        if not result.ok:
            failures += 1
            print(f"VIOLATION seed {seed}: {result.violation}", flush=True)
            if args.trace:
                for line in result.trace_tail:
                    print(f"  {line}")
            print(f"replay: {replay_command(seed, args)}")
        now = time.monotonic()
        if now - last_progress >= 2 or i == count:
            last_progress = now
            print(f"[{i}/{count}] violations={failures}", file=sys.stderr, flush=True)
    wall_s = max(time.monotonic() - started, 1e-9)
    print(
        f"runs {count}, violations {failures}, {sim_ms / 1000 / wall_s:.1f} simulated s per wall s"
    )
    return 1 if failures else 0
