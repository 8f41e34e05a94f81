"""One deterministic data-plane run: brokers hosting ReplicaCores, the active controller,
producers and a consumer, one nemesis shape; then the checkers. `run_data(config)` is a pure
function of its config (the seed included): same config, same history, same summary row.

Phases (simulated ms): brokers register and the topic (1 partition, RF `replication_factor`) is
created; the workload starts at WORKLOAD_START_MS; the fault starts at FAULT_START_MS and is
healed `fault_duration_ms` later (nemesis shapes: harness/sim/faults/shapes.py); the workload runs
AFTER_HEAL_MS more, then stops; after SETTLE_MS of quiet the final drain reads the leader's log.

Checked after every event (harness/sim/actors/data_world.py): a leader's HW never exceeds the minimum ISR
LEO it knows (the majority LEO in quorum mode); no replica holds, below its HW, a record that
differs from the one first seen committed at that offset (committed-prefix agreement, which
`leader.epoch.enable=true` must guarantee unless an unclean election or a lost disk tail hands
leadership to a shorter log: an invariant only until such a loss, counted after it, and never
the matrix's divergence column); leader epochs a broker sees never go back; on the Raft quorum
(`metadata="raft"`), Raft safety and the voters' image invariants (`quorum-safety`). After the run: Jepsen's queue checker (harness/check/queue.py) over
the send/poll history with the final drain: lost-write, duplicate, inconsistent-offsets, ...;
and the replicas' end state (`replica_divergence`: records that differ below two replicas' HWs,
the KIP-101 divergence the summary row reports as divergent_offsets).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from harness.check.history import pair_operations
from harness.check.queue import QueueResult, check_queue
from harness.sim.actors.data_quorum import RaftControllerNode, raft_controller_factory
from harness.sim.actors.data_workload import Consumer, History, Producer, decode_values, final_drain
from harness.sim.actors.data_world import CLIENT_BASE, World, WorldTiming
from harness.sim.checks.invariants import SafetyViolation
from harness.sim.faults.fault import Span
from harness.sim.faults.nemesis import Nemesis
from harness.sim.faults.shapes import SCENARIO_NEMESES, SHAPES
from partition.replica import ACKS_ALL, ACKS_LEADER, ReplicaConfig
from quorum.controller import ControllerConfig, CreateTopicRequest
from quorum.raft.errors import InvariantViolation

TOPIC_CREATE_MS = 300
WORKLOAD_START_MS = 1000
FAULT_START_MS = 3000
AFTER_HEAL_MS = 3000
SETTLE_MS = 2500
PRODUCERS = 3
WRITE_INTERVAL_MS = 60  # per producer: ~50 writes/s in all
POLL_INTERVAL_MS = 100
METADATA_KINDS = ("abstract", "raft")
METADATA_VOTERS = 3
QUORUM_WAIT_POLL_MS = 20  # brokers wait for an active controller, as Kafka brokers do


@dataclass(frozen=True, slots=True)
class DataRunConfig:
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
    # data_world.COMMIT_DELAY_MS) or "raft" (METADATA_VOTERS simulated Raft voters,
    # harness/sim/actors/data_quorum.py, on which the controller nemeses act). The matrix uses "raft".
    metadata: str = "abstract"
    timing: WorldTiming = field(default_factory=WorldTiming)

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
                + f"-s{self.seed}")


@dataclass
class DataRunResult:
    config: DataRunConfig
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

    @property
    def lost_writes(self) -> int:
        return self.queue.counts.get("lost-write", 0)

    def anomalies(self) -> dict[str, int]:
        return {k: v for k, v in self.queue.counts.items() if v}


def build_world(config: DataRunConfig) -> World:
    replica_config = ReplicaConfig(
        replica_lag_time_max_ms=config.timing.replica_lag_time_max_ms,
        min_insync_replicas=config.min_insync_replicas,
        replication_mode=config.replication_mode,
        leader_epoch_enable=config.leader_epoch_enable,
        replica_fetch_wait_max_ms=config.timing.replica_fetch_wait_max_ms,
        replica_fetch_backoff_ms=100,
        replica_socket_timeout_ms=config.timing.request_timeout_ms,
        alter_partition_timeout_ms=config.timing.request_timeout_ms,
    )
    controller_config = ControllerConfig(
        broker_heartbeat_interval_ms=config.timing.heartbeat_interval_ms,
        broker_session_timeout_ms=config.timing.session_timeout_ms,
        eligible_leader_replicas_enable=config.eligible_leader_replicas,
        auto_leader_rebalance_enable=False,
    )
    if config.metadata not in METADATA_KINDS:
        raise ValueError(f"metadata={config.metadata!r}, expected one of {METADATA_KINDS}")
    factory = raft_controller_factory(METADATA_VOTERS) if config.metadata == "raft" else None
    return World(config.seed, config.brokers, replica_config, controller_config, config.timing,
                 controller_factory=factory)


def topic_request(config: DataRunConfig) -> CreateTopicRequest:
    return CreateTopicRequest("t", 1, config.replication_factor, (
        ("min.insync.replicas", str(config.min_insync_replicas)),
        ("unclean.leader.election.enable", str(config.unclean_leader_election).lower()),
        ("replication.mode", config.replication_mode),
    ))


class DataSimulation:
    def __init__(self, config: DataRunConfig) -> None:
        self.config = config
        self.world = world = build_world(config)
        self.history = History()
        world.controller.on_partition_change = self._on_change
        acks = ACKS_ALL if config.acks == "all" else ACKS_LEADER
        values = [1]
        concurrency = PRODUCERS + 1
        self.producers = [Producer(world, CLIENT_BASE + i, self.history, i, concurrency, acks,
                                   WRITE_INTERVAL_MS, values) for i in range(PRODUCERS)]
        self.consumer = Consumer(world, CLIENT_BASE + PRODUCERS, self.history, PRODUCERS,
                                 concurrency, POLL_INTERVAL_MS)
        if config.nemesis not in SCENARIO_NEMESES:
            raise ValueError(
                f"unknown nemesis {config.nemesis!r}; known: {', '.join(SCENARIO_NEMESES)}"
            )
        self.nemesis = Nemesis(world, random.Random(config.seed * 104729 + 17))
        self._start_rng = random.Random(config.seed * 6151 + 29)
        self.stopped = False

    def _jitter(self, below_ms: int) -> int:
        return self._start_rng.randrange(below_ms) if below_ms > 0 else 0

    def _on_change(self, old: Any, new: Any) -> None:
        if old is None and not self.world.topic_id:
            self.world.topic_id = new.topic_id
        self.world._count_change(old, new)

    def _start_broker(self, b: int) -> None:
        """Start broker `b`; on a Raft quorum, not before a controller is active (a Kafka broker
        waits for the quorum; its registration would otherwise be lost and retried only after
        request_timeout_ms)."""
        w = self.world
        ctl = w.controller
        if isinstance(ctl, RaftControllerNode) and ctl.active_controller() is None:
            w.queue.call_at(w.queue.now_ms + QUORUM_WAIT_POLL_MS, self._start_broker, b)
            return
        w.brokers[b].start()

    def _run_until(self, end_ms: int) -> None:
        """Run the world; a metadata-quorum safety failure (Raft safety, image invariants on a
        voter; harness/sim/checks/invariants.py) stops the simulation and is counted as the world's
        `quorum-safety` violation, so the matrix reports it as a broken invariant."""
        if self.stopped:
            return
        try:
            self.world.run_until(end_ms)
        except (SafetyViolation, InvariantViolation) as exc:
            self.stopped = True
            self.world.violation("quorum-safety", str(exc))

    def _create_topic(self) -> None:
        if self.world.topic_id:
            return
        self.world.controller.submit((-1, 0), topic_request(self.config))
        self.world.queue.call_at(self.world.queue.now_ms + 500, self._create_topic)

    def run(self) -> DataRunResult:
        started = time.monotonic()
        w = self.world
        for b in sorted(w.brokers):
            w.queue.call_at(self._jitter(self.config.start_jitter_ms), self._start_broker, b)
        w.controller.pump()
        w.queue.call_at(TOPIC_CREATE_MS, self._create_topic)
        for i, p in enumerate(self.producers):
            offset = (self._jitter(WRITE_INTERVAL_MS) if self.config.start_jitter_ms
                      else i * (WRITE_INTERVAL_MS // PRODUCERS))
            p.start(WORKLOAD_START_MS + offset)
        self.consumer.start(WORKLOAD_START_MS + 7)
        self.nemesis.schedule(self.config.nemesis, FAULT_START_MS, self.config.fault_duration_ms)
        fault_start = FAULT_START_MS
        has_fault = self.config.nemesis != "none"
        heal = (fault_start + self.config.fault_duration_ms
                + (SHAPES[self.config.nemesis].after_end_ms if has_fault else 0))
        workload_end = heal + AFTER_HEAL_MS
        self._run_until(workload_end - 1)  # no operation is invoked at workload_end
        for client in (*self.producers, self.consumer):
            client.stopped = True
        self._run_until(workload_end + SETTLE_MS)
        drained = final_drain(w, self.history, 2 * (PRODUCERS + 1) * 1000)
        divergent = replica_divergence(w)
        ops = pair_operations(self.history.events)
        queue = check_queue(ops)
        c = w.counters
        return DataRunResult(
            config=self.config, history=self.history, queue=queue,
            violations=dict(c.violations), violation_examples=list(c.examples),
            leader_elections=c.leader_elections, unclean_elections=c.unclean_elections,
            isr_shrinks=c.isr_shrinks, isr_expands=c.isr_expands,
            timeline=list(self.nemesis.timeline),
            fault_start_ms=fault_start if has_fault else None,
            fault_end_ms=fault_start + self.config.fault_duration_ms if has_fault else None,
            heal_ms=max(self.nemesis.heal_ms or heal, fault_start + self.config.fault_duration_ms)
            if has_fault else None,
            workload_end_ms=workload_end, sim_ms=w.queue.now_ms, events=w.queue.events,
            wall_ms=int((time.monotonic() - started) * 1000), drained=drained,
            divergent_offsets=divergent,
        )


def _committed_bytes(world: World) -> list[tuple[int, bytes]]:
    """(HW, the raw batches below it) of every broker that is up (a broker's HW is what it
    believes committed: min(leader HW, own LEO) on a follower)."""
    out: list[tuple[int, bytes]] = []
    for _, broker in sorted(world.brokers.items()):
        log = broker.log
        if not broker.up or log is None:
            continue
        hw = broker.core.high_watermark if broker.core is not None else log.high_watermark
        out.append((hw, log.read(log.log_start_offset, 1 << 26, max_offset=hw)
                    if hw > log.log_start_offset else b""))
    return out


def replica_divergence(world: World) -> int:
    """Offsets at which two live replicas hold different records below their own HWs at the end
    of the run: the KIP-101 divergence (reference section 2, items 1-2), which epoch-based
    truncation must rule out whatever was lost. An acknowledged write that was lost and whose
    offset was reused by a later write is loss, not divergence: every replica then agrees on
    the new record (the client-side `inconsistent-offsets` count mixes the two).

    Followers append the leader's batches byte for byte, so replicas that agree hold byte
    prefixes of one another; only when they do not are the records decoded and compared."""
    logs = sorted(_committed_bytes(world), key=lambda hw_data: len(hw_data[1]))
    if not logs or all(logs[-1][1].startswith(data) for _, data in logs):
        return 0
    seen: dict[int, int] = {}
    divergent: set[int] = set()
    for hw, data in logs:
        for offset, value in decode_values(data):
            if offset < hw and seen.setdefault(offset, value) != value:
                divergent.add(offset)
    return len(divergent)


def run_data(config: DataRunConfig) -> DataRunResult:
    return DataSimulation(config).run()
