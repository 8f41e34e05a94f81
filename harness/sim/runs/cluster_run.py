"""`kraftlab sim cluster --plane data`: one seeded data-plane run of a Cluster
(harness.sim.runs.cluster: brokers hosting the real ReplicaCore on PartitionLog/SimStorage, a Raft
metadata quorum of `voters` controllers, producers and consumers) under a random schedule of
faults drawn from the seed (harness.sim.faults.nemesis.Nemesis.schedule_random), then the checks.
`run_cluster(config)` is a pure function of its config: same config, same digest, same summary.

Phases (simulated ms): the voters and the brokers start at 0 (the brokers register once a
controller leads, as Kafka brokers wait for the quorum); the topic (1 partition, RF
`replication_factor`) is created; producers and consumers run from WORKLOAD_START_MS for
`duration_ms`; faults run from FAULT_START_MS until FAULT_MARGIN_MS before the workload ends, one
at a time, each healed after its own duration; then everything is healed (network, crashed
processes restarted, paused ones resumed), the workload runs AFTER_HEAL_MS more, the clients
stop, and after SETTLE_MS the final drain reads the leader's log below its HW.

Faults (`--nemesis`, a comma list of kinds or shape names of harness.sim.faults.shapes
CLUSTER_KINDS; targets drawn at the fault's start):
- partition: isolate-partition-leader (from its followers, then from everyone),
  leader-cut-from-followers, zombie-leader (partition leader cut from every controller),
  random-halves (controllers and brokers), isolate-controller-leader (the active controller cut
  from every voter and broker), quorum-cut (every voter cut from every other: the processes run,
  brokers reach them, no majority);
- crash: kill-partition-leader, kill-broker (process kill: the page cache survives),
  crash-controller-leader, quorum-down (a majority of voters crashed);
- pause: pause-partition-leader, pause-broker, pause-controller-leader;
- power (opt-in, not in the default): leader-isolated-then-power-crash: the partition leader is
  cut from its followers for the fault, then loses power (its unflushed tail is gone) as the
  network heals and restarts 500 ms later (the KIP-966 last-replica case: even acks=all with
  min.insync.replicas=2 can lose here, as in Kafka).

Checks: the replicas' per-event invariants (harness.sim.checks.replicas: divergence-below-hw
where it must hold, no unclean election and no power loss so far; hw-above-isr-leo,
leader-epoch-regressed); the quorum's (Raft safety and the image invariants on every voter: a
failure stops the run); at the end, no two live replicas disagree below their HWs; Jepsen's queue
checker over the send/poll history with the final drain: an acknowledged write missing
(lost-write) and the other safety anomalies (SAFETY_ANOMALIES); liveness after the settle: an
active controller, every broker registered and unfenced, the partition led with every replica in
its ISR (`Liveness`).
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass, field

from harness.check.history import pair_operations
from harness.check.queue import QueueResult, check_queue
from harness.sim.actors.clients import CLIENT_BASE, Consumer, History, Producer
from harness.sim.actors.raft_host import RaftSettings
from harness.sim.checks.invariants import SafetyViolation
from harness.sim.faults.nemesis import Nemesis
from harness.sim.faults.shapes import CLUSTER_KINDS
from harness.sim.runs.cluster import Cluster, DataTiming, data_plane_configs, raft_settings_for
from partition.replica import ACKS_ALL, ACKS_LEADER
from partition.replica.errors import InvariantViolation as ReplicaInvariantViolation
from quorum.controller import CreateTopicRequest
from quorum.metadata.configs import REPLICATION_MODE_RAFT
from quorum.raft.errors import InvariantViolation

TOPIC_CREATE_MS = 500
TOPIC_RETRY_MS = 300
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
REPLICA_VIOLATIONS = ("divergence-below-hw", "hw-above-isr-leo", "leader-epoch-regressed",
                      "two-leaders", "hw-regressed", "hw-above-majority-leo")

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
class ClusterRunConfig:
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
    timing: DataTiming = field(default_factory=DataTiming)

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
class ClusterRunResult:
    config: ClusterRunConfig
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


class ClusterRun:
    """One run; `start()` schedules it, `run()` runs it to the end (tests may drive the cluster
    between the two)."""

    def __init__(self, config: ClusterRunConfig, raft_settings: RaftSettings | None = None) -> None:
        """`raft_settings`: a raft-mode run's partition settings instead of the seed's drawn
        ones (raft_settings_for; tests plant bugs there)."""
        self.config = config
        raft = config.replication_mode == REPLICATION_MODE_RAFT
        replica_config, controller_config = data_plane_configs(
            config.timing, config.min_insync_replicas, config.replication_mode)
        self.cluster = cluster = Cluster(config.seed, config.brokers, replica_config,
                                         controller_config, config.timing, voters=config.voters,
                                         raft=(raft_settings or raft_settings_for(config.seed))
                                         if raft else None)
        self.history = History()
        acks = ACKS_ALL if config.acks == "all" else ACKS_LEADER
        concurrency = config.producers + config.consumers
        timeout_ms = config.timing.request_timeout_ms
        values = [1]
        self.producers = [
            Producer(CLIENT_BASE + i, cluster, self.history, i, concurrency, acks,
                     WRITE_INTERVAL_MS, timeout_ms, values,
                     random.Random(config.seed * 1009 + CLIENT_BASE + i))
            for i in range(config.producers)
        ]
        self.consumers = [
            Consumer(CLIENT_BASE + config.producers + i, cluster, self.history,
                     config.producers + i, concurrency, POLL_INTERVAL_MS, timeout_ms,
                     random.Random(config.seed * 1009 + CLIENT_BASE + config.producers + i))
            for i in range(config.consumers)
        ]
        self.nemesis = Nemesis(cluster.world, random.Random(config.seed * 15485863 + 11))
        self.faults: list[tuple[int, int, str, str]] = []
        self.started = False
        self.workload_end = WORKLOAD_START_MS + config.duration_ms
        self.fault_end = self.workload_end - FAULT_MARGIN_MS - AFTER_HEAL_MS

    def _create_topic(self) -> None:
        cluster, c = self.cluster, self.config
        if cluster.topic_id:
            return
        cluster.create_topic(
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
        queue = cluster.world.queue
        queue.call_at(queue.now_ms + TOPIC_RETRY_MS, self._create_topic)

    def start(self) -> None:
        cluster, c = self.cluster, self.config
        world = cluster.world
        self.started = True
        for b in sorted(cluster.brokers):
            world.queue.call_at(0, world.restart, b)
        world.queue.call_at(TOPIC_CREATE_MS, self._create_topic)
        for i, p in enumerate(self.producers):
            cluster.add_client(p, WORKLOAD_START_MS + i * (WRITE_INTERVAL_MS // max(c.producers, 1)))
        for i, consumer in enumerate(self.consumers):
            cluster.add_client(consumer, WORKLOAD_START_MS + 7 + i * 13)
        self.nemesis.schedule_random(
            c.nemesis, FAULT_START_MS, self.fault_end, FAULT_DURATION_MS, FAULT_GAP_MS, self.faults
        )
        world.queue.call_at(self.fault_end + FAULT_MARGIN_MS, self.nemesis.heal_all)

    def run(self) -> ClusterRunResult:
        started = time.monotonic()
        if not self.started:
            self.start()
        cluster, c = self.cluster, self.config
        queue = cluster.world.queue
        violations: dict[str, int] = {}
        examples: list[str] = []
        queue_result: QueueResult | None = None
        liveness: str | None = None
        drained = False
        divergent = 0
        try:
            cluster.run_until(self.workload_end - 1)
            for client in (*self.producers, *self.consumers):
                client.stopped = True
            cluster.run_until(self.workload_end + SETTLE_MS)
            liveness = self._liveness_missing()
            drained = cluster.final_drain(self.history, 10_000)
            divergent = cluster.divergence()
            queue_result = check_queue(pair_operations(self.history.events))
        except SafetyViolation as exc:
            v = exc.violation
            violations[v.invariant] = 1
            examples.append(str(v))
        except (InvariantViolation, ReplicaInvariantViolation) as exc:
            violations["CoreInvariant"] = 1
            examples.append(f"{queue.now_ms} ms: {exc}")
        counters = cluster.replicas.counters
        for name in REPLICA_VIOLATIONS:
            if counters.violations.get(name):
                violations[name] = counters.violations[name]
        examples += [
            e for e in counters.examples if e.split(": ", 1)[0].split()[-1] in REPLICA_VIOLATIONS
        ]
        if divergent:
            violations["replica-divergence"] = divergent
        if liveness is not None:
            violations["Liveness"] = 1
            examples.append(f"Liveness after the heal: {liveness}")
        lost = 0
        acked = 0
        if queue_result is not None:
            lost = queue_result.counts.get("lost-write", 0)
            acked = queue_result.stats["sends"]["ok"]
            for name in SAFETY_ANOMALIES:
                if queue_result.counts.get(name, 0):
                    violations[name] = queue_result.counts[name]
                    for example in queue_result.anomalies.get(name, [])[:2]:
                        examples.append(f"{name}: {example}")
        return ClusterRunResult(
            config=c,
            digest=self._digest(),
            queue=queue_result,
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
            controller_epochs=cluster.stats["controller_epochs"],
            quorum=dict(cluster.stats),
            drained=drained,
            sim_ms=queue.now_ms,
            events=queue.events,
            wall_ms=int((time.monotonic() - started) * 1000),
        )

    def _liveness_missing(self) -> str | None:
        """After the heal and the settle: None if the cluster converged (an active controller,
        every broker registered and unfenced, the partition led with every replica back in the
        ISR), else what is missing."""
        cluster = self.cluster
        active = cluster.active_controller()
        if active is None:
            return "no active controller"
        image = cluster.world.actors[active].image
        for b in sorted(cluster.brokers):
            if not image.is_broker_usable(b):
                return f"broker {b} not registered and unfenced"
        topic_id = cluster.topic_id
        part = image.partition(topic_id, 0) if topic_id else None
        if part is None:
            return "topic not created"
        if part.leader < 0 or set(part.isr) != set(part.replicas):
            return f"partition leader {part.leader}, ISR {part.isr} of {part.replicas}"
        if cluster.raft is not None and part.leader != cluster.raft_leader():
            return f"the image names leader {part.leader}, the Raft group {cluster.raft_leader()}"
        return None

    def _digest(self) -> str:
        """Hash of the history, the faults and the event count: same seed, same digest."""
        h = hashlib.blake2b(digest_size=16)
        for e in self.history.events:
            h.update(f"{e.time} {e.process} {e.type} {e.f} {e.value!r} {e.error}\n".encode())
        h.update(repr(self.faults).encode())
        queue = self.cluster.world.queue
        h.update(f"{queue.events} {queue.now_ms}".encode())
        return h.hexdigest()


def run_cluster(config: ClusterRunConfig) -> ClusterRunResult:
    return ClusterRun(config).run()
