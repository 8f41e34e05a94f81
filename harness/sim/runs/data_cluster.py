"""`kraftlab sim cluster` with the data plane: one seeded run of the data world
(harness/sim/actors/data_world.py: brokers hosting the real ReplicaCore on PartitionLog/SimStorage,
producers and consumers) on a Raft metadata quorum (harness/sim/actors/data_quorum.py), under a random
schedule of faults drawn from the seed, then the checks. `run_cluster_data(config)` is a pure
function of its config: same config, same digest, same summary.

Phases (simulated ms): the voters start at 0 and elect; brokers start once a controller is
active (Kafka brokers wait for the quorum); the topic (1 partition, RF `replication_factor`) is
created; producers and consumers run from WORKLOAD_START_MS for `duration_ms`; faults run from
FAULT_START_MS until FAULT_MARGIN_MS before the workload ends, one at a time, each healed after
its own duration; then everything is healed (network, crashed nodes restarted, paused nodes
resumed), the workload runs AFTER_HEAL_MS more, the clients stop, and after SETTLE_MS the final
drain reads the leader's log below its HW.

Faults (`--nemesis`, a comma list of kinds or shape names; targets drawn at the fault's start):
- partition: isolate-partition-leader (from everyone), leader-cut-from-followers, zombie-leader
  (partition leader cut from every controller), random-halves (brokers and voters),
  isolate-controller-leader (the active controller cut from every voter and broker), quorum-cut
  (every voter cut from every other: the processes run, brokers reach them, no majority);
- crash: kill-partition-leader, kill-broker (process kill: the page cache survives),
  crash-controller-leader, quorum-down (a majority of voters crashed);
- pause: pause-partition-leader, pause-broker, pause-controller-leader;
- power (opt-in, not in the default): leader-isolated-then-power-crash: the partition leader is
  cut from its followers for the fault, then loses power (its unflushed tail is gone) as the
  network heals and restarts 500 ms later (shapes.LAST_REPLICA_RESTART_MS) (the KIP-966 last-replica case: even
  acks=all with min.insync.replicas=2 can lose here, as in Kafka).

Checks: the world's per-event invariants (divergence-below-hw where it must hold: no unclean
election and no power crash so far, data_world.World.on_high_watermark; hw-above-isr-leo,
leader-epoch-regressed); the quorum's (Raft safety and the cluster simulator's image invariants
on every voter: a failure stops the run); at the end, no two live replicas disagree below their
HWs; Jepsen's queue checker over the send/poll history with the final drain: an
acknowledged write missing (lost-write) and the other safety anomalies (SAFETY_ANOMALIES);
liveness after the settle: an active controller, every broker registered and unfenced, the
partition led with every replica in its ISR (`Liveness`).
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

from harness.check.history import pair_operations
from harness.check.queue import QueueResult, check_queue
from harness.sim.actors.data_quorum import RaftControllerNode, raft_controller_factory
from harness.sim.actors.data_workload import Consumer, History, Producer, final_drain
from harness.sim.actors.data_world import CLIENT_BASE, World, WorldTiming
from harness.sim.checks.invariants import SafetyViolation
from harness.sim.faults.nemesis import Nemesis
from harness.sim.faults.shapes import CLUSTER_KINDS
from harness.sim.runs.data_simulation import replica_divergence
from partition.replica import ACKS_ALL, ACKS_LEADER, ReplicaConfig
from quorum.controller import ControllerConfig, CreateTopicRequest
from quorum.raft.errors import InvariantViolation

WORKLOAD_START_MS = 1500
FAULT_START_MS = 2500
FAULT_MARGIN_MS = 500
AFTER_HEAL_MS = 3000
SETTLE_MS = 2500
WRITE_INTERVAL_MS = 60
POLL_INTERVAL_MS = 100
FAULT_DURATION_MS = (300, 3000)  # some shorter, some longer than replica.lag.time.max.ms
FAULT_GAP_MS = (100, 1000)
SAFETY_ANOMALIES = ("lost-write", "duplicate", "inconsistent-offsets", "G1a", "precommitted-read")
WORLD_VIOLATIONS = ("divergence-below-hw", "hw-above-isr-leo", "leader-epoch-regressed")

DEFAULT_NEMESIS = ("partition", "crash", "pause")
CLUSTER_SHAPES = tuple(s for shapes in CLUSTER_KINDS.values() for s in shapes)


def parse_nemesis(spec: str) -> tuple[str, ...]:
    """A comma list of kinds and shapes -> the shapes, in a fixed order (ValueError if unknown);
    "none" gives no faults."""
    items = [s.strip() for s in spec.split(",") if s.strip()]
    if items == ["none"]:
        return ()
    shapes: list[str] = []
    for item in items:
        if item in CLUSTER_KINDS:
            shapes += CLUSTER_KINDS[item]
        elif item in CLUSTER_SHAPES:
            shapes.append(item)
        else:
            raise ValueError(
                f"unknown nemesis {item!r}; kinds: {', '.join(CLUSTER_KINDS)}; "
                f"shapes: {', '.join(CLUSTER_SHAPES)}"
            )
    return tuple(s for s in CLUSTER_SHAPES if s in shapes)


@dataclass(frozen=True, slots=True)
class ClusterDataConfig:
    seed: int = 1
    voters: int = 3
    brokers: int = 3
    replication_factor: int = 3
    acks: str = "all"  # "1" | "all"
    min_insync_replicas: int = 2
    replication_mode: str = "isr"
    unclean_leader_election: bool = False
    producers: int = 3
    consumers: int = 1
    duration_ms: int = 10_000  # the workload (faults run inside it)
    nemesis: tuple[str, ...] = tuple(s for k in DEFAULT_NEMESIS for s in CLUSTER_KINDS[k])
    timing: WorldTiming = field(default_factory=WorldTiming)

    def replay_args(self) -> str:
        kinds = [k for k, shapes in CLUSTER_KINDS.items() if set(shapes) <= set(self.nemesis)]
        rest = [s for s in self.nemesis if not any(s in CLUSTER_KINDS[k] for k in kinds)]
        nemesis = ",".join(kinds + rest) or "none"
        return (
            f"--seed {self.seed} --voters {self.voters} --brokers {self.brokers} "
            f"--replication-factor {self.replication_factor} --acks {self.acks} "
            f"--min-insync-replicas {self.min_insync_replicas} "
            f"--replication-mode {self.replication_mode} "
            f"{'--unclean ' if self.unclean_leader_election else ''}"
            f"--producers {self.producers} --consumers {self.consumers} "
            f"--data-duration-ms {self.duration_ms} --nemesis {nemesis}"
        )


@dataclass
class ClusterDataResult:
    config: ClusterDataConfig
    digest: str
    queue: QueueResult | None
    violations: dict[str, int]
    examples: list[str]
    faults: list[tuple[int, int, str, str]]  # (start ms, end ms, shape, target)
    acked: int
    lost: int
    divergent_offsets: int
    leader_elections: int
    unclean_elections: int
    isr_shrinks: int
    isr_expands: int
    controller_epochs: int
    quorum: dict[str, int]
    drained: bool
    sim_ms: int
    events: int
    wall_ms: int

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        verdict = (
            "ok"
            if self.ok
            else "VIOLATION " + ", ".join(f"{k} x{v}" for k, v in sorted(self.violations.items()))
        )
        return (
            f"seed {self.config.seed}: acked {self.acked} lost {self.lost} divergent "
            f"{self.divergent_offsets} | partition elections {self.leader_elections} "
            f"(unclean {self.unclean_elections}) ISR -{self.isr_shrinks}/+{self.isr_expands}"
            f" | controller epochs {self.controller_epochs} | faults {len(self.faults)} "
            f"| drained {'yes' if self.drained else 'no'} | {verdict}"
        )


class ClusterDataRun:
    """One run; `start()` schedules it, `run()` runs it to the end (tests may drive the world
    between the two)."""

    def __init__(self, config: ClusterDataConfig) -> None:
        self.config = config
        replica_config = ReplicaConfig(
            replica_lag_time_max_ms=config.timing.replica_lag_time_max_ms,
            min_insync_replicas=config.min_insync_replicas,
            replication_mode=config.replication_mode,
            replica_fetch_wait_max_ms=config.timing.replica_fetch_wait_max_ms,
            replica_fetch_backoff_ms=100,
            replica_socket_timeout_ms=config.timing.request_timeout_ms,
            alter_partition_timeout_ms=config.timing.request_timeout_ms,
        )
        controller_config = ControllerConfig(
            broker_heartbeat_interval_ms=config.timing.heartbeat_interval_ms,
            broker_session_timeout_ms=config.timing.session_timeout_ms,
            auto_leader_rebalance_enable=False,
        )
        self.world = world = World(
            config.seed,
            config.brokers,
            replica_config,
            controller_config,
            config.timing,
            controller_factory=raft_controller_factory(config.voters),
        )
        quorum = world.controller
        assert isinstance(quorum, RaftControllerNode)
        self.quorum = quorum
        quorum.on_partition_change = self._on_change
        self.history = History()
        acks = ACKS_ALL if config.acks == "all" else ACKS_LEADER
        concurrency = config.producers + config.consumers
        values = [1]
        self.producers = [
            Producer(
                world,
                CLIENT_BASE + i,
                self.history,
                i,
                concurrency,
                acks,
                WRITE_INTERVAL_MS,
                values,
            )
            for i in range(config.producers)
        ]
        self.consumers = [
            Consumer(
                world,
                CLIENT_BASE + config.producers + i,
                self.history,
                config.producers + i,
                concurrency,
                POLL_INTERVAL_MS,
            )
            for i in range(config.consumers)
        ]
        self.nemesis = Nemesis(world, random.Random(config.seed * 15485863 + 11))
        self.faults: list[tuple[int, int, str, str]] = []
        self.started = False
        self.workload_end = WORKLOAD_START_MS + config.duration_ms
        self.fault_end = self.workload_end - FAULT_MARGIN_MS - AFTER_HEAL_MS

    def _on_change(self, old: Any, new: Any) -> None:
        if old is None and not self.world.topic_id:
            self.world.topic_id = new.topic_id
        self.world._count_change(old, new)

    # -- startup -----------------------------------------------------------------------------------

    def _start_brokers(self) -> None:
        w = self.world
        if self.quorum.active_controller() is None and w.queue.now_ms < 3000:
            w.queue.call_at(w.queue.now_ms + 20, self._start_brokers)
            return
        for b in sorted(w.brokers):
            w.brokers[b].start()

    def _create_topic(self) -> None:
        if self.world.topic_id:
            return
        c = self.config
        self.quorum.submit(
            (-1, 0),
            CreateTopicRequest(
                "t",
                1,
                c.replication_factor,
                (
                    ("min.insync.replicas", str(c.min_insync_replicas)),
                    ("unclean.leader.election.enable", str(c.unclean_leader_election).lower()),
                    ("replication.mode", c.replication_mode),
                ),
            ),
        )
        self.world.queue.call_at(self.world.queue.now_ms + 300, self._create_topic)

    # -- the run -----------------------------------------------------------------------------------

    def start(self) -> None:
        w, c = self.world, self.config
        self.started = True
        w.queue.call_at(0, self._start_brokers)
        w.queue.call_at(500, self._create_topic)
        for i, p in enumerate(self.producers):
            p.start(WORKLOAD_START_MS + i * (WRITE_INTERVAL_MS // max(c.producers, 1)))
        for i, consumer in enumerate(self.consumers):
            consumer.start(WORKLOAD_START_MS + 7 + i * 13)
        self.nemesis.schedule_random(
            c.nemesis, FAULT_START_MS, self.fault_end, FAULT_DURATION_MS, FAULT_GAP_MS, self.faults
        )
        w.queue.call_at(self.fault_end + FAULT_MARGIN_MS, self.nemesis.heal_all)

    def run(self) -> ClusterDataResult:
        started = time.monotonic()
        if not self.started:
            self.start()
        w, c = self.world, self.config
        violations: dict[str, int] = {}
        examples: list[str] = []
        queue: QueueResult | None = None
        liveness: str | None = None
        drained = False
        divergent = 0
        try:
            w.run_until(self.workload_end - 1)
            for client in (*self.producers, *self.consumers):
                client.stopped = True
            w.run_until(self.workload_end + SETTLE_MS)
            liveness = self._liveness_missing()
            drained = final_drain(w, self.history, 10_000)
            divergent = replica_divergence(w)
            queue = check_queue(pair_operations(self.history.events))
        except SafetyViolation as exc:
            v = exc.violation
            violations[v.invariant] = 1
            examples.append(str(v))
        except InvariantViolation as exc:
            violations["CoreInvariant"] = 1
            examples.append(f"{w.queue.now_ms} ms: {exc}")
        for name in WORLD_VIOLATIONS:
            if w.counters.violations.get(name):
                violations[name] = w.counters.violations[name]
        examples += [
            e for e in w.counters.examples if e.split(": ", 1)[0].split()[-1] in WORLD_VIOLATIONS
        ]
        if divergent:
            violations["replica-divergence"] = divergent
        if liveness is not None:
            violations["Liveness"] = 1
            examples.append(f"Liveness after the heal: {liveness}")
        lost = 0
        acked = 0
        if queue is not None:
            lost = queue.counts.get("lost-write", 0)
            acked = queue.stats["sends"]["ok"]
            for name in SAFETY_ANOMALIES:
                if queue.counts.get(name, 0):
                    violations[name] = queue.counts[name]
                    for example in queue.anomalies.get(name, [])[:2]:
                        examples.append(f"{name}: {example}")
        counters = w.counters
        return ClusterDataResult(
            config=c,
            digest=self._digest(),
            queue=queue,
            violations=violations,
            examples=examples[:8],
            faults=list(self.faults),
            acked=acked,
            lost=lost,
            divergent_offsets=divergent,
            leader_elections=counters.leader_elections,
            unclean_elections=counters.unclean_elections,
            isr_shrinks=counters.isr_shrinks,
            isr_expands=counters.isr_expands,
            controller_epochs=self.quorum.stats["controller_epochs"],
            quorum=dict(self.quorum.stats),
            drained=drained,
            sim_ms=w.queue.now_ms,
            events=w.queue.events,
            wall_ms=int((time.monotonic() - started) * 1000),
        )

    def _liveness_missing(self) -> str | None:
        """After the heal and the settle: None if the cluster converged (an active controller,
        every broker registered and unfenced, the partition led with every replica back in the
        ISR), else what is missing."""
        quorum, w = self.quorum, self.world
        active = quorum.active_controller()
        if active is None:
            return "no active controller"
        image = quorum.voters[active].image
        for b in sorted(w.brokers):
            if not image.is_broker_usable(b):
                return f"broker {b} not registered and unfenced"
        part = image.partition(w.topic_id, 0) if w.topic_id else None
        if part is None:
            return "topic not created"
        if part.leader < 0 or set(part.isr) != set(part.replicas):
            return f"partition leader {part.leader}, ISR {part.isr} of {part.replicas}"
        return None

    def _digest(self) -> str:
        """Hash of the history, the faults and the event count: same seed, same digest."""
        h = hashlib.blake2b(digest_size=16)
        for e in self.history.events:
            h.update(f"{e.time} {e.process} {e.type} {e.f} {e.value!r} {e.error}\n".encode())
        h.update(repr(self.faults).encode())
        h.update(f"{self.world.queue.events} {self.world.queue.now_ms}".encode())
        return h.hexdigest()


def run_cluster_data(config: ClusterDataConfig) -> ClusterDataResult:
    return ClusterDataRun(config).run()
