"""`kraftlab sim cluster`: seeded simulations of a whole cluster: the metadata quorum (Raft
controllers), brokers, and the data plane with producers and consumers.

    kraftlab sim cluster --seeds N [--seed S] [--plane both|data|metadata] [--brokers B]
        [--voters V] [--replication-factor R] [--acks 1|all] [--min-insync-replicas M]
        [--replication-mode isr|quorum|raft] [--unclean] [--producers P] [--consumers C]
        [--nemesis partition,crash,pause] [--data-duration-ms D] [--duration-ms D] [--trace]
        [--jobs J]

runs seeds S..S+N-1 (S defaults to 1). Per seed, by default (`--plane both`):
- the metadata run (harness/sim/runs/metadata_run.py): 3 controllers, B brokers registering
  and heartbeating, an admin client creating/deleting topics and electing leaders, the quorum
  nemesis, then a liveness phase; metadata invariants after every event;
- the data run (harness/sim/runs/cluster_run.py): V Raft controllers (the active controller runs on
  the Raft leader) and B brokers hosting a topic of one partition (RF R) on the real replica
  state machine, P producers (acks), C consumers, and a random fault schedule drawn from the
  seed (`--nemesis`: kinds partition, crash, pause, power, power-loss, or shape names);
  checked: no acknowledged write lost, no two replicas disagree below the HW, HW <= min ISR
  LEO, Raft safety and the metadata invariants on every controller. `--replication-mode raft`:
  the partition's replicas are a Raft group (harness/sim/actors/raft_host.py), also checked for
  one leader per epoch, a HW that never goes back and never passes the majority's log end.
`--plane metadata` is the metadata run alone (the command's behaviour before the data plane),
`--plane data` the data run alone. Every seed prints a one-line summary of its data run; a
failing seed prints its violation and the command that replays it exactly.
Exit code: 0 no violation, 1 at least one, 2 invalid options.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

PLANES = ("both", "data", "metadata")  # harness.sim.runs.cluster_seeds.PLANES


def add_kind(kinds: Any) -> None:
    """Add `cluster` to the `sim` group's kinds (harness/cli/sim.py)."""
    c = kinds.add_parser(
        "cluster",
        help="simulate controllers, brokers, producers and consumers with faults and check "
        "the metadata and data invariants",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("--seeds", type=int, default=None, help="number of seeds to run (default 1)")
    c.add_argument("--seed", type=int, default=None, help="first seed (default 1)")
    c.add_argument(
        "--plane",
        choices=PLANES,
        default="both",
        help="metadata run, data run, or both per seed (default both)",
    )
    c.add_argument("--brokers", type=int, default=3, help="brokers (default 3)")
    c.add_argument(
        "--duration-ms",
        type=int,
        default=3000,
        help="metadata run: simulated length of the safety (fault) phase (default 3000)",
    )
    c.add_argument("--trace", action="store_true", help="print the last events of a failing seed")
    c.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="worker processes (default 1; output is the same for any value)",
    )
    d = c.add_argument_group("data plane")
    d.add_argument("--voters", type=int, default=3, help="controller voters (default 3)")
    d.add_argument("--replication-factor", type=int, default=3, help="default 3")
    d.add_argument("--acks", choices=("1", "all"), default="all", help="default all")
    d.add_argument("--min-insync-replicas", type=int, default=2, help="default 2")
    d.add_argument("--replication-mode", choices=("isr", "quorum", "raft"), default="isr")
    d.add_argument(
        "--unclean", action="store_true", help="unclean.leader.election.enable=true (default false)"
    )
    d.add_argument("--producers", type=int, default=3, help="default 3")
    d.add_argument("--consumers", type=int, default=1, help="default 1")
    d.add_argument(
        "--nemesis",
        default="partition,crash,pause",
        help="fault kinds (partition, crash, pause, power, power-loss) or shape names, comma "
        "separated, or none (default partition,crash,pause)",
    )
    d.add_argument(
        "--data-duration-ms",
        type=int,
        default=10_000,
        help="simulated length of the workload; faults run in all but its last "
        "3.5 s (default 10000, at least 5000)",
    )
    c.set_defaults(handler=run_cluster)


def _check(args: argparse.Namespace) -> str | None:
    if args.seeds is not None and args.seeds < 1:
        return "--seeds must be >= 1"
    if args.duration_ms < 100:
        return "--duration-ms must be >= 100"
    if not 1 <= args.brokers <= 9:
        return "--brokers must be 1..9"
    if not 1 <= args.jobs <= 16:
        return "--jobs must be 1..16"
    if args.plane == "metadata":
        return None
    if args.voters not in (1, 3, 5, 7):
        return "--voters must be 1, 3, 5 or 7"
    if not 1 <= args.replication_factor <= args.brokers:
        return "--replication-factor must be 1..--brokers"
    if not 1 <= args.min_insync_replicas <= args.replication_factor:
        return "--min-insync-replicas must be 1..--replication-factor"
    if not (0 <= args.producers <= 8 and 0 <= args.consumers <= 4):
        return "--producers must be 0..8, --consumers 0..4"
    if args.data_duration_ms < 5000:
        return "--data-duration-ms must be >= 5000"
    from harness.sim.runs.cluster_run import parse_nemesis

    try:
        parse_nemesis(args.nemesis)
    except ValueError as exc:
        return str(exc)
    return None


def replay_command(seed: int, args: argparse.Namespace) -> str:
    return (
        f"kraftlab sim cluster --plane metadata --seed {seed} --brokers {args.brokers} "
        f"--duration-ms {args.duration_ms} --trace"
    )


def _plan(args: argparse.Namespace) -> Any:
    from harness.sim.runs.cluster_run import ClusterRunConfig, parse_nemesis
    from harness.sim.runs.cluster_seeds import SeedPlan

    data = ClusterRunConfig(
        seed=1 if args.seed is None else args.seed,
        voters=args.voters,
        brokers=args.brokers,
        replication_factor=args.replication_factor,
        acks=args.acks,
        min_insync_replicas=args.min_insync_replicas,
        replication_mode=args.replication_mode,
        unclean_leader_election=args.unclean,
        producers=args.producers,
        consumers=args.consumers,
        duration_ms=args.data_duration_ms,
        nemesis=parse_nemesis(args.nemesis),
    )
    return SeedPlan(args.plane, args.brokers, args.duration_ms, data)


def _lines(outcome: Any, args: argparse.Namespace, single: bool) -> list[str]:
    """What one seed prints."""
    lines: list[str] = []
    seed, meta, data = outcome.seed, outcome.metadata, outcome.data
    if meta is not None:
        if single:
            lines.append(
                f"seed {seed} metadata: digest {meta.digest} events {meta.events} "
                f"simulated {meta.sim_ms} ms admin ops {meta.admin_ops} "
                f"partition epochs {meta.partition_epochs}"
            )
        if meta.violation is not None:
            lines.append(f"VIOLATION seed {seed} (metadata): {meta.violation}")
            if args.trace:
                lines += [f"  {line}" for line in meta.trace_tail]
            lines.append(f"replay: {replay_command(seed, args)}")
    if data is not None:
        lines.append(data.summary + (f" | digest {data.digest}" if single else ""))
        if not data.ok:
            lines += [f"  {line}" for line in data.examples]
            if args.trace:
                lines += [
                    f"  fault {start}-{end} ms {shape} ({target})"
                    for start, end, shape, target in data.faults
                ]
            lines.append(f"replay: kraftlab sim cluster --plane data {data.replay_args} --trace")
    return lines


def run_cluster(args: argparse.Namespace) -> int:
    import logging

    from harness.sim.runs.cluster_seeds import run_seeds
    from harness.sim.runs.runner import quiet_logging

    quiet_logging(logging.ERROR)
    error = _check(args)
    if error:
        print(f"kraftlab sim cluster: INVALID_REQUEST: {error}", file=sys.stderr)
        return 2
    first = 1 if args.seed is None else args.seed
    count = args.seeds or 1
    started = time.monotonic()
    failures = 0
    sim_ms = 0
    totals = {"acked": 0, "lost": 0, "divergent": 0, "elections": 0, "faults": 0}
    last_progress = started
    plan = _plan(args)
    if args.plane != "metadata":
        sample = plan.data
        print(
            f"data plane: {sample.voters} controllers, {sample.brokers} brokers, RF "
            f"{sample.replication_factor}, acks={sample.acks}, min.insync.replicas="
            f"{sample.min_insync_replicas}"
            f"{' (does not apply)' if sample.replication_mode == 'raft' else ''}, "
            f"mode {sample.replication_mode}, unclean "
            f"{str(sample.unclean_leader_election).lower()}, nemesis {args.nemesis}",
            flush=True,
        )
    for i, outcome in enumerate(run_seeds(plan, range(first, first + count), args.jobs), 1):
        sim_ms += outcome.sim_ms
        if outcome.data is not None:
            for key, value in outcome.data.totals:
                totals[key] += value
        for line in _lines(outcome, args, count == 1):
            print(line, flush=True)
        failures += outcome.failed
        now = time.monotonic()
        if now - last_progress >= 2 or i == count:
            last_progress = now
            print(f"[{i}/{count}] violations={failures}", file=sys.stderr, flush=True)
    wall_s = max(time.monotonic() - started, 1e-9)
    data_part = ""
    if args.plane != "metadata":
        data_part = (
            f", acked writes {totals['acked']}, lost {totals['lost']}, divergent "
            f"offsets {totals['divergent']}, partition elections "
            f"{totals['elections']}, faults {totals['faults']}"
        )
    print(
        f"runs {count}, violations {failures}{data_part}, "
        f"{sim_ms / 1000 / wall_s:.1f} simulated s per wall s"
    )
    print("verdict: " + ("VIOLATIONS FOUND" if failures else "no violation"))
    return 1 if failures else 0
