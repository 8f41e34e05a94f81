"""Simulation checked against real processes: the same faults, settings and fault timing on the
simulator and on a real cluster (`kraftlab jepsen run`'s runner), and a table of where the two
agree on each metric and where they do not.

Cells: FAULTS (each a real nemesis and its matrix name) x MODES (isr, quorum, raft: every
mode runs on both sides, `kraftlab jepsen run` with replication.mode=raft topics) x `runs`
runs.
Settings on both sides: acks=all, min.insync.replicas=2, RF 3, one partition, idempotent
retrying producers, unclean election off; the fault held FAULT_S after a lead-in, then healed.
The simulator runs with the real cluster's timeouts (REAL_TIMING: runner.QUEUE_OVERRIDES'
broker.session.timeout.ms 3000, heartbeat 500, replica.lag.time.max.ms 2000) and each mode's
default durability; its seeds are the run numbers.

Agreement, per cell and metric (`compare`), stated with the table:
- lost acknowledged writes: both sides lost some, or neither did;
- write availability during the fault (acknowledged / attempted, pooled over the runs): within
  AVAILABILITY_TOLERANCE;
- available time during the fault: the share of [fault start, heal) outside the unavailability
  windows (gaps of at least 1 s between acknowledged writes, by completion time), pooled over
  the runs: within AVAILABILITY_TOLERANCE. Unlike attempts, this does not depend on how many
  writes a client blocked on a request in flight offers during an outage (a real producer made
  6 attempts in a 5 s outage), nor on whether a retried write completed after the heal;
- recovery after the heal (median ms to the first acknowledged write): within
  max(RECOVERY_TOLERANCE_MS, half the larger);
- partition leader elections (median per run): within one.
A disagreement is reported with its reason where it is known (EXPLAINED), else as not explained
yet; never hidden. A cell where both sides are zero (no loss, 0% available time, no election)
is `0-0`, counted apart from the agreements that carry information: it says neither side did a
thing, not that they did it alike.

Apache Kafka is the reference column (docs/compare.md "Apache Kafka as the reference column"):
the same Jepsen runner against the peer kit's KRaft cluster (harness/jepsen/target_kafka.py:
3 controllers, brokers 101-103, the same node settings under Kafka's names), the same faults
and fault timing, ISR replication only, so its cells stand beside kraftlab's `isr` rows and are
judged against both the simulated and the real side by the same rules. Only the faults its
target does with the same shape run there (`kafka_faults`): the process faults by PID, on one
peer on loopback; the link faults where network namespaces can be had (root, ip, nft:
harness/launcher/netns.py), each run on a peer of its own laid out in namespaces, the same
grudge as kraftlab's nemesis plans, enforced by the kernel's nftables where kraftlab's real
runs enforce it in their transport's link filter. `crash-unflushed` runs on a peer of its own
whose brokers' log dirs are on the lazy file system (harness/peers/lazyfs), where a power loss
loses what a broker did not fsync, as kraftlab's brokers lose it with
`kraftlab.log.unflushed.in.process=1` (the same key starts both); where the lazy file system
cannot be mounted (no /dev/fuse) it is not run on Kafka (NO_LAZYFS): a kill -9 alone keeps the
page cache, where Kafka's unflushed appends are.

Both sides are measured from the fault's own heal. A real run's row says `heal_ms` = the
fault's own heal (its stop event, `fault_end_ms`; harness/jepsen/summary_row.py), as the
simulator's does. Rows written before summary_row did so carried the run's final clean-up heal
at its time limit, seconds later: `retimed` moves such a row's heal to its fault's end and
measures recovery from there (the first acknowledged write completing after the heal); without
it, "during the fault" on the real side took in the seconds after the heal, where every write is
served (what made `leader-cut-from-followers-only` look 98.8% available).
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.results.schema import RunSummary

NS_PER_MS = 1_000_000

# (the real nemesis, the simulated shape that does the same): `crash-unflushed` kills every
# replica at once with its unflushed tail lost (harness/jepsen/nemesis.py), which is the
# simulator's power-loss-all-brokers. Each pair is the matrix name the real run's row carries
# (harness/jepsen/summary_row.py JEPSEN_TO_MATRIX; tests/spark/test_sim_vs_real.py checks it).
FAULTS: tuple[tuple[str, str], ...] = (
    ("kill-partition-leader", "kill-leader"),
    ("pause-partition-leader", "pause-leader"),
    ("isolate-partition-leader", "isolate-partition-leader"),
    ("leader-cut-from-followers-only", "leader-cut-from-followers-only"),
    ("zombie-leader", "zombie-leader"),
    ("crash-unflushed", "power-loss-all-brokers"),
)
MODES = ("isr", "quorum", "raft")
UNFLUSHED_FAULTS = ("crash-unflushed",)
FLUSH = {"isr": "page-cache", "quorum": "fsync-before-ack", "raft": "fsync-before-ack"}
FAULT_S = 5.0
LEAD_IN_S = 1.0
TIME_LIMIT_S = 12.0
AVAILABILITY_TOLERANCE = 0.15
RECOVERY_TOLERANCE_MS = 500
# Why the two sides differ where the reason is known, by (real fault, metric); any other
# disagreement is reported as not explained yet (a finding to chase).
# A kill closes the dead process's connections at once (FIN/RST): real producers learn it and
# retry on the new leader; the simulator answers a request in flight at the kill with nothing
# until its timeout (harness/sim/actors/clients.py `peer_unreachable`).
_NO_CLOSE = ("a real kill closes the dead broker's connections at once (the kernel's FIN/RST), so "
             "a producer with a request in flight retries on the new leader; a simulated request "
             "in flight at the kill waits for request.timeout.ms (the simulator does not model "
             "the close)")
_TWO_STAGE = ("the real nemesis cuts the leader from everyone at once, so it is fenced after "
              "broker.session.timeout.ms (3 s) and replaced within the fault; the simulated shape "
              "cuts it from its followers for the first 60% of the fault, so its fencing falls "
              "after the heal")
# Where the attempt ratio disagrees but the available time agrees: the ratio, not the cluster.
_ATTEMPTS = ("the available time agrees: the attempt ratio differs because a real producer blocks "
             "on its request in flight and offers a handful of writes during an outage (the "
             "simulated ones offer one every 60 ms), so the real ratio is set by the few writes "
             "at the fault's edges")
# A killed broker's restart: the real heal ends once its processes are spawned.
_RESTART = ("the real heal ends when the killed brokers' processes are spawned; every replica "
            "was killed, so no leader exists until they have started (Python start-up, log "
            "recovery, registration with the controller: seconds on a loaded 2-core machine), "
            "while a simulated broker is up at once")
EXPLAINED: dict[tuple[str, str], str] = {
    ("crash-unflushed", "availability"): _RESTART,
    ("kill-partition-leader", "availability"): _NO_CLOSE,
    ("kill-partition-leader", "available time"): _NO_CLOSE,
    ("crash-unflushed", "recovery"): _RESTART,
    ("isolate-partition-leader", "availability"): _TWO_STAGE,
    ("isolate-partition-leader", "recovery"): _TWO_STAGE,
    ("isolate-partition-leader", "elections"): _TWO_STAGE,
}
# Why kraftlab's real runs and Apache Kafka differ where the reason is known, by (real fault,
# metric): the Kafka column's own reasons (docs/compare.md "The power loss on Kafka").
KAFKA_EXPLAINED: dict[tuple[str, str], str] = {
    ("crash-unflushed", "recovery"): (
        "Kafka's way back from every replica's power loss is a JVM start, the recovery of each "
        "unclean log above its recovery point, the registration and then the election (about "
        "8 s); kraftlab's brokers are Python processes back in about a second"),
    ("crash-unflushed", "elections"): (
        "Kafka's one election (the last known ELR member, KIP-966, logged as an UNCLEAN "
        "partition change) came after the 12 s run had ended, so the run counts none"),
}
UNEXPLAINED = "not explained yet: a finding"
METRICS = ("loss", "availability", "available time", "recovery", "elections")
BOTH_ZERO = "0-0"
NO_NETNS = "a link fault: on Kafka it needs network namespaces (root, ip, nft), not had here"
KAFKA_MODE = "isr"  # Kafka's replication: the ISR with leader epochs
NO_LAZYFS = ("a power loss: on Kafka it needs the lazy file system (/dev/fuse, fusermount3), "
             "not had here; a kill -9 alone keeps the page cache")


def kafka_faults(faults: Sequence[tuple[str, str]] = FAULTS, netns: bool | None = None,
                 lazyfs: bool | None = None) -> list[tuple[str, str]]:
    """The faults of `faults` the Kafka target does with the same shape (module docstring);
    `netns`: whether link faults can run in namespaces, `lazyfs`: whether the unflushed ones
    can lose the page cache (None: whether they can here)."""
    from harness.jepsen.nemesis_kafka import supported
    from harness.launcher.netns import missing
    from harness.peers.lazyfs.mount import missing as lazyfs_missing

    can = supported(missing() is None if netns is None else netns)
    power = lazyfs_missing() is None if lazyfs is None else lazyfs
    return [f for f in faults if f[0] in can and (power or f[0] not in UNFLUSHED_FAULTS)]


def real_timing() -> Any:
    from harness.sim.runs.cluster import DataTiming

    return DataTiming(heartbeat_interval_ms=500, session_timeout_ms=3000,
                      replica_lag_time_max_ms=2000)


def real_producer() -> tuple[int, int, int]:
    """The real runs' producer timeouts as the simulated producers' (request.timeout.ms,
    delivery.timeout.ms, retry.backoff.ms): a write in flight to a paused or dead leader waits
    as long on both sides. The real operation is recorded when its send completes or after
    op_timeout_s (then `info`, whatever the producer does later), so the simulated delivery
    timeout is that operation timeout: a write not acknowledged within it is not served on
    either side."""
    from harness.jepsen.workload_queue import QueueOptions, producer_timeouts_ms

    op_timeout_s = QueueOptions().op_timeout_s
    request, _, backoff = producer_timeouts_ms(op_timeout_s)
    return request, int(op_timeout_s * 1000), backoff


def sim_rows(faults: Sequence[tuple[str, str]] = FAULTS, modes: Sequence[str] = MODES,
             runs: int = 3) -> list[RunSummary]:
    """The simulated side: one row per fault, mode and seed 1..runs."""
    from harness.sim.runs.matrix import run_one
    from harness.sim.runs.runner import quiet_logging
    from harness.sim.runs.scenario_run import ScenarioConfig

    quiet_logging()
    rows = []
    for _, nemesis in faults:
        for mode in modes:
            for seed in range(1, runs + 1):
                config = ScenarioConfig(
                    seed=seed, replication_mode=mode, acks="all", min_insync_replicas=2,
                    nemesis=nemesis, fault_duration_ms=int(FAULT_S * 1000),
                    start_jitter_ms=500, metadata="raft", flush_policy=FLUSH[mode],
                    producer="kafka", timing=real_timing(),
                    producer_timeouts_ms=real_producer())
                rows.append(run_one(config).row)
    return rows


def real_rows(out: Path, faults: Sequence[tuple[str, str]] = FAULTS,
              modes: Sequence[str] = MODES, runs: int = 3,
              progress: Callable[[str], None] = print,
              client: str = "native") -> list[tuple[str, RunSummary]]:
    """The real side: (the real nemesis, its row) per fault, mode and run number, each run in
    its own topic on a fresh cluster of 3 controllers and 3 brokers on 127.0.0.1 (stopped
    afterwards, its own PIDs only). Faults that lose the page cache (UNFLUSHED_FAULTS) get a
    cluster of their own whose brokers keep unflushed appends in process memory
    (`kraftlab.log.unflushed.in.process`, harness/jepsen/nemesis.py), so a kill loses them as
    a power loss would; the others run where a kill keeps the page cache, as SIGKILL does.
    `client`: the producers' and consumers' protocol ("kafka": the aiokafka clients the Kafka
    column's runs use, through the brokers' Kafka listeners; "native": harness/client)."""
    rows: list[tuple[str, RunSummary]] = []
    for lose_unflushed in (False, True):
        group = [f for f in faults if (f[0] in UNFLUSHED_FAULTS) == lose_unflushed]
        if group:
            rows += _real_group(out / ("unflushed" if lose_unflushed else "page-cache"), group,
                                modes, runs, lose_unflushed, progress, client)
    return rows


def _real_group(out: Path, faults: Sequence[tuple[str, str]], modes: Sequence[str], runs: int,
                lose_unflushed: bool, progress: Callable[[str], None],
                client: str = "native") -> list[tuple[str, RunSummary]]:
    from harness.jepsen.nemesis import UNFLUSHED_KEY
    from harness.jepsen.runner import (
        DEFAULT_OVERRIDES,
        RunOptions,
        bring_down,
        bring_up,
    )
    from harness.launcher import cluster as cl

    out.mkdir(parents=True, exist_ok=True)
    data_dir = (out / f"cluster-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}").resolve()
    overrides = {**DEFAULT_OVERRIDES, **({UNFLUSHED_KEY: "1"} if lose_unflushed else {})}
    rows: list[tuple[str, RunSummary]] = []  # (the real nemesis, its row)
    try:
        bring_up(RunOptions(out_dir=out, workload="queue", overrides=overrides,
                            progress=progress), data_dir)
        for real, nemesis in faults:
            for mode in modes:
                for i in range(1, runs + 1):
                    run_out = out / f"{real}-{mode}-{i}"
                    if run_out.exists():
                        shutil.rmtree(run_out)
                    options = run_options(run_out, real, nemesis, mode, i, data_dir,
                                          overrides, progress, client=client)
                    rows += _one_run(options, real, f"{real} {mode} run {i}",
                                     progress)
    finally:
        if cl.ClusterFile.path_in(data_dir).exists():
            stuck = bring_down(data_dir)
            if stuck:
                progress(f"WARNING: nodes {stuck} did not stop")
    return rows


def run_options(run_out: Path, real: str, nemesis: str, mode: str, i: int, data_dir: Path,
                overrides: dict[str, str], progress: Callable[[str], None],
                system: str = "kraftlab", client: str = "native") -> Any:
    """One cell's run, the same on every side: the fault, its timing, the workload (on Kafka
    always through the Kafka protocol; on kraftlab through `client`). The fault
    waits until a write was acknowledged (`served_on_every_partition`), then the lead-in: a
    run whose clients were still starting when the fault began would measure their start-up
    (a Kafka peer's first Metadata answers can take seconds on a loaded machine)."""
    from harness.jepsen.run_core import served_on_every_partition
    from harness.jepsen.runner import RunOptions
    from harness.jepsen.workload_queue import QueueOptions

    return RunOptions(
        out_dir=run_out, workload="queue", nemesis=real, system=system,
        time_limit_s=TIME_LIMIT_S, seed=i, data_dir=data_dir, overrides=overrides,
        queue=QueueOptions(topic=f"svr-{mode}-{nemesis}-{i}", replication_mode=mode,
                           acks="all", min_insync_replicas=2, replication_factor=3,
                           partitions=1, producers=3, consumers=1, rate=50.0,
                           client="kafka" if system == "kafka" else client),
        fault_s=(FAULT_S, FAULT_S), quiet_s=(60.0, 60.0), lead_in_s=LEAD_IN_S,
        start_when=served_on_every_partition(1),
        recovery_timeout_s=15.0, final_timeout_s=10.0, progress=progress)


def _one_run(options: Any, real: str, name: str,
             progress: Callable[[str], None]) -> list[tuple[str, RunSummary]]:
    """The run's rows, retimed to the fault's own heal; none if it could not run."""
    from harness.check.history import load_history
    from harness.jepsen.runner import RunError, run
    from harness.results.schema import read_dataset

    run_out = options.out_dir
    if run_out.exists():
        shutil.rmtree(run_out)
    try:
        run(options)
    except RunError as exc:
        progress(f"{name} failed: {exc}")
        return []
    ops = load_history(run_out / "history.jsonl")
    rows = [(real, retimed(r, ops)) for r in read_dataset(run_out / "summary")]
    kept = []
    for _, r in rows:
        if not served_before_fault(r, ops):
            progress(f"{name}: left out, its fault began before any write was acknowledged")
            continue
        progress(f"{name}: {r.acked_writes} acknowledged, {r.lost_writes} lost")
        kept.append((real, r))
    return kept


def kafka_rows(out: Path, faults: Sequence[tuple[str, str]] = FAULTS, runs: int = 3,
               progress: Callable[[str], None] = print,
               netns: bool | None = None) -> list[tuple[str, RunSummary]]:
    """Apache Kafka's side: (the real nemesis, its row) per fault of `kafka_faults(faults,
    netns)` and run number, each run in its own topic: the process faults on one peer (3
    controllers, brokers 101-103 on 127.0.0.1) started with the kraftlab runs' node settings
    and stopped afterwards by its recorded PIDs; the link faults each on a peer of its own in
    network namespaces, which the run lays out and deletes (module docstring)."""
    from harness.jepsen.nemesis import UNFLUSHED_KEY
    from harness.jepsen.nemesis_kafka import KAFKA_FAULTS
    from harness.jepsen.runner import DEFAULT_OVERRIDES

    same = kafka_faults(faults, netns)
    overrides = dict(DEFAULT_OVERRIDES)
    rows: list[tuple[str, RunSummary]] = []
    for lose_unflushed in (False, True):  # as real_rows: a peer of its own for power losses
        group = [f for f in same if f[0] in KAFKA_FAULTS
                 and (f[0] in UNFLUSHED_FAULTS) == lose_unflushed]
        rows += _kafka_shared_peer(
            out / ("unflushed" if lose_unflushed else "page-cache"), group, runs,
            {**overrides, **({UNFLUSHED_KEY: "1"} if lose_unflushed else {})}, progress)
    for real, nemesis in (f for f in same if f[0] not in KAFKA_FAULTS):
        for i in range(1, runs + 1):
            options = dataclasses.replace(
                run_options(out / f"{real}-kafka-{i}", real, nemesis, KAFKA_MODE, i,
                            out / f"peer-{real}-{i}", overrides, progress, system="kafka"),
                net="netns")
            if options.data_dir.exists():
                shutil.rmtree(options.data_dir)
            rows += _one_run(options, real, f"{real} kafka netns run {i}",
                             progress)
    return rows


def _kafka_shared_peer(out: Path, faults: Sequence[tuple[str, str]], runs: int,
                       overrides: dict[str, str],
                       progress: Callable[[str], None]) -> list[tuple[str, RunSummary]]:
    """The process faults' runs, on one loopback peer (`kafka_rows`)."""
    from harness.jepsen import target_kafka as tk
    from harness.jepsen.run_core import cluster_overrides
    from harness.peers.kafka import cluster as pk
    from harness.peers.kafka.install import InstallError

    if not faults:
        return []
    out.mkdir(parents=True, exist_ok=True)
    data_dir = (out / f"peer-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}").resolve()
    first = run_options(out, faults[0][0], faults[0][1], KAFKA_MODE, 1, data_dir, overrides,
                        progress, system=tk.SYSTEM)
    rows: list[tuple[str, RunSummary]] = []
    try:
        pk.up(data_dir, layout=tk.LAYOUT, controllers=first.controllers, brokers=3,
              overrides=cluster_overrides(first), timeout_s=tk.PEER_STARTUP_S, progress=progress,
              lazyfs=tk.loses_unflushed(cluster_overrides(first)))
        for real, nemesis in faults:
            for i in range(1, runs + 1):
                options = run_options(out / f"{real}-kafka-{i}", real, nemesis, KAFKA_MODE, i,
                                      data_dir, overrides, progress, system=tk.SYSTEM)
                rows += _one_run(options, real, f"{real} kafka run {i}",
                                 progress)
    except (pk.PeerError, InstallError) as exc:
        progress(f"Apache Kafka peer failed: {exc}")
    finally:
        if pk.PeerFile.path_in(data_dir).exists():
            stuck = pk.down(data_dir, timeout_s=tk.STOP_TIMEOUT_S)
            if stuck:
                progress(f"WARNING: Kafka nodes {stuck} did not stop")
    return rows


def served_before_fault(row: RunSummary, ops: Sequence[Any]) -> bool:
    """A write was acknowledged before the fault began: the run measured the fault, not its
    clients' start-up (no unavailability window is counted before a run's first write)."""
    if row.fault_start_ms is None:
        return True
    return any(op.is_client and op.f == "send" and op.type == "ok"
               and op.completion is not None
               and op.completion.time // NS_PER_MS < row.fault_start_ms for op in ops)


def load_rows(root: Path,
              faults: Sequence[tuple[str, str]] = FAULTS) -> list[tuple[str, RunSummary]]:
    """(the real nemesis, its retimed row) of every run written under `root` by `real_rows` or
    `kafka_rows` (a run's directory holds history.jsonl and summary/): the table can be built
    again from the runs on disk, the simulated side re-run from its seeds."""
    from harness.check.history import load_history
    from harness.results.schema import read_dataset

    real_of = {matrix: real for real, matrix in faults}
    rows: list[tuple[str, RunSummary]] = []
    for summary in sorted(root.rglob("summary")):
        history = summary.parent / "history.jsonl"
        if not summary.is_dir() or not history.exists():
            continue
        ops = load_history(history)
        rows += [(real_of[r.nemesis], retimed(r, ops)) for r in read_dataset(summary)
                 if r.nemesis in real_of and served_before_fault(r, ops)]
    return rows


def retimed(row: RunSummary, ops: Sequence[Any]) -> RunSummary:
    """A real run's row with its heal at the fault's own end and the recovery measured from
    there (module docstring); unchanged when the fault lasted until the final heal."""
    heal = row.fault_end_ms
    if heal is None or row.heal_ms is None or heal >= row.heal_ms:
        return row
    served = sorted(op.completion.time // NS_PER_MS for op in ops
                    if op.is_client and op.f == "send" and op.type == "ok"
                    and op.completion is not None and not op.flag("final")
                    and op.completion.time // NS_PER_MS >= heal)
    return dataclasses.replace(row, heal_ms=heal,
                               recovery_time_ms=served[0] - heal if served else None)


@dataclass(frozen=True, slots=True)
class Side:
    runs: int
    lost: int
    lossy_runs: int
    availability: float | None
    recovery_ms: float | None
    elections: float
    time_available: float | None = None


def _unavailable_during(r: RunSummary) -> tuple[int, int]:
    """(ms of [fault start, heal) inside an unavailability window, the window's length)."""
    if r.fault_start_ms is None or r.heal_ms is None:
        return 0, 0
    start, heal = r.fault_start_ms, r.heal_ms
    gone = sum(max(0, min(w.end_ms, heal) - max(w.start_ms, start))
               for w in r.unavailability_windows)
    return gone, heal - start


def side(rows: Sequence[RunSummary]) -> Side:
    att = ok = 0
    for r in rows:
        if r.fault_start_ms is None or r.heal_ms is None:
            continue
        for s in r.per_second:
            if r.fault_start_ms <= 1000 * s.second < r.heal_ms:
                att += s.writes_attempted
                ok += s.writes_succeeded
    recoveries = [r.recovery_time_ms for r in rows if r.recovery_time_ms is not None]
    spans = [_unavailable_during(r) for r in rows]
    window = sum(length for _, length in spans)
    return Side(len(rows), sum(r.lost_writes for r in rows),
                sum(1 for r in rows if r.lost_writes), ok / att if att else None,
                statistics.median(recoveries) if recoveries else None,
                statistics.median([r.leader_elections for r in rows]) if rows else 0.0,
                1 - sum(gone for gone, _ in spans) / window if window else None)


def _agree(metric: str, sim: Side, real: Side) -> bool | None:
    if metric == "loss":
        return (sim.lost > 0) == (real.lost > 0)
    if metric == "availability":
        if sim.availability is None or real.availability is None:
            return None
        return abs(sim.availability - real.availability) <= AVAILABILITY_TOLERANCE
    if metric == "available time":
        if sim.time_available is None or real.time_available is None:
            return None
        return abs(sim.time_available - real.time_available) <= AVAILABILITY_TOLERANCE
    if metric == "recovery":
        if sim.recovery_ms is None or real.recovery_ms is None:
            return None
        bound = max(RECOVERY_TOLERANCE_MS, max(sim.recovery_ms, real.recovery_ms) / 2)
        return abs(sim.recovery_ms - real.recovery_ms) <= bound
    return abs(sim.elections - real.elections) <= 1


def _show(metric: str, s: Side) -> str:
    match metric:
        case "loss":
            return f"{s.lost} lost in {s.lossy_runs} of {s.runs} runs"
        case "availability":
            return "-" if s.availability is None else f"{100 * s.availability:.1f}%"
        case "available time":
            return "-" if s.time_available is None else f"{100 * s.time_available:.1f}%"
        case "recovery":
            return "-" if s.recovery_ms is None else f"{s.recovery_ms:.0f} ms"
    return f"{s.elections:g}"


def _both_zero(metric: str, a: Side, b: Side) -> bool:
    """Neither side did the thing the metric counts (module docstring: `0-0`)."""
    if metric == "loss":
        return a.lost == 0 and b.lost == 0
    if metric == "available time":
        return a.time_available == 0 and b.time_available == 0
    if metric == "elections":
        return a.elections == 0 and b.elections == 0
    return False


def _judged(metric: str, a: Side, b: Side) -> str:
    """"yes", "no", "0-0" (both zero) or "-" (not judged) for one metric of two sides."""
    agree = _agree(metric, a, b)
    if agree is None:
        return "-"
    if agree and _both_zero(metric, a, b):
        return BOTH_ZERO
    return "yes" if agree else "no"


def compare(sim: Sequence[RunSummary], real: Sequence[tuple[str, RunSummary]],
            faults: Sequence[tuple[str, str]] = FAULTS,
            kafka: Sequence[tuple[str, RunSummary]] = ()) -> list[dict[str, Any]]:
    """One row per fault, mode and metric where both sides ran (see the module docstring);
    `real` and `kafka` hold (real nemesis, row) pairs, matched to the simulated shape by
    `faults`. With Kafka rows, every row gains the Kafka side where it ran (an `isr` cell of a
    fault in `kafka_faults`) and its agreement with the simulated and the real side; elsewhere
    those say "-"."""
    out = []
    shape = dict(faults)
    cells = sorted({(name, r.replication_mode) for name, r in real if name in shape})
    for name, mode in cells:
        s = side([r for r in sim if (r.nemesis, r.replication_mode) == (shape[name], mode)])
        t = side([r for n, r in real if (n, r.replication_mode) == (name, mode)])
        if not s.runs:
            continue
        k = side([r for n, r in kafka if n == name]) if mode == KAFKA_MODE else side([])
        label = name if shape[name] == name else f"{name} ({shape[name]})"
        for metric in METRICS:
            agree = _judged(metric, s, t)
            row = {"fault": label, "mode": mode, "metric": metric,
                   "sim": _show(metric, s), "real": _show(metric, t), "agree": agree,
                   "reason": _reason(name, metric, s, t) if agree == "no" else ""}
            if kafka:
                row.update(kafka=_show(metric, k) if k.runs else "-",
                           sim_kafka=_judged(metric, s, k) if k.runs else "-",
                           real_kafka=_judged(metric, t, k) if k.runs else "-")
                row["kafka_reason"] = _kafka_reason(name, metric, row)
            out.append(row)
    return out


def _kafka_reason(name: str, metric: str, row: dict[str, Any]) -> str:
    """Why a side differs from Kafka: kraftlab's real runs by KAFKA_EXPLAINED; the simulator,
    where it also differs from the real runs, by the reason column's own reason."""
    if row["real_kafka"] == "no":
        return KAFKA_EXPLAINED.get((name, metric), UNEXPLAINED)
    if row["sim_kafka"] == "no":
        return ("as against kraftlab's real runs (the reason column)" if row["agree"] == "no"
                else UNEXPLAINED)
    return ""


def _reason(name: str, metric: str, sim: Side, real: Side) -> str:
    known = EXPLAINED.get((name, metric))
    if known is not None:
        return known
    if metric == "availability" and _agree("available time", sim, real):
        return _ATTEMPTS
    return UNEXPLAINED


def _counts(table: Sequence[dict[str, Any]], column: str) -> tuple[int, int, int]:
    """(agree, judged, both zero) over one agreement column."""
    said = [r.get(column, "-") for r in table]
    return (said.count("yes"), sum(1 for a in said if a in ("yes", "no")), said.count(BOTH_ZERO))


def markdown(table: Sequence[dict[str, Any]], runs: int, when: str) -> str:
    agreed, judged, zero = _counts(table, "agree")
    lines = [f"Simulation against real processes ({when}): {runs} runs per fault and mode on "
             f"each side; the two agree on {agreed} of {judged} metric cells that carry "
             f"information ({zero} more are 0 against 0)."]
    with_kafka = any(r.get("kafka", "-") != "-" for r in table)
    if with_kafka:
        for column, what in (("sim_kafka", "the simulator agrees"),
                             ("real_kafka", "kraftlab's real runs agree")):
            agreed, judged, zero = _counts(table, column)
            lines.append(f"Against Apache Kafka ({KAFKA_MODE} cells of the faults it runs with "
                         f"the same shape): {what} on {agreed} of {judged} ({zero} more "
                         "0 against 0).")
    head = ["fault", "mode", "metric", "simulated", "real", "agree", "reason when they do not"]
    keys = ["fault", "mode", "metric", "sim", "real", "agree", "reason"]
    if with_kafka:
        head[5:5] = ["Apache Kafka", "sim vs Kafka", "real vs Kafka"]
        keys[5:5] = ["kafka", "sim_kafka", "real_kafka"]
        head.append("reason when one differs from Kafka")
        keys.append("kafka_reason")
        ran = {r["fault"].split(" (")[0] for r in table if r.get("kafka", "-") != "-"}
        shown = {r["fault"].split(" (")[0] for r in table}
        why = [f"{name}: {NO_LAZYFS if name in UNFLUSHED_FAULTS else NO_NETNS}"
               for name in sorted(shown - ran)]
        lines.append(("Not run on Kafka: " + "; ".join(why) + ". " if why else "")
                     + "Link faults on Kafka are the kernel's drops in network namespaces; on "
                     "kraftlab's real side, its transport's link filter, for the same grudge.")
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(r.get(k, "-")) for k in keys) + " |" for r in table]
    return "\n".join(lines) + "\n"


def run_sim_vs_real(out: Path, runs: int = 3, faults: Sequence[tuple[str, str]] = FAULTS,
                    modes: Sequence[str] = MODES, progress: Callable[[str], None] = print,
                    with_kafka: bool = False,
                    client: str = "native") -> tuple[list[dict[str, Any]], Path]:
    """Both sides (and Apache Kafka's, `with_kafka`), the table as out/sim-vs-real.md and .csv:
    (rows, markdown path). `client`: the real kraftlab runs' (real_rows)."""
    real = real_rows(out / "real", faults, modes, runs, progress, client)
    kafka = kafka_rows(out / "kafka", faults, runs, progress) \
        if with_kafka and KAFKA_MODE in modes else []  # fmt: skip
    return write_table(out, real, kafka, runs, faults, modes)


def write_table(out: Path, real: Sequence[tuple[str, RunSummary]],
                kafka: Sequence[tuple[str, RunSummary]], runs: int,
                faults: Sequence[tuple[str, str]] = FAULTS,
                modes: Sequence[str] = MODES) -> tuple[list[dict[str, Any]], Path]:
    """The simulated side for the faults that ran, the table as out/sim-vs-real.md and .csv."""
    import csv

    sim = sim_rows([f for f in faults if any(name == f[0] for name, _ in real)], modes, runs)
    table = compare(sim, real, faults, kafka)
    when = datetime.now(UTC).isoformat(timespec="minutes")
    path = out / "sim-vs-real.md"
    path.write_text(markdown(table, runs, when))
    with (out / "sim-vs-real.csv").open("w", newline="") as handle:
        fields = ["fault", "mode", "metric", "sim", "real", "agree", "reason"]
        if kafka:
            fields[5:5] = ["kafka", "sim_kafka", "real_kafka"]
            fields.append("kafka_reason")
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(table)
    return table, path
