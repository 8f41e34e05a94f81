"""`kraftlab sim cluster`: one deterministic run of controllers and brokers (metadata only).

Built on S's quorum simulation (harness/sim/runs/simulation.py), by subclassing, not copying: the same
seeded network, nemesis (partitions, crashes that lose unsynced writes, graceful shutdowns,
restarts, pauses: of controllers AND brokers, which are the run's observers), kv client, Raft
safety checker and two phases (safety with faults, then liveness). Nodes are ClusterSimNodes
(harness/sim/actors/cluster_node.py): voters run the active controller, observers are brokers that
register and heartbeat. An admin client creates and deletes topics and asks for preferred and
unclean elections.

Invariants, checked on a node's image every time it applied something (issue 4):
- PartitionLeaderInIsr: a partition's leader is in its ISR (or -1), unless the election was
  unclean (leader_recovery_state RECOVERING, KIP-704);
- MonotonicPartitionEpochs: in one node incarnation, a partition's leader_epoch and
  partition_epoch never decrease;
- SingleLeaderPerEpoch: across all nodes and all time, one (partition, leader_epoch) names one
  leader;
- BrokerImageConvergence (liveness phase): once quiet, every broker's and controller's image
  equals the active controller's (same applied offset, same state), and every broker is
  registered and unfenced.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

from harness.sim.actors.cluster_node import ClusterSimNode, ClusterTiming
from harness.sim.checks.invariants import SafetyChecker
from harness.sim.runs.simulation import SimConfig, SimResult, Simulation
from quorum.controller import CreateTopicRequest, DeleteTopicRequest, ElectLeadersRequest
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import NO_LEADER, LeaderRecoveryState
from quorum.raft.config import RaftConfig

ADMIN_INTERVAL_MS = (50, 300)
TIMING_SALT = 0x4B524146  # a separate stream, so S's draws from the run's rng are unchanged


@dataclass(frozen=True, slots=True)
class AdminStep:
    """The admin client's next operation (topic create/delete, leader election)."""


def draw_timing(seed: int) -> ClusterTiming:
    rng = random.Random(seed ^ TIMING_SALT)
    heartbeat_ms = rng.choice((50, 100, 200))
    # Kafka's ratio is 4.5 (2 s / 9 s). Much less, and the controller's serialized queue (every
    # fence/unfence is a commit, heartbeats wait behind it) expires sessions faster than
    # heartbeats are answered: fenced/unfenced flapping that never settles (seed 1007, 5 brokers,
    # session = 3 x 50 ms; see the report).
    return ClusterTiming(
        heartbeat_interval_ms=heartbeat_ms,
        session_timeout_ms=heartbeat_ms * rng.choice((5, 8)),
        request_timeout_ms=rng.choice((300, 600)),
    )


class PartitionImageChecker:
    """The partition invariants above, checked on a node's image each time it applied something
    (shared by this simulation and the data plane's Raft quorum, harness/sim/actors/data_quorum.py).
    `node` needs `node_id`, `incarnation` and `image`; failures go to `checker.fail`."""

    def __init__(self, checker: SafetyChecker) -> None:
        self.checker = checker
        self.leader_of: dict[tuple[str, int, int], int] = {}
        self.seen: dict[tuple[int, int], dict[tuple[str, int], tuple[int, int]]] = {}
        self.checked_offset: dict[int, tuple[int, int]] = {}

    def check(self, node: Any) -> None:
        image = node.image
        key = (node.node_id, node.incarnation)
        if self.checked_offset.get(node.node_id) == (node.incarnation, image.applied_offset):
            return
        self.checked_offset[node.node_id] = (node.incarnation, image.applied_offset)
        seen = self.seen.setdefault(key, {})
        for topic, part in image.all_partitions():
            where = f"{topic.name}-{part.partition} at offset {image.applied_offset}"
            self.checker.count("cluster_partition_checks")
            if (
                part.leader != NO_LEADER
                and part.leader not in part.isr
                and part.leader_recovery_state != LeaderRecoveryState.RECOVERING
            ):
                self.checker.fail(
                    "PartitionLeaderInIsr",
                    node.node_id,
                    f"{where}: leader {part.leader} not in ISR {part.isr}",
                )
            tp = (topic.topic_id, part.partition)
            before = seen.get(tp)
            now = (part.leader_epoch, part.partition_epoch)
            if before is not None and (now[0] < before[0] or now[1] < before[1]):
                self.checker.fail(
                    "MonotonicPartitionEpochs",
                    node.node_id,
                    f"{where}: (leader_epoch, partition_epoch) {before} -> {now}",
                )
            seen[tp] = now
            epoch_key = (topic.topic_id, part.partition, part.leader_epoch)
            known = self.leader_of.setdefault(epoch_key, part.leader)
            if known != part.leader:
                self.checker.fail(
                    "SingleLeaderPerEpoch",
                    node.node_id,
                    f"{where}: leader_epoch {part.leader_epoch} led by {known} "
                    f"and by {part.leader}",
                )


class ClusterSimulation(Simulation):
    def __init__(
        self, config: SimConfig, node_class: type[ClusterSimNode] = ClusterSimNode
    ) -> None:
        timing = draw_timing(config.seed)
        self.timing = timing

        def factory(n: int, voters: Any, raft_config: RaftConfig, checker: Any) -> ClusterSimNode:
            return node_class(n, voters, raft_config, checker, timing)

        super().__init__(config, factory)
        self.admin_rng = random.Random(config.seed ^ (TIMING_SALT << 1))
        self.admin_ops = 0
        self.topics_created = 0
        self.image_checker = PartitionImageChecker(self.checker)

    # -- events ----------------------------------------------------------------------------------

    def run(self) -> SimResult:
        self.queue.schedule(self._admin_delay(), AdminStep())  # type: ignore[arg-type]
        return super().run()

    def _admin_delay(self) -> int:
        return self.queue.now_ms + self.admin_rng.randint(*ADMIN_INTERVAL_MS)

    def _dispatch(self, at_ms: int, event: Any) -> None:
        if isinstance(event, AdminStep):
            if self.phase == "safety":
                self._admin_step(at_ms)
                self.queue.schedule(self._admin_delay(), AdminStep())  # type: ignore[arg-type]
            return
        super()._dispatch(at_ms, event)

    def _admin_step(self, at_ms: int) -> None:
        leader_id = self.active_controller()
        if leader_id is None:
            return
        node = self.nodes[leader_id]
        assert isinstance(node, ClusterSimNode)
        if node.paused or node.service is None:
            return
        rng = self.admin_rng
        names = sorted(t.name for t in node.image.topics())
        roll = rng.random()
        request: Any
        if roll < 0.45 or not names:
            self.topics_created += 1
            configs = (("unclean.leader.election.enable", "true"),) if rng.random() < 0.3 else ()
            request = CreateTopicRequest(
                f"t{self.topics_created}", rng.randint(1, 3), rng.randint(1, 3), configs
            )
        elif roll < 0.85:
            request = ElectLeadersRequest(
                rng.choice(names), None, rng.choice(("preferred", "preferred", "unclean"))
            )
        else:
            request = DeleteTopicRequest(rng.choice(names))
        self.admin_ops += 1
        self._note(f"admin {request!r}")
        node.admin_request(("admin", self.admin_ops), request, at_ms)
        self._after(node)

    def _after(self, node: Any, timer_fired: bool = False) -> None:
        super()._after(node, timer_fired)
        if node.up and node.core is not None:
            self._check_image(node)

    # -- invariants ------------------------------------------------------------------------------

    def _check_image(self, node: ClusterSimNode) -> None:
        self.image_checker.check(node)

    def _liveness_missing(self, at_ms: int) -> str | None:
        missing = super()._liveness_missing(at_ms)
        if missing is not None:
            return missing
        leader_id = self.active_controller()
        assert leader_id is not None
        leader = self.nodes[leader_id]
        assert isinstance(leader, ClusterSimNode)
        if leader.service is None or leader.service.busy:
            return "the active controller is not idle"
        target: MetadataImage = leader.image
        brokers = {b.broker_id: b for b in target.brokers()}
        for n in self.observer_ids:
            b = brokers.get(n)
            if b is None or b.fenced:
                return f"broker {n} not registered and unfenced"
        for n in self.node_ids:
            image = self.nodes[n].image
            if image.applied_offset != target.applied_offset:
                return (
                    f"node {n} applied {image.applied_offset}, controller {target.applied_offset}"
                )
            if image != target:
                self.checker.fail(
                    "BrokerImageConvergence",
                    n,
                    f"image at offset {image.applied_offset} differs from the "
                    f"active controller {leader_id}'s",
                )
        return None

    def _stats(self) -> dict[str, Any]:
        stats = super()._stats()
        stats["admin_ops"] = self.admin_ops
        stats["topics_created"] = self.topics_created
        stats["partition_epochs_seen"] = len(self.image_checker.leader_of)
        stats["timing"] = {
            "heartbeat_interval_ms": self.timing.heartbeat_interval_ms,
            "session_timeout_ms": self.timing.session_timeout_ms,
        }
        return stats


def run_cluster_seed(config: SimConfig) -> SimResult:
    return ClusterSimulation(config).run()


def cluster_config(seed: int, brokers: int = 3, duration_ms: int = 3000) -> SimConfig:
    return replace(SimConfig(seed=seed), observers=brokers, duration_ms=duration_ms)
