"""One cell of the scenario matrix (`kraftlab sim matrix`): one deterministic data-plane run of a
Cluster (harness.sim.runs.cluster: brokers hosting ReplicaCores, the abstract controller or a Raft
quorum, producers and a consumer) under one nemesis shape (harness.sim.faults), then the checkers.
`run_scenario(config)` is a pure function of its config (the seed included): same config, same
history, same summary row.

Phases (simulated ms): the controllers start at 0 and the brokers at seeded times below
`start_jitter_ms` (they register once a controller is known, as Kafka brokers wait for the
quorum); the topic (1 partition, RF `replication_factor`) is created from TOPIC_CREATE_MS; the
workload starts at WORKLOAD_START_MS; the fault starts at FAULT_START_MS and is healed
`fault_duration_ms` later (plus the shape's restart after the end); the workload runs
AFTER_HEAL_MS more, then stops; after SETTLE_MS of quiet the final drain reads the leader's log.

Checked after every event: the replicas' invariants (harness.sim.checks.replicas: a leader's HW
never exceeds the minimum ISR LEO it knows, the majority LEO in quorum mode; committed-prefix
agreement, which `leader.epoch.enable=true` must guarantee unless an unclean election or a lost
disk tail hands leadership to a shorter log: an invariant only until such a loss, counted after
it, and never the matrix's divergence column; leader epochs a broker sees never go back; for a
raft-mode cell, one leader per Raft epoch, HW monotonic, HW at most the majority's log end, and
committed-prefix agreement whatever was lost); on the Raft quorum (`metadata="raft"`), Raft
safety and the voters' image invariants (`quorum-safety`).
After the run: Jepsen's queue checker (harness/check/queue.py) over the send/poll history with
the final drain: lost-write, duplicate, inconsistent-offsets, ...; and the replicas' end state
(`replica_divergence`: records that differ below two replicas' HWs, the KIP-101 divergence the
summary row reports as divergent_offsets).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace

from harness.check.history import pair_operations
from harness.check.queue import QueueResult, check_queue
from harness.sim.actors.clients import CLIENT_BASE, Client, Consumer, History, Producer
from harness.sim.actors.kafka_producer import KafkaProducer, ProducerSettings
from harness.sim.checks.invariants import SafetyViolation
from harness.sim.faults.fault import Span
from harness.sim.faults.nemesis import Nemesis
from harness.sim.faults.shapes import SCENARIO_NEMESES, SHAPES
from harness.sim.runs.cluster import Cluster, DataTiming, data_plane_configs, raft_settings_for
from partition.replica import ACKS_ALL, ACKS_LEADER
from partition.replica.errors import InvariantViolation as ReplicaInvariantViolation
from quorum.controller import CreateTopicRequest
from quorum.metadata.configs import REPLICATION_MODE_RAFT
from quorum.raft.errors import InvariantViolation

TOPIC_CREATE_MS = 300
TOPIC_RETRY_MS = 500
WORKLOAD_START_MS = 1000
FAULT_START_MS = 3000
AFTER_HEAL_MS = 3000
SETTLE_MS = 2500
PRODUCERS = 3
WRITE_INTERVAL_MS = 60  # per producer: ~50 writes/s in all
POLL_INTERVAL_MS = 100
METADATA_KINDS = ("abstract", "raft")
METADATA_VOTERS = 3
PRODUCER_KINDS = ("simple", "kafka")
DRAIN_PROCESS = 10**9  # the final drain's history process, apart from every client's
# The probe measures availability around the fault: it starts a second before it (the
# "before" baseline), which spares the simulator a probe over the whole warm-up.
PROBE_START_MS = FAULT_START_MS - 1000


@dataclass(frozen=True, slots=True)
class ScenarioConfig:
    seed: int = 1
    replication_mode: str = "isr"
    acks: str = "all"  # "1" | "all"
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    eligible_leader_replicas: bool = False
    leader_epoch_enable: bool = True
    replication_factor: int = 3
    nemesis: str = "none"
    fault_duration_ms: int = 5000
    # > 0: each broker starts at a seeded time in [0, start_jitter_ms) and each producer with a
    # seeded offset in [0, WRITE_INTERVAL_MS), so that seeds vary where the fault (still at
    # FAULT_START_MS, on a second boundary as the per-second phases need) falls against writes
    # in flight, heartbeats, fetches and HW checkpoints. 0: everything starts on the dot.
    start_jitter_ms: int = 0
    # The metadata side: "abstract" (one ControllerService whose proposals commit after
    # abstract_controller.COMMIT_DELAY_MS) or "raft" (METADATA_VOTERS simulated Raft voters,
    # harness/sim/runs/cluster.py, on which the controller nemeses act). The matrix uses "raft".
    metadata: str = "abstract"
    # The brokers' disk (harness.sim.actors.disk): None keeps cost-free flushes and a random
    # torn prefix on power loss; a policy times every fsync from the measured distribution and
    # a power loss drops exactly what was not fsynced.
    flush_policy: str | None = None
    # The writers: "simple" (one attempt per write, no retry, a tick skipped while a write is in
    # flight) or "kafka" (harness.sim.actors.kafka_producer: open-loop, idempotent, retries
    # within delivery.timeout.ms). probe_interval_ms > 0 adds an open-loop probe writing every
    # that many ms (the row's availability in time).
    producer: str = "simple"
    probe_interval_ms: int = 0
    timing: DataTiming = field(default_factory=DataTiming)
    # Raft partitions' election timeout (a trade-off curve's setting); None: drawn per seed
    # (harness.sim.runs.cluster.draw_raft_settings). Only raft-mode runs may set it.
    raft_election_timeout_ms: int | None = None
    # The Kafka producers' (request.timeout.ms, delivery.timeout.ms, retry.backoff.ms); None:
    # harness.sim.actors.kafka_producer's scaled defaults. The simulation-against-real table
    # gives the real runs' producers' own (harness/study/sim_vs_real.py `real_producer`).
    producer_timeouts_ms: tuple[int, int, int] | None = None

    @property
    def brokers(self) -> int:
        return self.replication_factor

    def key(self) -> str:
        return (f"{self.replication_mode}-acks{self.acks}-isr{self.min_insync_replicas}-"
                f"u{int(self.unclean_leader_election)}-elr{int(self.eligible_leader_replicas)}-"
                f"le{int(self.leader_epoch_enable)}-rf{self.replication_factor}-{self.nemesis}-"
                f"{self.fault_duration_ms}ms"
                + (f"-j{self.start_jitter_ms}" if self.start_jitter_ms else "")
                + ("-raft" if self.metadata == "raft" else "")
                + (f"-{self.flush_policy}" if self.flush_policy else "")
                + (f"-{self.producer}" if self.producer != "simple" else "")
                + (f"-probe{self.probe_interval_ms}" if self.probe_interval_ms else "")
                + (f"-et{self.raft_election_timeout_ms}" if self.raft_election_timeout_ms
                   else "")
                + ("" if self.producer_timeouts_ms is None else
                   "-pt" + "-".join(map(str, self.producer_timeouts_ms)))
                + ("" if self.timing == DataTiming() else
                   f"-lag{self.timing.replica_lag_time_max_ms}"
                   f"-sess{self.timing.session_timeout_ms}")
                + f"-s{self.seed}")


@dataclass
class ScenarioResult:
    config: ScenarioConfig
    history: History
    queue: QueueResult
    violations: dict[str, int]
    violation_examples: list[str]
    leader_elections: int
    unclean_elections: int
    isr_shrinks: int
    isr_expands: int
    timeline: list[Span]
    fault_start_ms: int | None
    fault_end_ms: int | None
    heal_ms: int | None
    workload_end_ms: int
    sim_ms: int
    events: int
    wall_ms: int
    drained: bool
    divergent_offsets: int = 0  # replica_divergence at the end of the run
    # (time ms, HW) each time the partition's HW first passed a new height (ReplicaChecker)
    hw_marks: tuple[tuple[int, int], ...] = ()
    first_leader_ms: int | None = None  # the partition's first leader (ReplicaChecker)

    @property
    def lost_writes(self) -> int:
        return self.queue.counts.get("lost-write", 0)

    def anomalies(self) -> dict[str, int]:
        return {k: v for k, v in self.queue.counts.items() if v}


def build_cluster(config: ScenarioConfig) -> Cluster:
    """The cluster of `config`: brokers, the metadata side, no clients yet. A raft-mode cell's
    brokers host Raft groups (harness.sim.actors.raft_host) with the seed's drawn Raft timing;
    min.insync.replicas, unclean election and ELR do not apply to them."""
    raft = config.replication_mode == REPLICATION_MODE_RAFT
    replica_config, controller_config = data_plane_configs(
        config.timing, config.min_insync_replicas, config.replication_mode,
        leader_epoch_enable=config.leader_epoch_enable,
        eligible_leader_replicas=config.eligible_leader_replicas)
    if config.metadata not in METADATA_KINDS:
        raise ValueError(f"metadata={config.metadata!r}, expected one of {METADATA_KINDS}")
    voters = METADATA_VOTERS if config.metadata == "raft" else 0
    if config.raft_election_timeout_ms is not None and not raft:
        raise ValueError("raft_election_timeout_ms applies to replication.mode=raft runs only")
    settings = raft_settings_for(config.seed, config.raft_election_timeout_ms) if raft else None
    if settings is not None and config.flush_policy is not None:
        # The measured disk (harness.sim.actors.disk) instead of the seed's fixed fsync time:
        # each grouped fsync of the Raft host draws from the broker's disk, as ISR and quorum
        # brokers draw each of theirs.
        settings = replace(settings, fsync_ms=0, measured_disk=True)
    return Cluster(config.seed, config.brokers, replica_config, controller_config, config.timing,
                   voters=voters, raft=settings, flush_policy=config.flush_policy)


def topic_request(config: ScenarioConfig) -> CreateTopicRequest:
    return CreateTopicRequest("t", 1, config.replication_factor, (
        ("min.insync.replicas", str(config.min_insync_replicas)),
        ("unclean.leader.election.enable", str(config.unclean_leader_election).lower()),
        ("replication.mode", config.replication_mode),
    ))


class ScenarioRun:
    """One run; `run()` runs it to the end (tests may schedule on `cluster.world.queue` first)."""

    def __init__(self, config: ScenarioConfig) -> None:
        if config.nemesis not in SCENARIO_NEMESES:
            raise ValueError(
                f"unknown nemesis {config.nemesis!r}; known: {', '.join(SCENARIO_NEMESES)}"
            )
        self.config = config
        self.cluster = cluster = build_cluster(config)
        if config.producer not in PRODUCER_KINDS:
            raise ValueError(f"producer={config.producer!r}, expected one of {PRODUCER_KINDS}")
        self.history = History()
        self._start_rng = random.Random(config.seed * 6151 + 29)
        acks = ACKS_ALL if config.acks == "all" else ACKS_LEADER
        values = [1]
        probes = 1 if config.probe_interval_ms > 0 else 0
        concurrency = PRODUCERS + 1 + probes
        timeout_ms = config.timing.request_timeout_ms

        def rng(node_id: int) -> random.Random:
            return random.Random(config.seed * 1009 + node_id)

        settings = ProducerSettings() if config.producer_timeouts_ms is None else \
            ProducerSettings(*config.producer_timeouts_ms)  # fmt: skip
        self.producers: list[Client] = [
            KafkaProducer(CLIENT_BASE + i, cluster, self.history, i, concurrency, acks,
                          WRITE_INTERVAL_MS, values, rng(CLIENT_BASE + i), settings)
            if config.producer == "kafka" else
            Producer(CLIENT_BASE + i, cluster, self.history, i, concurrency, acks,
                     WRITE_INTERVAL_MS, timeout_ms, values, rng(CLIENT_BASE + i))
            for i in range(PRODUCERS)
        ]
        self.consumer = Consumer(CLIENT_BASE + PRODUCERS, cluster, self.history, PRODUCERS,
                                 concurrency, POLL_INTERVAL_MS, timeout_ms,
                                 rng(CLIENT_BASE + PRODUCERS))
        probe_id = CLIENT_BASE + PRODUCERS + 1
        self.probes: list[Client] = [
            KafkaProducer(probe_id, cluster, self.history, PRODUCERS + 1, concurrency, acks,
                          config.probe_interval_ms, values, rng(probe_id), settings, probe=True)
        ] if probes else []
        self.nemesis = Nemesis(cluster.world, random.Random(config.seed * 104729 + 17))
        self.stopped = False

    def _jitter(self, below_ms: int) -> int:
        return self._start_rng.randrange(below_ms) if below_ms > 0 else 0

    def _run_until(self, end_ms: int) -> None:
        """Run the cluster; a metadata-quorum safety failure (Raft safety, image invariants on a
        voter) or a core's broken invariant (a raft partition's included) stops the simulation
        and is counted as the replicas' `quorum-safety` violation, so the matrix reports it as a
        broken invariant."""
        if self.stopped:
            return
        try:
            self.cluster.run_until(end_ms)
        except (SafetyViolation, InvariantViolation, ReplicaInvariantViolation) as exc:
            self.stopped = True
            self.cluster.replicas.violation("quorum-safety", str(exc))

    def _create_topic(self) -> None:
        if self.cluster.topic_id:
            return
        self.cluster.create_topic(topic_request(self.config))
        queue = self.cluster.world.queue
        queue.call_at(queue.now_ms + TOPIC_RETRY_MS, self._create_topic)

    def run(self) -> ScenarioResult:
        started = time.monotonic()
        cluster, config = self.cluster, self.config
        queue = cluster.world.queue
        for b in sorted(cluster.brokers):
            queue.call_at(self._jitter(config.start_jitter_ms), cluster.world.restart, b)
        queue.call_at(TOPIC_CREATE_MS, self._create_topic)
        for i, p in enumerate(self.producers):
            offset = (self._jitter(WRITE_INTERVAL_MS) if config.start_jitter_ms
                      else i * (WRITE_INTERVAL_MS // PRODUCERS))
            cluster.add_client(p, WORKLOAD_START_MS + offset)
        cluster.add_client(self.consumer, WORKLOAD_START_MS + 7)
        for probe in self.probes:  # drawn after the producers': their start times are unchanged
            cluster.add_client(probe, PROBE_START_MS + self._jitter(config.probe_interval_ms))
        self.nemesis.schedule(config.nemesis, FAULT_START_MS, config.fault_duration_ms)
        fault_start = FAULT_START_MS
        has_fault = config.nemesis != "none"
        heal = (fault_start + config.fault_duration_ms
                + (SHAPES[config.nemesis].after_end_ms if has_fault else 0))
        workload_end = heal + AFTER_HEAL_MS
        self._run_until(workload_end - 1)  # no operation is invoked at workload_end
        for client in (*self.producers, self.consumer, *self.probes):
            client.stopped = True
        self._run_until(workload_end + SETTLE_MS)
        drained = cluster.final_drain(self.history, DRAIN_PROCESS)
        divergent = cluster.divergence()
        queue_result = check_queue(pair_operations(self.history.events))
        c = cluster.replicas.counters
        return ScenarioResult(
            config=config, history=self.history, queue=queue_result,
            violations=dict(c.violations), violation_examples=list(c.examples),
            leader_elections=c.leader_elections, unclean_elections=c.unclean_elections,
            isr_shrinks=c.isr_shrinks, isr_expands=c.isr_expands,
            timeline=list(self.nemesis.timeline),
            fault_start_ms=fault_start if has_fault else None,
            fault_end_ms=fault_start + config.fault_duration_ms if has_fault else None,
            heal_ms=max(self.nemesis.heal_ms or heal, fault_start + config.fault_duration_ms)
            if has_fault else None,
            workload_end_ms=workload_end, sim_ms=queue.now_ms, events=queue.events,
            wall_ms=int((time.monotonic() - started) * 1000), drained=drained,
            divergent_offsets=divergent, hw_marks=tuple(self.cluster.replicas.hw_marks),
            first_leader_ms=self.cluster.replicas.first_leader_ms,
        )


def run_scenario(config: ScenarioConfig) -> ScenarioResult:
    return ScenarioRun(config).run()
