"""`kraftlab sim cluster`: seeded simulations of a whole cluster: the metadata quorum (Raft
controllers), brokers, and (issue 5) the data plane with producers and consumers.

    kraftlab sim cluster --seeds N [--seed S] [--plane both|data|metadata] [--brokers B]
        [--voters V] [--replication-factor R] [--acks 1|all] [--min-insync-replicas M]
        [--replication-mode isr|quorum] [--unclean] [--producers P] [--consumers C]
        [--nemesis partition,crash,pause] [--data-duration-ms D] [--duration-ms D] [--trace]
        [--jobs J]

runs seeds S..S+N-1 (S defaults to 1). Per seed, by default (`--plane both`):
- the metadata run (harness/sim/runs/metadata_run.py): 3 controllers, B brokers registering
  and heartbeating, an admin client creating/deleting topics and electing leaders, the quorum
  nemesis, then a liveness phase; metadata invariants after every event;
- the data run (harness/sim/runs/data_cluster.py): V Raft controllers (the active controller runs on
  the Raft leader) and B brokers hosting a topic of one partition (RF R) on the real replica
  state machine, P producers (acks), C consumers, and a random fault schedule drawn from the
  seed (`--nemesis`: kinds partition, crash, pause, power, or shape names); checked: no
  acknowledged write lost, no two replicas disagree below the HW, HW <= min ISR LEO, Raft
  safety and the metadata invariants on every controller.
`--plane metadata` is the metadata run alone (the command's behaviour before the data plane),
`--plane data` the data run alone. Every seed prints a one-line summary of its data run; a
failing seed prints its violation and the command that replays it exactly.
Exit code: 0 no violation, 1 at least one, 2 invalid options.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

PLANES = ("both", "data", "metadata")


def _sim_kinds(sub: Any) -> Any:
    """The `sim` parser's sub-command action (created by harness.cli.sim.register)."""
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
    d.add_argument("--replication-mode", choices=("isr", "quorum"), default="isr")
    d.add_argument(
        "--unclean", action="store_true", help="unclean.leader.election.enable=true (default false)"
    )
    d.add_argument("--producers", type=int, default=3, help="default 3")
    d.add_argument("--consumers", type=int, default=1, help="default 1")
    d.add_argument(
        "--nemesis",
        default="partition,crash,pause",
        help="fault kinds (partition, crash, pause, power) or shape names, comma "
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
    from harness.sim.runs.data_cluster import parse_nemesis

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


def _data_config(seed: int, args: argparse.Namespace) -> Any:
    from harness.sim.runs.data_cluster import ClusterDataConfig, parse_nemesis

    return ClusterDataConfig(
        seed=seed,
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


@dataclass(frozen=True, slots=True)
class SeedOutcome:
    """What one seed printed and counted (small and picklable: workers send it back)."""

    seed: int
    failed: bool
    lines: tuple[str, ...]
    sim_ms: int
    totals: tuple[tuple[str, int], ...] = ()


_ARGS: argparse.Namespace | None = None  # the options, inherited by forked workers


def _run_seed(seed: int) -> SeedOutcome:
    from harness.sim.runs.data_cluster import run_cluster_data
    from harness.sim.runs.metadata_run import cluster_config, run_cluster_seed

    args = _ARGS
    assert args is not None
    single = (args.seeds or 1) == 1
    lines: list[str] = []
    failed = False
    sim_ms = 0
    totals: dict[str, int] = {}
    if args.plane in ("both", "metadata"):
        result = run_cluster_seed(cluster_config(seed, args.brokers, args.duration_ms))
        sim_ms += result.sim_ms
        if single:
            lines.append(
                f"seed {seed} metadata: digest {result.digest} events {result.events} "
                f"simulated {result.sim_ms} ms admin ops {result.stats.get('admin_ops')} "
                f"partition epochs {result.stats.get('partition_epochs_seen')}"
            )
        if not result.ok:
            failed = True
            lines.append(f"VIOLATION seed {seed} (metadata): {result.violation}")
            if args.trace:
                lines += [f"  {line}" for line in result.trace_tail]
            lines.append(f"replay: {replay_command(seed, args)}")
    if args.plane in ("both", "data"):
        data = run_cluster_data(_data_config(seed, args))
        sim_ms += data.sim_ms
        totals = {
            "acked": data.acked,
            "lost": data.lost,
            "divergent": data.divergent_offsets,
            "elections": data.leader_elections,
            "faults": len(data.faults),
        }
        lines.append(data.summary() + (f" | digest {data.digest}" if single else ""))
        if not data.ok:
            failed = True
            lines += [f"  {line}" for line in data.examples]
            if args.trace:
                lines += [
                    f"  fault {start}-{end} ms {shape} ({target})"
                    for start, end, shape, target in data.faults
                ]
            lines.append(
                f"replay: kraftlab sim cluster --plane data {data.config.replay_args()} --trace"
            )
    return SeedOutcome(seed, failed, tuple(lines), sim_ms, tuple(sorted(totals.items())))


def _outcomes(seeds: range, jobs: int) -> Iterator[SeedOutcome]:
    """In seed order, whatever `jobs` is (runs are independent and deterministic)."""
    from harness.sim.runs.runner import quiet_logging

    if jobs <= 1:
        for seed in seeds:
            yield _run_seed(seed)
        return
    context = multiprocessing.get_context("fork")
    with context.Pool(jobs, initializer=quiet_logging) as pool:
        yield from pool.imap(_run_seed, seeds, chunksize=1)


def run_cluster(args: argparse.Namespace) -> int:
    import logging

    from harness.sim.runs.runner import quiet_logging

    global _ARGS
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
    if args.plane != "metadata":
        sample = _data_config(first, args)
        print(
            f"data plane: {sample.voters} controllers, {sample.brokers} brokers, RF "
            f"{sample.replication_factor}, acks={sample.acks}, min.insync.replicas="
            f"{sample.min_insync_replicas}, mode {sample.replication_mode}, unclean "
            f"{str(sample.unclean_leader_election).lower()}, nemesis {args.nemesis}",
            flush=True,
        )
    _ARGS = args
    try:
        for i, outcome in enumerate(_outcomes(range(first, first + count), args.jobs), 1):
            sim_ms += outcome.sim_ms
            for key, value in outcome.totals:
                totals[key] += value
            for line in outcome.lines:
                print(line, flush=True)
            failures += outcome.failed
            now = time.monotonic()
            if now - last_progress >= 2 or i == count:
                last_progress = now
                print(f"[{i}/{count}] violations={failures}", file=sys.stderr, flush=True)
    finally:
        _ARGS = None
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
