"""A Raft-backed metadata quorum for the data-plane simulation (harness/sim/actors/data_world.py).

`RaftControllerNode` has the small interface of data_world.ControllerNode (submit, pump,
go_down, come_up, metadata_push, image, up, on_partition_change) but is backed by N
simulated controller voters: RaftNodes (harness/sim/actors/raft_node.py: the real Raft core on a
RaftLogStore over SimStorage, the election-state file) hosting the ActiveController part
(harness/sim/actors/controller.py: the ControllerService on the Raft leader once its image has
applied the epoch's LeaderChange) and the DataRequests part below. A leader change fails the old service (every waiting caller answered
NOT_CONTROLLER) and the new leader starts a fresh ControllerService over its committed image,
with fresh broker sessions, as Kafka does. Select it with
`World(..., controller_factory=raft_controller_factory())`.

Model (what is simulated, what is abstracted):
- Voters have ids VOTER_BASE+1..VOTER_BASE+N. Their Raft traffic and their traffic with brokers
  travel on the world's network: a message crosses only if `world.network.can_reach` holds at
  send AND at delivery, so the world's link cuts act on voters too. A message to a crashed voter
  is refused (the sender's core hears `peer_unreachable`); a paused voter holds its inbox.
- Brokers address CONTROLLER_ID (0) as "the controller": the world delivers that to this front
  door, which forwards the request to the voter the broker believes leads (learnt, like a KRaft
  observer, from the highest-epoch leader any voter it can reach names). If no such voter is
  reachable the request is lost and the broker's own timeout retries it.
- Brokers are not Raft observers here: the leader voter pushes its committed image's view of the
  partition (MetadataPush) to every broker it can reach each time its image advances, and answers
  every heartbeat with it (the observer fetch path). A broker cut from the leader keeps its stale
  view, as in KRaft.
- Controller voters are crashed with power-loss semantics (SimStorage.crash; the Raft log is
  fsynced on append, so the quorum loses nothing acknowledged); no metadata snapshots are taken.
- `go_down` (data_nemesis' controller shapes) crashes a majority of the voters, active controller
  first: the metadata quorum is unavailable until `come_up` restarts them.

Checked after every voter event (failures raise SafetyViolation, which stops the run):
Raft safety (harness/sim/checks/invariants.SafetyChecker: election safety, log matching, committed
entries, durability, ...) and the cluster simulator's image invariants on every voter's image
(PartitionLeaderInIsr, MonotonicPartitionEpochs, SingleLeaderPerEpoch;
harness/sim/checks/metadata.PartitionImageChecker).

Determinism: one `random.Random` seeded from the world's seed draws the Raft timing, the core
seeds, message delays and crash losses, in event order; the world's event queue orders events.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.sim.actors.controller import ActiveController
from harness.sim.actors.data_world import CtlResponse, MetadataPush, World
from harness.sim.actors.raft_node import RaftNode
from harness.sim.checks.invariants import SafetyChecker, read_range
from harness.sim.checks.metadata import PartitionImageChecker
from partition.log import LogConfig
from quorum.controller import BrokerHeartbeatRequest, ControllerConfig
from quorum.metadata.image import ApplyResult, MetadataImage
from quorum.metadata.records import Partition
from quorum.raft.config import RaftConfig
from quorum.raft.log import Entry

VOTER_BASE = 900
LINK_DELAY_MS = (1, 3)  # the quiet profile's delays (harness.sim.kernel.network.QUIET)
REFUSED_DELAY_MS = 1
INDEXED_LOG = LogConfig(index_interval_bytes=0)


def draw_quorum_raft_config(rng: random.Random) -> RaftConfig:
    """Raft timing scaled like the data world's (broker session 1000 ms): a controller failover
    takes a few hundred simulated ms. Snapshots are never taken (no take_snapshot calls)."""
    election_timeout_ms = rng.choice((100, 150, 250))
    return RaftConfig(
        election_timeout_ms=election_timeout_ms,
        election_backoff_max_ms=election_timeout_ms,
        fetch_timeout_ms=election_timeout_ms * rng.choice((2, 3)),
        request_timeout_ms=election_timeout_ms,
        retry_backoff_ms=20,
        fetch_max_wait_ms=rng.choice((50, 100)),
        max_idle_interval_ms=200,
        append_linger_ms=0,
        pre_vote=True,
        fast_pre_vote_on_unreachable=True,
        flush_on_append=True,
    )


@dataclass(frozen=True, slots=True)
class DataCtlRequest:
    """A broker's controller request as it travels to one voter."""

    origin: int
    request_id: int
    request: Any


class DataRequests:
    """A voter's part (harness.sim.actors.raft_node.NodePart) that takes the data world's broker
    requests (DataCtlRequest) to its active controller, answers them as CtlResponses and pushes
    the partition's metadata with every heartbeat answer."""

    def __init__(
        self,
        node: RaftNode,
        controller: ActiveController,
        partition_update: Callable[[MetadataImage], Any],
    ) -> None:
        self.node = node
        self.controller = controller
        self.partition_update = partition_update

    def reset(self) -> None:
        pass

    def accepts(self, message: Any) -> bool:
        return isinstance(message, DataCtlRequest)

    def handle(self, src: int, message: Any, now_ms: int) -> None:
        token = ("data", message.origin, message.request_id)
        node, controller = self.node, self.controller
        if controller.service is not None:
            controller.service.submit(token, message.request, now_ms)  # receipt time (KAFKA-15019)
        elif node.core.is_leader:
            controller.early.append((token, message.request))
        # A voter that does not lead drops it: the broker's own timeout retries.
        if (
            node.core.is_leader
            and message.origin >= 0
            and isinstance(message.request, BrokerHeartbeatRequest)
        ):
            node.send(message.origin, self.push())  # the heartbeat answer carries metadata

    def on_applied(self, entry: Entry, result: ApplyResult | None) -> None:
        pass

    def step(self, now_ms: int) -> None:
        pass

    def next_deadline_ms(self) -> int | None:
        return None

    def push(self) -> MetadataPush:
        return MetadataPush(self.node.image.applied_offset, self.partition_update(self.node.image))

    def respond(self, token: Any, response: Any) -> bool:
        """The ActiveController's responder for "data" tokens."""
        if not (isinstance(token, tuple) and token and token[0] == "data"):
            return False
        _, origin, request_id = token
        if origin >= 0:
            self.node.send(origin, CtlResponse(request_id, response))
        return True


class RaftControllerNode:
    """The data world's controller, backed by a simulated Raft quorum of `voters` voters.
    `node_class` is the real RaftNode (tests plant bugs by replacing it)."""

    node_class: type[RaftNode] = RaftNode

    def __init__(
        self,
        world: World,
        config: ControllerConfig,
        voters: int = 3,
        raft_config: RaftConfig | None = None,
    ) -> None:
        self.world = world
        self.config = config
        self.rng = random.Random(world.seed * 6007 + 3)
        self.raft_config = raft_config or draw_quorum_raft_config(self.rng)
        self.voter_ids = tuple(VOTER_BASE + i for i in range(1, voters + 1))
        self.checker = SafetyChecker()
        self.image_checker = PartitionImageChecker(self.checker)
        self.voters: dict[int, RaftNode] = {}
        self.controllers: dict[int, ActiveController] = {}
        self.requests: dict[int, DataRequests] = {}
        for v in self.voter_ids:
            # Every batch indexed: the entries are ~100-byte batches, and the per-commit reads
            # (applying, the SafetyChecker, the truth) would otherwise walk up to
            # index.interval.bytes (4 KiB) of headers each; that walk was ~14% of a matrix run.
            node = self.node_class(
                v, self.voter_ids, self.raft_config, self.checker, log_config=INDEXED_LOG
            )
            controller = ActiveController(node, config)
            requests = DataRequests(node, controller, world.partition_update)
            controller.responder = requests.respond
            node.attach(controller)
            node.attach(requests)
            self.voters[v], self.controllers[v], self.requests[v] = node, controller, requests
        self.truth = MetadataImage()  # the committed log as far as any voter applied it
        self.on_partition_change: Callable[[Partition | None, Partition], None] | None = None
        self.up = True  # the front door; each voter has its own state
        self.believed: dict[int, int] = {}  # broker -> the voter it sends to
        self.pushed: dict[int, int] = {}
        self.downed: list[int] = []
        self.stats = {
            "requests_routed": 0,
            "requests_lost": 0,
            "voter_crashes": 0,
            "voter_pauses": 0,
            "controller_epochs": 0,
        }
        for v in self.voter_ids:
            world.queue.call_at(0, self.start_voter, v)

    # -- the ControllerNode interface ------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.truth

    def submit(self, token: Any, request: Any) -> None:
        assert isinstance(token, tuple)
        src, request_id = token
        if src < 0:
            # The admin client (topic creation) reaches the active controller directly.
            target = self.active_controller()
            if target is not None:
                self._deliver(src, target, DataCtlRequest(src, request_id, request))
            return
        target = self._route(src)
        if target is None:
            self.stats["requests_lost"] += 1
            return
        self.stats["requests_routed"] += 1
        self._ship(src, target, DataCtlRequest(src, request_id, request))

    def pump(self) -> None:
        """Voters run on their own timers; nothing to do."""

    def metadata_push(self) -> MetadataPush:
        """World answers every heartbeat with this at once; here the leader voter that handled
        the heartbeat sends the real push, so this one is a no-op (offset -1 is never newer)."""
        return MetadataPush(-1, None)

    def go_down(self) -> list[int]:
        """The metadata quorum becomes unavailable: a majority of voters crash (the active
        controller first); the voters crashed."""
        active = self.active_controller()
        order = ([active] if active is not None else []) + [
            v for v in self.voter_ids if v != active
        ]
        need = len(self.voter_ids) // 2 + 1
        self.downed = [v for v in order if self.voters[v].up][:need]
        for v in self.downed:
            self.crash_voter(v)
        return list(self.downed)

    def come_up(self) -> None:
        downed, self.downed = self.downed, []
        for v in downed:
            if not self.voters[v].up:
                self.start_voter(v)

    # -- voter lifecycle (the nemesis acts through these) ----------------------------------------

    def active_controller(self) -> int | None:
        """The live voter leading the highest epoch (None: no leader)."""
        best: tuple[int, int] | None = None
        for v in self.voter_ids:
            node = self.voters[v]
            if node.up and node.is_leader and (best is None or node.epoch > best[0]):
                best = (node.epoch, v)
        return None if best is None else best[1]

    def start_voter(self, v: int) -> None:
        node = self.voters[v]
        if node.up:
            return
        node.buffered = []
        node.start(self.world.queue.now_ms, self.rng.getrandbits(32))
        self.pushed[v] = -1
        self._after(node)

    def crash_voter(self, v: int) -> None:
        node = self.voters[v]
        if not node.up:
            return
        self.stats["voter_crashes"] += 1
        node.buffered = []
        node.crash(random.Random(self.rng.getrandbits(32)))
        self.checker.on_crash(v)

    def pause_voter(self, v: int) -> None:
        node = self.voters[v]
        if node.up and not node.paused:
            self.stats["voter_pauses"] += 1
            node.pause()

    def resume_voter(self, v: int) -> None:
        node = self.voters[v]
        if not node.up or not node.paused:
            return
        node.paused = False
        node.armed_deadline_ms = None
        now = self.world.queue.now_ms
        held, node.buffered = node.buffered, []
        for src, message in held:
            node.handle(src, message, now)
            self._after(node)
        node.tick(now)
        self._after(node)

    # -- routing ---------------------------------------------------------------------------------

    def _route(self, src: int) -> int | None:
        """The voter a broker sends to: the highest-epoch leader named by a voter it can reach
        (a KRaft observer's leader discovery), else the last one it used."""
        reach = self.world.network.can_reach
        best: tuple[int, int] | None = None
        for v in self.voter_ids:
            node = self.voters[v]
            if not node.up or node.paused or not reach(src, v) or node.leader_id is None:
                continue
            if best is None or node.epoch > best[0]:
                best = (node.epoch, node.leader_id)
        if best is not None:
            self.believed[src] = best[1]
        return self.believed.get(src)

    def _ship(self, src: int, dst: int, message: Any) -> None:
        network = self.world.network
        if not network.can_reach(src, dst):
            return
        delay = self.rng.randint(*LINK_DELAY_MS)
        self.world.queue.call_at(
            self.world.queue.now_ms + delay, self._deliver_checked, src, dst, message
        )

    def _deliver_checked(self, src: int, dst: int, message: Any) -> None:
        if self.world.network.can_reach(src, dst):
            self._deliver(src, dst, message)

    def _deliver(self, src: int, dst: int, message: Any) -> None:
        node = self.voters.get(dst)
        if node is None:
            self.world.deliver(src, dst, message)  # a broker (CtlResponse, MetadataPush)
            return
        if not node.up:
            sender = self.voters.get(src)
            if sender is not None and sender.up and self.world.network.can_reach(dst, src):
                # TCP RST: the sender's connection is refused.
                self.world.queue.call_at(
                    self.world.queue.now_ms + REFUSED_DELAY_MS,
                    self._refused,
                    src,
                    dst,
                    sender.incarnation,
                )
            return
        if node.paused:
            node.buffered.append((src, message))
            return
        node.handle(src, message, self.world.queue.now_ms)
        self._after(node)

    def _refused(self, src: int, peer: int, incarnation: int) -> None:
        node = self.voters[src]
        if node.up and not node.paused and node.incarnation == incarnation:
            node.peer_unreachable(peer, self.world.queue.now_ms)
            self._after(node)

    def _timer(self, v: int, generation: int) -> None:
        node = self.voters[v]
        if node.up and not node.paused and generation == node.timer_generation:
            node.armed_deadline_ms = None
            node.tick(self.world.queue.now_ms)
            self._after(node, timer_fired=True)

    def _after(self, node: RaftNode, timer_fired: bool = False) -> None:
        """Ship what `node` produced, push metadata if it leads and its image advanced, advance
        the committed truth, check the image invariants and re-arm its timer (as
        Simulation._after does for the cluster simulator)."""
        now = self.world.queue.now_ms
        if node.outbox:
            outbox, node.outbox = node.outbox, []
            for to, message in outbox:
                self._ship(node.node_id, to, message)
        self.controllers[node.node_id].admin_answers.clear()
        node.replies.clear()
        if not node.up or node.core is None:
            return
        self.checker.now_ms = now
        self.image_checker.check(node)
        # Truth first: a new topic's id reaches the world (DataSimulation._on_change) before
        # the push is built, else the push at the topic's offset carries no partition and the
        # brokers, having applied that offset, would ignore it until the next image advance.
        self._advance_truth(node)
        if node.is_leader and node.image.applied_offset > self.pushed.get(node.node_id, -1):
            self.pushed[node.node_id] = node.image.applied_offset
            push = self.requests[node.node_id].push()
            for b in sorted(self.world.brokers):
                self._ship(node.node_id, b, push)
        if node.paused:
            return
        deadline = node.next_deadline_ms()
        if deadline is None:
            if node.armed_deadline_ms is not None:
                node.timer_generation += 1
                node.armed_deadline_ms = None
            return
        if timer_fired and deadline <= now:
            deadline = now + 1  # a core still due right after its timer: no spin at one instant
        deadline = max(deadline, now)
        if deadline != node.armed_deadline_ms:
            node.timer_generation += 1
            node.armed_deadline_ms = deadline
            self.world.queue.call_at(deadline, self._timer, node.node_id, node.timer_generation)

    def _advance_truth(self, node: RaftNode) -> None:
        """Apply to `truth` the committed entries `node` applied beyond it (Raft safety, checked
        by the SafetyChecker, makes every voter's applied prefix the same log), and report each
        partition change once to `on_partition_change`."""
        truth = self.truth
        start = truth.applied_offset + 1
        end = node.applied_end
        if end <= start or node.store is None or node.store.start_offset > start:
            return
        epoch_before = truth.controller_epoch
        for entry in read_range(node.store, start, end):
            before = {(p.topic_id, p.partition): p for _, p in truth.all_partitions()}
            truth.apply_entry(entry)
            if self.on_partition_change is None:
                continue
            for _, p in truth.all_partitions():
                old = before.get((p.topic_id, p.partition))
                if old != p:
                    self.on_partition_change(old, p)
        if truth.controller_epoch != epoch_before:
            self.stats["controller_epochs"] += 1


def raft_controller_factory(
    voters: int = 3, raft_config: RaftConfig | None = None
) -> Callable[[World, ControllerConfig], RaftControllerNode]:
    """The `controller_factory` for data_world.World: a Raft quorum of `voters` voters."""

    def factory(world: World, config: ControllerConfig) -> RaftControllerNode:
        return RaftControllerNode(world, config, voters, raft_config)

    return factory
