"""`kraftlab sim cluster --plane metadata`: one deterministic run of controllers and brokers
(metadata only). It is the quorum run (harness.sim.runs.simulation: the same World, seeded network,
nemesis, kv client, Raft safety checker and two phases) with a `MetadataPlane` added:
- the voters are controllers: RaftNodes hosting the ActiveController part
  (harness.sim.actors.controller); the observers are brokers: RaftNodes hosting the
  BrokerLifecycle part (harness.sim.actors.broker), which registers and heartbeats;
- an admin client creates and deletes topics and asks for preferred and unclean elections;
- the metadata invariants (harness.sim.checks.invariants: PartitionLeaderInIsr,
  MonotonicPartitionEpochs, SingleLeaderPerEpoch) are checked on a node's image every time it
  applied something, and the liveness phase also needs BrokerImageConvergence: once quiet, every
  broker's and controller's image equals the active controller's (same applied offset, same
  state), and every broker is registered and unfenced.

Determinism: the broker timing and the admin client draw from their own generators (seeded from
the seed, salted), so the quorum run's draws are the same with or without the plane.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.drive.broker_session import BrokerTiming
from harness.sim.actors.broker import BrokerLifecycle
from harness.sim.actors.controller import ActiveController
from harness.sim.actors.raft_node import RaftNode
from harness.sim.checks.invariants import PartitionImageChecker, SafetyChecker
from harness.sim.runs.simulation import SimConfig, SimResult, Simulation
from quorum.controller import (
    ControllerConfig,
    CreateTopicRequest,
    DeleteTopicRequest,
    ElectLeadersRequest,
)
from quorum.metadata.image import MetadataImage
from quorum.raft.config import RaftConfig

ADMIN_INTERVAL_MS = (50, 300)
TIMING_SALT = 0x4B524146  # a stream of its own: the quorum run's draws are unchanged
FAST_HEARTBEAT_MS = 20  # a fenced broker heartbeats this often (Kafka's initial catch-up)
DUPLICATE_BACKOFF_MS = 50
RETRY_BACKOFF_MS = 20


@dataclass(frozen=True, slots=True)
class AdminStep:
    """The admin client's next operation (topic create/delete, leader election)."""


@dataclass(frozen=True, slots=True)
class ClusterTiming:
    """Broker lifecycle timing of one run (drawn from the seed, scaled to simulated seconds)."""

    heartbeat_interval_ms: int
    session_timeout_ms: int
    request_timeout_ms: int

    def controller_config(self) -> ControllerConfig:
        return ControllerConfig(
            broker_heartbeat_interval_ms=self.heartbeat_interval_ms,
            broker_session_timeout_ms=self.session_timeout_ms,
            leader_imbalance_check_interval_ms=10 * self.session_timeout_ms,
        )

    def broker_timing(self) -> BrokerTiming:
        return BrokerTiming(
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            request_timeout_ms=self.request_timeout_ms,
            fast_heartbeat_ms=FAST_HEARTBEAT_MS,
            retry_backoff_ms=RETRY_BACKOFF_MS,
            duplicate_backoff_ms=DUPLICATE_BACKOFF_MS,
        )


def draw_timing(seed: int) -> ClusterTiming:
    rng = random.Random(seed ^ TIMING_SALT)
    heartbeat_ms = rng.choice((50, 100, 200))
    # Kafka's ratio is 4.5 (2 s / 9 s). Much less, and the controller's serialized queue (every
    # fence/unfence is a commit, heartbeats wait behind it) expires sessions faster than
    # heartbeats are answered: fenced/unfenced flapping that never settles (seed 1007, 5 brokers,
    # session = 3 x 50 ms).
    return ClusterTiming(
        heartbeat_interval_ms=heartbeat_ms,
        session_timeout_ms=heartbeat_ms * rng.choice((5, 8)),
        request_timeout_ms=rng.choice((300, 600)),
    )


class MetadataPlane:
    """Controllers, brokers, an admin client and the metadata checks, added to a Simulation."""

    def __init__(self, seed: int, node_class: type[RaftNode] = RaftNode) -> None:
        self.timing = draw_timing(seed)
        self.node_class = node_class
        self.admin_rng = random.Random(seed ^ (TIMING_SALT << 1))
        self.admin_ops = 0
        self.topics_created = 0
        self.controllers: dict[int, ActiveController] = {}
        self.sim: Simulation | None = None
        self.image_checker: PartitionImageChecker | None = None

    def build_node(
        self, n: int, voter_ids: Sequence[int], raft_config: RaftConfig, checker: SafetyChecker
    ) -> RaftNode:
        """A controller (voter + ActiveController) or a broker (observer + BrokerLifecycle)."""
        node = self.node_class(n, voter_ids, raft_config, checker)
        if n in voter_ids:
            self.controllers[n] = ActiveController(node, self.timing.controller_config())
            node.attach(self.controllers[n])
        else:
            node.attach(BrokerLifecycle(node, self.timing.broker_timing()))
        return node

    # -- the Plane ---------------------------------------------------------------------------------

    def bind(self, sim: Simulation) -> None:
        self.sim = sim
        self.image_checker = PartitionImageChecker(sim.checker)

    def start(self) -> None:
        self._schedule_admin()

    def dispatch(self, at_ms: int, event: Any) -> bool:
        if not isinstance(event, AdminStep):
            return False
        sim = self._sim()
        if sim.phase == "safety":
            self._admin_step(at_ms)
            self._schedule_admin()
        return True

    def after(self, node: Any) -> None:
        if node.up and node.core is not None:
            self.check_image(node)

    def check_image(self, node: Any) -> None:
        assert self.image_checker is not None
        self.image_checker.check(node)

    def liveness_missing(self) -> str | None:
        sim = self._sim()
        leader_id = sim.active_controller()
        assert leader_id is not None
        service = self.controllers[leader_id].service
        if service is None or service.busy:
            return "the active controller is not idle"
        target: MetadataImage = sim.nodes[leader_id].image
        brokers = {b.broker_id: b for b in target.brokers()}
        for n in sim.observer_ids:
            b = brokers.get(n)
            if b is None or b.fenced:
                return f"broker {n} not registered and unfenced"
        for n in sim.node_ids:
            image = sim.nodes[n].image
            if image.applied_offset != target.applied_offset:
                return (
                    f"node {n} applied {image.applied_offset}, controller {target.applied_offset}"
                )
            if image != target:
                sim.checker.fail(
                    "BrokerImageConvergence",
                    n,
                    f"image at offset {image.applied_offset} differs from the "
                    f"active controller {leader_id}'s",
                )
        return None

    def stats(self) -> dict[str, Any]:
        assert self.image_checker is not None
        return {
            "admin_ops": self.admin_ops,
            "topics_created": self.topics_created,
            "partition_epochs_seen": len(self.image_checker.leader_of),
            "timing": {
                "heartbeat_interval_ms": self.timing.heartbeat_interval_ms,
                "session_timeout_ms": self.timing.session_timeout_ms,
            },
        }

    # -- the admin client --------------------------------------------------------------------------

    def _sim(self) -> Simulation:
        assert self.sim is not None, "the plane is not bound to a simulation"
        return self.sim

    def _schedule_admin(self) -> None:
        queue = self._sim().queue
        queue.schedule(queue.now_ms + self.admin_rng.randint(*ADMIN_INTERVAL_MS), AdminStep())  # type: ignore[arg-type]

    def _admin_step(self, at_ms: int) -> None:
        sim = self._sim()
        leader_id = sim.active_controller()
        if leader_id is None:
            return
        node = sim.nodes[leader_id]
        controller = self.controllers[leader_id]
        if node.paused or controller.service is None:
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
        sim.note(f"admin {request!r}")
        controller.admin_request(("admin", self.admin_ops), request, at_ms)
        sim.world.after(node)


def metadata_simulation(config: SimConfig, node_class: type[RaftNode] = RaftNode) -> Simulation:
    """The metadata run of `config` (`node_class`: the real RaftNode, or a planted one)."""
    plane = MetadataPlane(config.seed, node_class)
    return Simulation(config, plane.build_node, plane)


def run_cluster_seed(config: SimConfig) -> SimResult:
    return metadata_simulation(config).run()


def cluster_config(seed: int, brokers: int = 3, duration_ms: int = 3000) -> SimConfig:
    return replace(SimConfig(seed=seed), observers=brokers, duration_ms=duration_ms)
