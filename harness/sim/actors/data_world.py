"""The data-plane simulation's world: the kernel's event queue and network
(harness.sim.kernel: one clock, refusing the past; the quiet network profile with link cuts), one
active controller (C's ControllerService over a MetadataImage) and brokers that host P's
ReplicaCore for their partition (PartitionLog on SimStorage), driven as the cores' contract says
(effects executed synchronously, in order, before the next input; ticks at next_deadline_ms).

Model (what is simulated and what is abstracted; docs in the module of each actor):
- Node ids: controller CONTROLLER_ID (0), brokers 1..N, clients >= CLIENT_BASE. The nemesis
  cuts links both ways; a cut is checked at send AND delivery (in-flight messages are dropped).
- By default (ControllerNode) the metadata quorum is abstracted as one active controller whose
  proposals commit after COMMIT_DELAY_MS (`controller_factory` swaps in the Raft-backed quorum
  of harness/sim/actors/data_quorum.py, which `kraftlab sim matrix` uses); `controller_down` models the quorum being unavailable (isolated leader,
  quorum lost); on recovery a fresh ControllerService starts over the same committed image (a
  new active controller: fresh broker sessions, as in Kafka).
- Brokers register (broker epoch = the RegisterBroker offset, KIP-903), heartbeat, and receive a
  MetadataUpdated for the partition after every committed change and with every heartbeat
  answer (so a broker cut off from the controller keeps its stale view: the zombie leader).
  Quorum mode: a fenced replica's position reports (SendReplicaPosition) travel to the
  controller as ordinary controller requests, like AlterPartition; before one leaves, the broker
  persists its leader epoch as the partition's fenced epoch when higher (as the node's
  ReplicaManager does), and a core rebuilt after a restart gets it back (`fenced_epoch`), so it
  never follows a leader of an epoch earlier than one it voted at; requests are handed to the
  ControllerService with their receipt time (a heartbeat counts from its arrival, KAFKA-15019).
- Process kill keeps the page cache (nothing lost); `power_crash` loses every unflushed byte
  (SimStorage.crash). Logs flush every FLUSH_INTERVAL_MS, the HW is checkpointed every
  HW_CHECKPOINT_INTERVAL_MS (both read back by a restart).
- A paused node holds its inbox and timers until resumed.

Invariants checked per event (`violation`): hw-above-isr-leo, leader-epoch-regressed, and
divergence-below-hw (every record a replica holds below its HW is the one first seen committed
there). The last holds only while the committed prefix cannot legitimately change: leader
epochs on (KIP-101), no unclean election, no lost disk tail (power crash). After such a loss
the new leader reuses the lost offsets, so a rewritten record below a HW is the loss itself,
not a simulator or replication bug: it is counted in Counters.divergence_after_loss instead.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.drive.replica_effects import execute_replica_effects
from harness.sim.kernel.events import Call, Deliver, EventQueue
from harness.sim.kernel.network import QUIET, SimNetwork
from partition.log import LogConfig, PartitionLog, SimStorage
from partition.log import batch as rb
from partition.replica import (
    Effect,
    LeadershipChanged,
    LocalReplicaLog,
    MetadataUpdated,
    ReplicaConfig,
    ReplicaCore,
)
from partition.replica.messages import FetchRequest, FetchResponse, ProduceResponse
from quorum.controller import (
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    ControllerConfig,
    ControllerService,
    Propose,
    Respond,
)
from quorum.controller.messages import (
    AlterPartitionRequest,
    BrokerState,
    ReportReplicaPositionRequest,
)
from quorum.metadata.errors import Errors
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import (
    BrokerRegistrationChange,
    Endpoint,
    FenceBroker,
    LeaderRecoveryState,
    Partition,
    RegisterBroker,
    UnfenceBroker,
)

CONTROLLER_ID = 0
_BROKER_RECORDS = (RegisterBroker, FenceBroker, UnfenceBroker, BrokerRegistrationChange)
CLIENT_BASE = 1000
COMMIT_DELAY_MS = 4  # one metadata-quorum commit round
# Kafka does not fsync per write: the OS writes dirty pages back after ~30 s (Linux
# dirty_expire_centisecs); the HW checkpoint is written every 5 s
# (replica.high.watermark.checkpoint.interval.ms). Fault durations are unscaled, so these are too.
FLUSH_INTERVAL_MS = 30_000
HW_CHECKPOINT_INTERVAL_MS = 5_000
LOG_DIR = "/data"
# Records here are ~70-byte batches: index every batch so reads seek instead of scanning.
LOG_CONFIG = LogConfig(index_interval_bytes=0)


@dataclass(frozen=True, slots=True)
class WorldTiming:
    """Kafka's timeouts scaled to simulated seconds (ratios kept: session = 5 x heartbeat)."""

    heartbeat_interval_ms: int = 200
    session_timeout_ms: int = 1000
    replica_lag_time_max_ms: int = 2000
    replica_fetch_wait_max_ms: int = 200
    request_timeout_ms: int = 1000


@dataclass(frozen=True, slots=True)
class CtlRequest:
    request_id: int
    request: Any
    # Unused since quorum mode elects from fenced-epoch reports (ReportReplicaPositionRequest, a
    # request of its own); kept so that drivers built on this shape keep working.
    positions: tuple[tuple[str, int, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class CtlResponse:
    request_id: int
    response: Any


@dataclass(frozen=True, slots=True)
class MetadataPush:
    """The committed image's view of the partition, at `offset`."""

    offset: int
    update: MetadataUpdated | None


class ControllerNode:
    """The active controller: ControllerService, proposals committed after COMMIT_DELAY_MS."""

    def __init__(self, world: World, config: ControllerConfig) -> None:
        self.world = world
        self.config = config
        self.image = MetadataImage()
        self.up = True
        self.service: ControllerService | None = ControllerService(config, image=self.image,
                                                                   now_ms=0)
        self.next_offset = 1
        self.timer_at: int | None = None
        self.on_partition_change: Callable[[Partition | None, Partition], None] | None = None

    def submit(self, token: Any, request: Any) -> None:
        if not self.up or self.service is None:
            return
        self.service.submit(token, request, self.world.queue.now_ms)  # receipt time (KAFKA-15019)
        self.pump()

    def pump(self) -> None:
        if not self.up or self.service is None:
            return
        self._run(self.service.pump(self.image, self.world.queue.now_ms))
        self._arm()

    def _arm(self) -> None:
        if self.service is None or self.service.busy:
            return
        deadline = self.service.next_deadline_ms()
        if self.timer_at is None or deadline < self.timer_at:
            self.timer_at = deadline
            # A deadline already due runs now (the queue refuses the past).
            now_ms = self.world.queue.now_ms
            self.world.queue.call_at(max(deadline, now_ms), self._timer, deadline)

    def _timer(self, deadline: int) -> None:
        if self.timer_at == deadline:
            self.timer_at = None
        self.pump()

    def _run(self, outputs: list[Any]) -> None:
        for out in outputs:
            match out:
                case Propose(records=records):
                    service = self.service
                    self.world.queue.call_at(self.world.queue.now_ms + COMMIT_DELAY_MS, self._commit,
                                        service, records)
                case Respond(token=token, response=response):
                    assert isinstance(token, tuple)
                    src, request_id = token
                    self.world.send(CONTROLLER_ID, src, CtlResponse(request_id, response))

    def _commit(self, service: ControllerService, records: tuple[Any, ...]) -> None:
        if service is not self.service or not self.up:
            return  # the quorum lost this proposal with its leader
        before = {(p.topic_id, p.partition): p for _, p in self.image.all_partitions()}
        results = []
        for record in records:
            results.append(self.image.apply_record(self.next_offset, 1, record))
            self.next_offset += 1
        changed = False
        for _, p in self.image.all_partitions():
            old = before.get((p.topic_id, p.partition))
            if old != p:
                changed = True
                if self.on_partition_change is not None:
                    self.on_partition_change(old, p)
        if changed or any(isinstance(r.record, _BROKER_RECORDS) for r in results):
            self.world.push_metadata()
        self._run(service.committed(results))
        self.pump()

    def go_down(self) -> list[int]:
        if self.service is not None:
            self.service = None  # the waiting callers time out (their responses never come)
        self.up = False
        self.timer_at = None
        return [CONTROLLER_ID]

    def come_up(self) -> None:
        self.up = True
        self.service = ControllerService(self.config, image=self.image,
                                         now_ms=self.world.queue.now_ms)
        self.pump()

    def metadata_push(self) -> MetadataPush:
        return MetadataPush(self.image.applied_offset, self.world.partition_update(self.image))


class Broker:
    """One broker: registration, heartbeats, the partition's ReplicaCore and its log."""

    def __init__(self, world: World, node_id: int) -> None:
        self.world = world
        self.node_id = node_id
        self.storage = SimStorage()
        self.hw_checkpoint = 0
        self.up = False
        self.paused = False
        self.held: list[tuple[int, Any]] = []
        self.incarnation = 0
        self.clean_epoch = -1
        self.log: PartitionLog | None = None
        self.view: LocalReplicaLog | None = None
        self.core: ReplicaCore | None = None
        self.broker_epoch = -1
        self.applied_offset = -1
        self.pending: MetadataPush | None = None
        self.timer_at: int | None = None
        self.next_request_id = 1
        self.leader_epoch_seen = -1
        self.fenced_epoch = -1  # quorum mode: the persisted fenced epoch (SendReplicaPosition)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self.up = True
        self.paused = False
        self.incarnation += 1
        self.log = PartitionLog.open(self.storage, LOG_DIR, "t", 0, LOG_CONFIG,
                                     high_watermark=self.hw_checkpoint)
        self.view = LocalReplicaLog(self.log)
        self.fenced_epoch = self.log.read_fenced_epoch()
        self.core = None
        self.broker_epoch = -1
        self.applied_offset = -1
        self.pending = None
        self.timer_at = None
        self.leader_epoch_seen = -1
        self._register()
        gen = self.incarnation
        self.world.queue.call_at(self.world.queue.now_ms + FLUSH_INTERVAL_MS, self._flush, gen)
        self.world.queue.call_at(self.world.queue.now_ms + HW_CHECKPOINT_INTERVAL_MS,
                            self._checkpoint_hw, gen)

    def kill(self) -> None:
        """Process kill (SIGKILL): the page cache survives, so nothing written is lost."""
        self.up = False
        self.core = None
        self.held = []

    def power_crash(self) -> None:
        """Power loss: every byte not fsynced is gone (SimStorage.crash)."""
        self.world.prefix_may_change = True  # a lost tail may hold committed records
        self.kill()
        self.storage.crash(random.Random(self.world.seed * 31 + self.node_id))

    def restart_replica(self, lose_unflushed: bool = False) -> None:
        """Rebuild the partition's replica from disk (log recovery, HW from the checkpoint)
        while the broker keeps its registration: how a ZooKeeper-era broker restart looked to
        the controller (KRaft re-registration takes the broker out of every ISR, KIP-841). Used
        by the KIP-101 scenarios; `lose_unflushed` also drops the unflushed tail."""
        if lose_unflushed:
            self.world.prefix_may_change = True
            self.storage.crash(random.Random(self.world.seed * 31 + self.node_id))
        self.log = PartitionLog.open(self.storage, LOG_DIR, "t", 0, LOG_CONFIG,
                                     high_watermark=self.hw_checkpoint)
        self.view = LocalReplicaLog(self.log)
        self.fenced_epoch = self.log.read_fenced_epoch()
        self.core = None
        self.applied_offset = -1
        self.leader_epoch_seen = -1
        self.timer_at = None

    def pause(self) -> None:
        if self.up:
            self.paused = True

    def resume(self) -> None:
        if not self.up or not self.paused:
            return
        self.paused = False
        held, self.held = self.held, []
        for src, message in held:
            self.deliver(src, message)
        self.tick()

    def _flush(self, gen: int) -> None:
        if gen != self.incarnation or not self.up:
            return
        if not self.paused and self.log is not None:
            self.log.flush()
        self.world.queue.call_at(self.world.queue.now_ms + FLUSH_INTERVAL_MS, self._flush, gen)

    def _checkpoint_hw(self, gen: int) -> None:
        if gen != self.incarnation or not self.up:
            return
        if not self.paused and self.log is not None:
            self.hw_checkpoint = self.log.high_watermark  # written atomically, fsynced
        self.world.queue.call_at(self.world.queue.now_ms + HW_CHECKPOINT_INTERVAL_MS,
                            self._checkpoint_hw, gen)

    # -- controller channel ----------------------------------------------------------------------

    def _send_ctl(self, request: Any, positions: tuple[Any, ...] = ()) -> None:
        self.next_request_id += 1
        self.world.send(self.node_id, CONTROLLER_ID,
                                CtlRequest(self.next_request_id, request, positions))

    def _register(self) -> None:
        if not self.up:
            return
        self._send_ctl(BrokerRegistrationRequest(self.node_id, f"sim-{self.node_id}-"
                                                 f"{self.incarnation}",
                                                 (Endpoint("rpc", "sim", self.node_id),)))
        gen = (self.incarnation, "register")
        self.world.queue.call_at(self.world.queue.now_ms + self.world.timing.request_timeout_ms,
                            self._register_retry, gen)

    def _register_retry(self, gen: tuple[int, str]) -> None:
        if gen[0] == self.incarnation and self.up and self.broker_epoch < 0:
            if self.paused:
                self.world.queue.call_at(self.world.queue.now_ms + 50, self._register_retry, gen)
            else:
                self._register()

    def _heartbeat(self, gen: int) -> None:
        if gen != self.incarnation or not self.up:
            return
        if not self.paused and self.broker_epoch >= 0:
            self._send_ctl(BrokerHeartbeatRequest(self.node_id, self.broker_epoch,
                                                  max(self.applied_offset, 0)))
        self.world.queue.call_at(self.world.queue.now_ms + self.world.timing.heartbeat_interval_ms,
                            self._heartbeat, gen)

    # -- inputs ----------------------------------------------------------------------------------

    def deliver(self, src: int, message: Any) -> None:
        if not self.up:
            return
        if self.paused:
            self.held.append((src, message))
            return
        match message:
            case CtlResponse(response=response):
                self._on_ctl_response(response)
            case MetadataPush():
                self._on_metadata(message)
            case _:
                self._core_input(message)
        self.world.after_broker_event(self)

    def _on_ctl_response(self, response: Any) -> None:
        match response:
            case BrokerRegistrationResponse(error=error, broker_epoch=epoch):
                if error is Errors.NONE and self.broker_epoch < 0:
                    self.broker_epoch = epoch
                    self.world.queue.call_at(self.world.queue.now_ms, self._heartbeat,
                                        self.incarnation)
                    if self.pending is not None:
                        self._on_metadata(self.pending)
            case BrokerHeartbeatResponse(error=error):
                if error in (Errors.STALE_BROKER_EPOCH, Errors.BROKER_ID_NOT_REGISTERED):
                    self.broker_epoch = -1
                    self.core = None
                    self.incarnation += 1  # stops the old heartbeat loop
                    self._register()
            case AlterPartitionResponse():
                self._core_input(response)
            case _:
                pass

    def _on_metadata(self, push: MetadataPush) -> None:
        if push.offset <= self.applied_offset:
            return
        if self.broker_epoch < 0 or push.offset < self.broker_epoch:
            # Kafka's initial catch-up (as harness/runtime/replica_manager.py): act only on an image
            # that holds this broker's own registration; the simulated network may deliver an
            # older push after the registration answer.
            self.pending = push
            return
        self.applied_offset = push.offset
        update = push.update
        if update is None:
            return
        if self.core is None:
            assert self.view is not None
            config = self.world.replica_config
            self.core = ReplicaCore(self.node_id, update.partition.topic_id, 0, self.view,
                                    config, broker_epoch=self.broker_epoch, topic="t",
                                    fenced_epoch=self.fenced_epoch)
        epoch = update.partition.leader_epoch
        if epoch < self.leader_epoch_seen:
            self.world.violation("leader-epoch-regressed", f"broker {self.node_id} saw epoch "
                                 f"{epoch} after {self.leader_epoch_seen}")
        self.leader_epoch_seen = max(self.leader_epoch_seen, epoch)
        self._core_input(update)

    def _core_input(self, message: Any) -> None:
        if self.core is None:
            return
        self.execute(self.core.handle(message, self.world.queue.now_ms))

    def tick(self) -> None:
        if not self.up or self.paused or self.core is None:
            return
        self.execute(self.core.tick(self.world.queue.now_ms))
        self.world.after_broker_event(self)

    def _timer(self, at_ms: int, gen: int) -> None:
        if gen != self.incarnation or self.timer_at != at_ms:
            return
        self.timer_at = None
        self.tick()

    def execute(self, effects: list[Effect]) -> None:
        """Run the core's effects with the node's executor (harness/drive/replica_effects.py:
        one implementation for both drivers, DESIGN.md), this broker being its env, then arm
        the core's next deadline."""
        world = self.world
        assert self.view is not None
        execute_replica_effects(effects, self.view, self, self._on_high_watermark)
        core = self.core
        if core is not None:
            deadline = core.next_deadline_ms()
            if deadline is not None and (self.timer_at is None or deadline < self.timer_at):
                self.timer_at = deadline
                # A deadline already due runs now (the queue refuses the past).
                at_ms = max(deadline, world.queue.now_ms)
                world.queue.call_at(at_ms, self._timer, deadline, self.incarnation)

    # -- the ReplicaEffectsEnv (sends go through the simulated network, in effect order) -------

    def _on_high_watermark(self, before: int, after: int) -> None:
        self.world.on_high_watermark(self, before, after)

    def send_fetch(self, to: int, request: FetchRequest) -> None:
        self.world.send(self.node_id, to, request)

    def send_fetch_response(self, to: int, response: FetchResponse) -> None:
        world = self.world
        dst = world.consumer_of.pop(response.request_id, None) if to < 0 else to
        if dst is not None:
            world.send(self.node_id, dst, response)

    def send_alter_partition(self, request: AlterPartitionRequest) -> None:
        self._send_ctl(request)

    def send_replica_position(self, request: ReportReplicaPositionRequest) -> None:
        if request.leader_epoch > self.fenced_epoch:
            # Durable before the vote leaves (partition.replica.effects), as ReplicaManager does.
            assert self.log is not None
            self.log.write_fenced_epoch(request.leader_epoch)
            self.fenced_epoch = request.leader_epoch
        self._send_ctl(request)

    def complete_produce(self, response: ProduceResponse) -> None:
        dst = self.world.producer_of.pop(response.request_id, None)
        if dst is not None:
            self.world.send(self.node_id, dst, response)

    def leadership_changed(self, effect: LeadershipChanged) -> None:
        pass  # no broker state outside the core follows leadership in the simulator


@dataclass
class Counters:
    leader_elections: int = 0
    unclean_elections: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    # divergence-below-hw seen after an unclean election or a lost disk tail (or with leader
    # epochs off): legitimate loss rewriting the committed prefix, counted, not a violation.
    divergence_after_loss: int = 0
    violations: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)


class World:
    """Everything of one run except the workload and the nemesis (harness/sim/data_*.py)."""

    def __init__(self, seed: int, brokers: int, replica_config: ReplicaConfig,
                 controller_config: ControllerConfig, timing: WorldTiming,
                 controller_factory: Callable[[World, ControllerConfig], Any] | None = None,
                 ) -> None:
        self.seed = seed
        self.timing = timing
        self.replica_config = replica_config
        self.queue = EventQueue()
        self.network = SimNetwork(random.Random(seed * 7919 + 1), QUIET)
        # The metadata side: the abstract ControllerNode by default; S's Raft-backed quorum
        # (harness/sim/data_quorum.raft_controller_factory) offers the same interface.
        self.controller = (controller_factory or ControllerNode)(self, controller_config)
        self.brokers = {b: Broker(self, b) for b in range(1, brokers + 1)}
        self.clients: dict[int, Any] = {}
        self.topic_id = ""
        self.producer_of: dict[int, int] = {}
        self.consumer_of: dict[int, int] = {}
        self.next_request_id = 0
        self.counters = Counters()
        # The batches first seen committed (below some replica's HW): base offset -> (broker,
        # raw batch), and offset -> the base offset of the batch that holds it.
        self.committed_batches: dict[int, tuple[int, bytes]] = {}
        self.committed_owner: dict[int, int] = {}
        self.check_prefix = replica_config.leader_epoch_enable
        # Set by an unclean election or a power crash: from then on the committed prefix may be
        # rewritten legitimately, so divergence-below-hw is counted, not a violation.
        self.prefix_may_change = False
        self.hooks: list[Callable[[Broker], None]] = []
        self.controller.on_partition_change = self._count_change

    # -- the kernel: time, messages ------------------------------------------------------------

    def send(self, src: int, dst: int, message: Any) -> None:
        """`message` from `src` to `dst` over the network (lost if a cut is in the way at send
        or at arrival)."""
        now_ms = self.queue.now_ms
        for delay_ms in self.network.delays_ms(src, dst):
            self.queue.schedule(now_ms + delay_ms, Deliver(src, dst, message))

    def run_until(self, end_ms: int) -> None:
        """Run every event due up to `end_ms`; the clock then reads `end_ms`."""
        queue = self.queue
        while (at_ms := queue.peek_time_ms()) is not None and at_ms <= end_ms:
            _, event = queue.pop()
            match event:
                case Call(fn=fn, args=args):
                    fn(*args)
                case Deliver(src=src, dst=dst, message=message):
                    if self.network.can_reach(src, dst):
                        self.deliver(src, dst, message)
                case _:
                    raise AssertionError(f"unexpected event {event!r}")
        queue.advance_to(end_ms)

    # -- routing -------------------------------------------------------------------------------

    def deliver(self, src: int, dst: int, message: Any) -> None:
        if dst == CONTROLLER_ID:
            self._controller_input(src, message)
        elif dst in self.brokers:
            self.brokers[dst].deliver(src, message)
        elif dst in self.clients:
            self.clients[dst].deliver(src, message)

    def _controller_input(self, src: int, message: Any) -> None:
        ctl = self.controller
        if not ctl.up or not isinstance(message, CtlRequest):
            return
        ctl.submit((src, message.request_id), message.request)
        if isinstance(message.request, BrokerHeartbeatRequest):
            # The heartbeat answer carries the broker's metadata catch-up (the fetch path).
            self.send(CONTROLLER_ID, src, ctl.metadata_push())

    def partition_update(self, image: MetadataImage) -> MetadataUpdated | None:
        if not self.topic_id:
            return None
        part = image.partition(self.topic_id, 0)
        if part is None:
            return None
        eligible = tuple(BrokerState(b.broker_id, b.broker_epoch) for b in image.brokers()
                         if image.is_broker_usable(b.broker_id))
        return MetadataUpdated(part, eligible)

    def push_metadata(self) -> None:
        push = self.controller.metadata_push()
        for b in self.brokers:
            self.send(CONTROLLER_ID, b, push)

    def leader_id(self) -> int:
        """The committed image's leader of the partition (-1: none)."""
        if not self.topic_id:
            return -1
        part = self.controller.image.partition(self.topic_id, 0)
        return part.leader if part is not None else -1

    # -- the FaultTarget (harness.sim.faults.fault) ----------------------------------------------

    @property
    def controller_ids(self) -> tuple[int, ...]:
        voters = getattr(self.controller, "voter_ids", None)
        return tuple(voters) if voters else (CONTROLLER_ID,)

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(sorted(self.brokers))

    @property
    def client_ids(self) -> tuple[int, ...]:
        return tuple(sorted(c for c in self.clients if c >= CLIENT_BASE))

    @property
    def node_ids(self) -> tuple[int, ...]:
        return self.controller_ids + self.broker_ids

    def _voter(self, node_id: int) -> Any:
        return self.controller.voters[node_id]

    def is_up(self, node_id: int) -> bool:
        if node_id in self.brokers:
            return self.brokers[node_id].up
        return self.controller.up if node_id == CONTROLLER_ID else self._voter(node_id).up

    def is_paused(self, node_id: int) -> bool:
        if node_id in self.brokers:
            return self.brokers[node_id].paused
        return node_id != CONTROLLER_ID and self._voter(node_id).paused

    def active_controller(self) -> int | None:
        active = getattr(self.controller, "active_controller", None)
        if active is not None:
            return active()  # type: ignore[no-any-return]
        return CONTROLLER_ID if self.controller.up else None

    def partition_leader(self) -> int | None:
        leader = self.leader_id()
        return leader if leader > 0 else None

    def crash(self, node_id: int) -> None:
        if node_id in self.brokers:
            self.brokers[node_id].power_crash()
        elif node_id == CONTROLLER_ID:
            self.controller.go_down()
        else:
            self.controller.crash_voter(node_id)

    def kill(self, node_id: int) -> None:
        if node_id in self.brokers:
            self.brokers[node_id].kill()
        else:
            self.crash(node_id)  # controllers fsync every write: a kill loses nothing more

    def shutdown(self, node_id: int) -> None:
        self.kill(node_id)

    def restart(self, node_id: int) -> None:
        if self.is_up(node_id):
            return
        if node_id in self.brokers:
            self.brokers[node_id].start()
        elif node_id == CONTROLLER_ID:
            self.controller.come_up()
        else:
            self.controller.start_voter(node_id)

    def pause(self, node_id: int, duration_ms: int | None) -> None:
        if node_id in self.brokers:
            self.brokers[node_id].pause()
        elif node_id != CONTROLLER_ID:
            self.controller.pause_voter(node_id)
        if duration_ms is not None:
            self.queue.call_at(self.queue.now_ms + duration_ms, self.resume, node_id)

    def resume(self, node_id: int) -> None:
        if node_id in self.brokers:
            self.brokers[node_id].resume()
        elif node_id != CONTROLLER_ID:
            self.controller.resume_voter(node_id)

    def metadata_quorum_down(self) -> list[int]:
        return self.controller.go_down()  # type: ignore[no-any-return]

    def metadata_quorum_up(self) -> None:
        self.controller.come_up()

    # -- accounting and invariants ---------------------------------------------------------------

    def _count_change(self, old: Partition | None, new: Partition) -> None:
        c = self.counters
        if old is None:
            return
        if new.leader != -1 and (new.leader_epoch > old.leader_epoch) and (
            new.leader != old.leader or old.leader == -1
        ):
            c.leader_elections += 1
            recovering = new.leader_recovery_state == LeaderRecoveryState.RECOVERING
            outside = new.leader not in old.isr and new.leader not in old.elr
            # Quorum mode elects the most up-to-date live majority member, ISR or not: only a
            # KIP-704 RECOVERING leader counts as unclean there.
            if recovering or (outside and not self.replica_config.is_quorum_mode):
                c.unclean_elections += 1
                self.prefix_may_change = True
        if len(new.isr) < len(old.isr):
            c.isr_shrinks += 1
        elif len(new.isr) > len(old.isr):
            c.isr_expands += 1

    def violation(self, name: str, detail: str) -> None:
        c = self.counters
        c.violations[name] = c.violations.get(name, 0) + 1
        if len(c.examples) < 8:
            c.examples.append(f"{self.queue.now_ms} ms {name}: {detail}")

    def on_high_watermark(self, broker: Broker, before: int, after: int) -> None:
        """No two replicas disagree below the HW: every record a replica holds below its HW is
        the one first seen committed at that offset (checked as each HW advances, over the
        batches newly below it).

        Followers append the leader's batches byte for byte, so a batch is compared as raw
        bytes with the batch first seen committed at its base offset; records are decoded only
        when the bytes differ or the batch overlaps offsets first seen in another batch (a
        rewrite after a truncation), which keeps this check a few percent of a run instead of
        the ~18% that decoding every record below every new HW cost."""
        if after <= before or broker.log is None:
            return
        self._check_leader_hw(broker, after)
        log = broker.log
        start = max(before, log.log_start_offset)
        if start >= after:
            return
        data = log.read(start, 1 << 22, max_offset=after)  # whole batches below `after`
        batches = self.committed_batches
        owner = self.committed_owner
        for h in rb.iter_headers(data, check_crc=False):
            raw = data[h.position:h.position + h.size]
            known = batches.get(h.base_offset)
            if known is not None and known[1] == raw:
                continue  # the same batch, byte for byte
            offsets = range(h.base_offset, h.base_offset + h.last_offset_delta + 1)
            if known is None and not any(o in owner for o in offsets):
                batches[h.base_offset] = (broker.node_id, raw)  # first seen committed
                for o in offsets:
                    owner[o] = h.base_offset
                continue
            self._compare_records(broker, data, h, raw, after)

    def _committed_value(self, offset: int) -> tuple[int, bytes] | None:
        """(broker, value) of the record first seen committed at `offset` (decodes its batch)."""
        base = self.committed_owner.get(offset)
        if base is None:
            return None
        node_id, raw = self.committed_batches[base]
        for h in rb.iter_headers(raw, check_crc=False):
            for r in rb.decode_records(raw, h):
                if r.offset == offset:
                    return node_id, r.value or b""
        return None

    def _compare_records(self, broker: Broker, data: bytes, h: rb.BatchHeader, raw: bytes,
                         after: int) -> None:
        """The slow path: decode the batch and compare each record below `after` with the one
        first seen committed at its offset; the batch then owns its offsets."""
        for r in rb.decode_records(data, h):
            if r.offset >= after:
                break
            value = r.value or b""
            known = self._committed_value(r.offset)
            if known is not None and known[1] != value:
                if self.check_prefix and not self.prefix_may_change:
                    self.violation("divergence-below-hw",
                                   f"offset {r.offset}: broker {broker.node_id} has {value!r}, "
                                   f"broker {known[0]} had {known[1]!r} below its HW")
                else:
                    self.counters.divergence_after_loss += 1
        self.committed_batches[h.base_offset] = (broker.node_id, raw)
        for o in range(h.base_offset, h.base_offset + h.last_offset_delta + 1):
            self.committed_owner[o] = h.base_offset

    def after_broker_event(self, broker: Broker) -> None:
        for hook in self.hooks:
            hook(broker)

    def _check_leader_hw(self, broker: Broker, hw: int) -> None:
        """HW <= min ISR LEO (ISR mode) / the majority LEO (quorum mode), when a leader moves
        it (followers whose LEO the leader does not know yet are not counted)."""
        core = broker.core
        if core is None or not core.is_leader or core.partition is None:
            return
        followers = core.role.followers  # type: ignore[union-attr]
        if self.replica_config.is_quorum_mode:
            leos = sorted([core.log_end_offset] + [f.log_end_offset for f in followers.values()],
                          reverse=True)
            bound = leos[len(leos) // 2]
        else:
            bound = min([core.log_end_offset] + [followers[r].log_end_offset
                                                 for r in core.partition.isr
                                                 if r in followers
                                                 and followers[r].log_end_offset >= 0])
        if hw > bound:
            self.violation("hw-above-isr-leo", f"leader {broker.node_id} HW {hw} > {bound}")
