"""The simulated brokers. Both run the broker session with the active controller
(harness.drive.broker_session, the same sans-IO BrokerSession the real brokers run: registration
with a fresh incarnation id `sim-<node>-<process start>` per process start, heartbeats with the
applied metadata offset, fast heartbeats while fenced, re-registration), the way
harness/runtime/broker.py drives it: after every input, poll the session and send what it asks
for as a ControllerRpcRequest (harness.drive.controller_rpc); its deadline joins the process's.

- `BrokerLifecycle`: a metadata-run broker is a Raft observer (harness.sim.actors.raft_node)
  hosting this part; it sends to the leader its observer core knows.

- `Broker`, a broker of the data-plane runs: the session and the data partition's replica
  (partition.replica.ReplicaCore on a PartitionLog over its own SimStorage), its effects executed
  by the shared executor (harness.drive.replica_effects). An actor of the World
  (harness.sim.runs.world): inputs through `handle`, one timer at `next_deadline_ms()` (the
  replica core's, the session's, the next flush and HW checkpoint), messages out through
  `outbox`.

Model of the data-plane broker:
- registration and heartbeats are the session's (one request outstanding, fast heartbeats while
  fenced, re-registration when the registration is lost), sent as ControllerRpcRequests to the
  controller `find_controller` names (the run's observer-like leader discovery); AlterPartition
  and quorum-mode position reports go there too, with ids of their own;
- metadata comes as pushes (harness.sim.actors.controller). As Kafka's initial catch-up (and
  harness/runtime/replica_manager.py), the replica is built only from an image that holds this
  broker's own registration (push offset >= its broker epoch); an older push is kept until the
  registration answer; a lost registration drops the replica (rebuilt after re-registering);
- a request for the partition before the replica exists is answered NOT_LEADER_OR_FOLLOWER, as
  the runtime's replica manager does: a follower backs off (replica.fetch.backoff.ms) and
  fetches again instead of waiting for its request timeout;
- quorum mode: before a fenced replica's position report leaves, its leader epoch is persisted
  as the partition's fenced epoch when higher (as the node's ReplicaManager does), and a replica
  rebuilt after a restart gets it back, so it never follows a leader of an epoch earlier than
  one it voted at;
- a kill (SIGKILL) keeps the page cache (nothing lost); a power loss (`crash`) loses every byte
  not fsynced (SimStorage.crash). Logs flush every FLUSH_INTERVAL_MS, the HW is checkpointed
  every HW_CHECKPOINT_INTERVAL_MS (both read back by a restart);
- with a disk model (harness.sim.actors.disk: a flush policy, fsync times drawn from a measured
  distribution), an append the policy fsyncs runs first, the effects after it wait for the
  fsync to complete, and the replica takes no input meanwhile (held in order, replayed when the
  fsync completes); the session and the periodic flush and checkpoint go on. Without one
  (`Disk(None)`), appends flush as the core asks, at no cost.
- replication.mode=raft (the push says so): the partition is a replica of its Raft group,
  hosted by the one raft-partition host (harness.drive.raft_host) on the simulator's ports
  (harness.sim.actors.raft_host) on the same log, built like the ReplicaCore (once registered,
  voters = the partition's replicas) and kept when the
  registration is lost (no controller is on a raft partition's leadership path). The broker
  reports the leaderships its replicas win to the controller (ReportRaftLeadersRequest, recorded
  by quorum/controller/raft_leaders.py: after a round that elected it, and every heartbeat
  interval while the image lacks its leader, epoch or in-sync voters), and answers a client's
  Metadata request from its Raft state when that is newer than its image (`metadata_leader`).

Invariants reported to the ReplicaChecker (harness.sim.checks.replicas) as they happen: every HW
move, every leader epoch the broker learns, every lost tail.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from harness.drive.broker_session import BrokerSession, BrokerTiming
from harness.drive.controller_rpc import ControllerRpcRequest, ControllerRpcResponse
from harness.drive.raft_host import RaftPartitionHost
from harness.drive.replica_effects import execute_replica_effects
from harness.sim.actors.controller import TOPIC, MetadataPush
from harness.sim.actors.disk import Disk
from harness.sim.actors.process import SimProcess
from harness.sim.actors.raft_host import (
    RaftSettings,
    SimRaftPorts,
    metadata_leader_of,
    unrecorded_leaders,
)
from harness.sim.actors.raft_node import RaftNode
from harness.sim.checks.replicas import ReplicaChecker
from partition.log import LogConfig, PartitionLog, SimStorage
from partition.raft import RaftEnvelope
from partition.replica import (
    AppendAsFollower,
    AppendAsLeader,
    Effect,
    LeadershipChanged,
    LocalReplicaLog,
    ReplicaConfig,
    ReplicaCore,
)
from partition.replica.messages import (
    FetchRequest,
    FetchResponse,
    ProduceRequest,
    ProduceResponse,
)
from quorum.controller import AlterPartitionResponse
from quorum.controller.messages import (
    AlterPartitionRequest,
    ReportRaftLeadersRequest,
    ReportReplicaPositionRequest,
)
from quorum.metadata.configs import REPLICATION_MODE_RAFT
from quorum.metadata.errors import Errors
from quorum.metadata.image import ApplyResult
from quorum.metadata.records import Endpoint, Partition
from quorum.raft.log import Entry

# Kafka does not fsync per write: the OS writes dirty pages back after ~30 s (Linux
# dirty_expire_centisecs); the HW checkpoint is written every 5 s
# (replica.high.watermark.checkpoint.interval.ms). Fault durations are unscaled, so these are too.
FLUSH_INTERVAL_MS = 30_000
HW_CHECKPOINT_INTERVAL_MS = 5_000
LOG_DIR = "/data"
PAUSED_FSYNC_POLL_MS = 10  # a paused broker whose fsync completed looks again this often
# Records here are ~70-byte batches: index every batch so reads seek instead of scanning.
LOG_CONFIG = LogConfig(index_interval_bytes=0)
CALL_ID_BASE = 1 << 40  # controller calls' ids, disjoint from the session's (as the runtime)


def new_session(node_id: int, incarnation: int, timing: BrokerTiming) -> BrokerSession:
    """The session of process start number `incarnation` of broker `node_id`."""
    return BrokerSession(
        node_id, f"sim-{node_id}-{incarnation}", (Endpoint("rpc", "sim", node_id),), timing
    )


class BrokerLifecycle:
    """Registration and heartbeats of one observer, through its BrokerSession."""

    def __init__(self, node: RaftNode, timing: BrokerTiming) -> None:
        self.node = node
        self.timing = timing
        self.reset()

    def reset(self) -> None:
        # The session of the node's next (or current) process start.
        self.session = new_session(self.node.node_id, self.node.incarnation + 1, self.timing)

    def accepts(self, message: Any) -> bool:
        return isinstance(message, ControllerRpcResponse)

    def handle(self, src: int, message: Any, now_ms: int) -> None:
        self.session.on_response(message.request_id, message.response, now_ms)

    def on_applied(self, entry: Entry, result: ApplyResult | None) -> None:
        pass  # an observer's image is its view; the session reads its applied offset

    def step(self, now_ms: int) -> None:
        node = self.node
        out = self.session.poll(now_ms, node.core.leader_id, node.image.applied_offset)
        if out is not None:
            node.send(out.to, ControllerRpcRequest(out.request_id, out.request, node.node_id))

    def next_deadline_ms(self) -> int | None:
        return self.session.next_deadline_ms()


class DiskClock(Protocol):
    """What the disk model needs from the run: a later call, and the world's after-step (ship
    the outbox, re-arm the timer) once a completed fsync has let the broker go on."""

    def call_at(self, at_ms: int, fn: Callable[..., None], *args: Any) -> None: ...

    def after(self, actor: Any) -> None: ...


class Broker(SimProcess):
    """One data-plane broker (see the module docstring)."""

    def __init__(
        self,
        node_id: int,
        config: ReplicaConfig,
        timing: BrokerTiming,
        checker: ReplicaChecker,
        find_controller: Callable[[int], int | None],
        raft: RaftSettings | None = None,
        disk: Disk | None = None,
        clock: DiskClock | None = None,
    ) -> None:
        self.node_id = node_id
        self.disk = disk if disk is not None else Disk(None, random.Random(0))
        if self.disk.is_modelled and clock is None:
            raise ValueError("a modelled disk needs the run's clock")
        self.clock = clock
        self.disk_generation = 0  # a completion of an older process start is ignored
        self.config = config
        self.raft_settings = raft
        self.timing = timing
        self.checker = checker
        self.find_controller = find_controller
        self.storage = SimStorage()
        self.hw_checkpoint = 0
        self.init_process()
        self.session: BrokerSession = new_session(node_id, 1, timing)
        self._forget()

    def _forget(self) -> None:
        """The process memory: gone with the process."""
        self.log: PartitionLog | None = None
        self.view: LocalReplicaLog | None = None
        self.core: ReplicaCore | None = None
        self.raft: RaftPartitionHost | None = None  # replication.mode=raft partitions
        self.raft_ports: SimRaftPorts | None = None  # its clock, disk, outbox, checker
        self.partition: Partition | None = None  # the last applied push's view of the partition
        self.next_report_ms = 0
        self.seed = 0
        self.fenced_epoch = -1
        self.applied_offset = -1
        self.pending: MetadataPush | None = None
        self.leader_epoch_seen = -1
        self.clients: dict[int, int] = {}  # a client request's id -> the client that sent it
        self.next_call_id = CALL_ID_BASE
        self.next_flush_ms = 0
        self.next_checkpoint_ms = 0
        self.fsync_until_ms: int | None = None  # an fsync in progress ends then
        self.held: list[Any] = []  # core inputs that arrived during it, in order

    @property
    def broker_epoch(self) -> int:
        return self.session.broker_epoch

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self, now_ms: int, seed: int = 0) -> None:
        """A process start: recover the log (HW from the checkpoint), a fresh session."""
        self._forget()
        self.process_started()
        self.seed = seed
        self.session = new_session(self.node_id, self.incarnation, self.timing)
        self._open_log()
        self.next_flush_ms = now_ms + FLUSH_INTERVAL_MS
        self.next_checkpoint_ms = now_ms + HW_CHECKPOINT_INTERVAL_MS
        self.step(now_ms)

    def _open_log(self) -> None:
        self.log = PartitionLog.open(self.storage, LOG_DIR, TOPIC, 0, LOG_CONFIG,
                                     high_watermark=self.hw_checkpoint)
        self.view = LocalReplicaLog(self.log)
        self.fenced_epoch = self.log.read_fenced_epoch()

    def stop(self) -> None:
        """Process kill (SIGKILL): the page cache survives, so nothing written is lost."""
        self.disk_generation += 1  # an fsync in progress never completes for this process
        self.process_stopped()
        self._forget()

    def crash(self, rng: random.Random | None) -> None:
        """Power loss: every byte not fsynced is gone (a random prefix kept with `rng`)."""
        self.checker.lost_tail()  # a lost tail may hold committed records
        self.stop()
        self.storage.crash(rng)

    def shutdown(self, now_ms: int) -> None:
        if self.raft_ports is not None:
            self.raft_ports.shutdown(now_ms)
        if self.log is not None:
            self.log.flush()

    def restart_replica(self, lose_unflushed: bool = False) -> None:
        """Rebuild the partition's replica from disk (log recovery, HW from the checkpoint)
        while the broker keeps its registration: how a ZooKeeper-era broker restart looked to
        the controller (KRaft re-registration takes the broker out of every ISR, KIP-841). Used
        by the KIP-101 scenarios; `lose_unflushed` also drops every unflushed byte."""
        if lose_unflushed:
            self.checker.lost_tail()
            self.storage.crash(None)
        self._open_log()
        self.core = None
        self.applied_offset = -1
        self.leader_epoch_seen = -1

    # -- inputs -----------------------------------------------------------------------------------

    def handle(self, src: int, message: Any, now_ms: int) -> None:
        match message:
            case ControllerRpcResponse():
                self._on_controller_response(message, now_ms)
            case MetadataPush():
                self._on_metadata(message, now_ms)
            case RaftEnvelope():
                if self.raft_ports is not None:  # not hosting yet: the sender retries
                    self.raft_ports.at(now_ms).on_envelope(message)
            case ProduceRequest() | FetchRequest() if self._hosts_raft(message):
                assert self.raft_ports is not None
                host = self.raft_ports.at(now_ms)
                r = host.replicas[(message.topic_id, message.partition)]
                if isinstance(message, ProduceRequest):
                    self.clients[message.request_id] = src
                    host.produce(r, message)
                else:
                    if message.replica_id < 0:
                        self.clients[message.request_id] = src
                    host.input(r, message)
            case ProduceRequest():
                self.clients[message.request_id] = src
                if self.core is None:
                    self.complete_produce(ProduceResponse(message.request_id,
                                                          Errors.NOT_LEADER_OR_FOLLOWER))
                else:
                    self._core_input(message, now_ms)
            case FetchRequest():
                if message.replica_id < 0:
                    self.clients[message.request_id] = src
                if self.core is None:
                    self.send_fetch_response(src if message.replica_id >= 0 else -1, FetchResponse(
                        message.topic_id, message.partition, Errors.NOT_LEADER_OR_FOLLOWER,
                        message.fetch_offset, message.request_id))
                else:
                    self._core_input(message, now_ms)
            case _:
                self._core_input(message, now_ms)
        self._end_raft_round(now_ms)
        self.step(now_ms)

    def _hosts_raft(self, message: ProduceRequest | FetchRequest) -> bool:
        """A client request for a raft partition hosted here (its core answers it)."""
        return self.raft is not None and (message.topic_id, message.partition) in self.raft.replicas

    def tick(self, now_ms: int) -> None:
        log = self.log
        if now_ms >= self.next_flush_ms:
            self.next_flush_ms = now_ms + FLUSH_INTERVAL_MS
            if log is not None:
                log.flush()
        if now_ms >= self.next_checkpoint_ms:
            self.next_checkpoint_ms = now_ms + HW_CHECKPOINT_INTERVAL_MS
            if log is not None:
                self.hw_checkpoint = log.high_watermark  # written atomically, fsynced
        core = self.core
        if core is not None and self.fsync_until_ms is None:
            deadline = core.next_deadline_ms()
            if deadline is not None and deadline <= now_ms:
                self.execute(core.tick(now_ms), now_ms)
        if self.raft_ports is not None:
            self.raft_ports.tick(now_ms)
        self._end_raft_round(now_ms)
        self.step(now_ms)

    def peer_unreachable(self, peer: int, now_ms: int) -> None:
        # A ReplicaCore's requests time out on their own (replica.socket.timeout.ms); a raft
        # partition's voters hear it (PeerUnreachable: a follower of `peer` pre-votes at once).
        if self.raft_ports is not None:
            self.raft_ports.at(now_ms).peer_unreachable(peer)
            self._end_raft_round(now_ms)

    def next_deadline_ms(self) -> int | None:
        deadlines = [self.next_flush_ms, self.next_checkpoint_ms]
        if self.raft_ports is not None:
            deadlines.append(self.next_report_ms)
            raft = self.raft_ports.next_deadline_ms()
            if raft is not None:
                deadlines.append(raft)
        session = self.session.next_deadline_ms()
        if session is not None:
            deadlines.append(session)
        if self.core is not None and self.fsync_until_ms is None:
            core = self.core.next_deadline_ms()
            if core is not None:
                deadlines.append(core)
        return min(deadlines)

    def step(self, now_ms: int) -> None:
        """Send what the session asks for, if it is due (to the controller we believe leads)."""
        deadline = self.session.next_deadline_ms()
        if deadline is None or deadline > now_ms:
            return
        out = self.session.poll(now_ms, self.find_controller(self.node_id),
                                max(self.applied_offset, 0))
        if out is not None:
            self.outbox.append(
                (out.to, ControllerRpcRequest(out.request_id, out.request, self.node_id))
            )

    def _on_controller_response(self, message: ControllerRpcResponse, now_ms: int) -> None:
        if message.request_id >= CALL_ID_BASE:
            if isinstance(message.response, AlterPartitionResponse):
                self._core_input(message.response, now_ms)
            return
        for t in self.session.on_response(message.request_id, message.response, now_ms):
            if t.event == "registered" and self.pending is not None:
                self._on_metadata(self.pending, now_ms)
            elif t.event == "registration_lost":
                self.core = None  # rebuilt with the new broker epoch after re-registering

    def _on_metadata(self, push: MetadataPush, now_ms: int) -> None:
        if push.offset <= self.applied_offset:
            return
        if self.broker_epoch < 0 or push.offset < self.broker_epoch:
            # Kafka's initial catch-up: act only on an image that holds this broker's own
            # registration; the network may deliver an older push after the registration answer.
            self.pending = push
            return
        self.applied_offset = push.offset
        update = push.update
        if update is None:
            return
        if push.replication_mode == REPLICATION_MODE_RAFT:
            self._on_raft_metadata(update.partition, now_ms)
            return
        if self.core is None:
            assert self.view is not None
            self.core = ReplicaCore(self.node_id, update.partition.topic_id, 0, self.view,
                                    self.config, broker_epoch=self.broker_epoch, topic=TOPIC,
                                    fenced_epoch=self.fenced_epoch)
        epoch = update.partition.leader_epoch
        self.checker.saw_leader_epoch(self.node_id, epoch, self.leader_epoch_seen)
        self.leader_epoch_seen = max(self.leader_epoch_seen, epoch)
        self._core_input(update, now_ms)

    # -- raft partitions ----------------------------------------------------------------------------

    def _on_raft_metadata(self, part: Partition, now_ms: int) -> None:
        """Host the raft partition once assigned here (its voters: its replicas, fixed at
        creation); the image only tells who the Raft group elected."""
        self.checker.saw_leader_epoch(self.node_id, part.leader_epoch, self.leader_epoch_seen)
        self.leader_epoch_seen = max(self.leader_epoch_seen, part.leader_epoch)
        self.partition = part
        if self.node_id not in part.replicas or self.log is None:
            return
        if self.raft_ports is None:
            assert self.raft_settings is not None, "a raft partition on a broker without settings"
            self.raft, self.raft_ports = self.raft_settings.host(self, self.checker,
                                                                 self.disk.fsync_ms)  # fmt: skip
            self.next_report_ms = now_ms
        host = self.raft_ports.at(now_ms)
        key = (part.topic_id, part.partition)
        if key not in host.replicas:
            assert self.raft_settings is not None
            host.add(key, part.replicas, self.log, seed=self.seed,
                     config=self.raft_settings.config, topic=TOPIC)

    def _end_raft_round(self, now_ms: int) -> None:
        """The raft host's end of round, then a leadership report if one is due."""
        ports = self.raft_ports
        if ports is None:
            return
        host = ports.at(now_ms)
        host.end_round()
        if (ports.became_leader or now_ms >= self.next_report_ms) and self.broker_epoch >= 0:
            ports.became_leader = False
            self.next_report_ms = now_ms + self.timing.heartbeat_interval_ms
            leaders = unrecorded_leaders(host, self.partition, now_ms)
            if leaders:
                self._call(ReportRaftLeadersRequest(self.node_id, self.broker_epoch, leaders))
        elif now_ms >= self.next_report_ms:
            self.next_report_ms = now_ms + self.timing.heartbeat_interval_ms

    def metadata_leader(self) -> int | None:
        """The partition's leader as this broker answers a Metadata request: its replica's view
        (ReplicaCore), or for a raft partition the image's unless the Raft group's is newer
        (a newer epoch, or the same one where the image names nobody). None: no replica here
        (the client asks another broker)."""
        if self.core is not None:
            return self.core.partition.leader if self.core.partition is not None else -1
        if self.raft is None or self.partition is None:
            return None
        return metadata_leader_of(self.raft, self.partition)

    def _core_input(self, message: Any, now_ms: int) -> None:
        if self.fsync_until_ms is not None:
            self.held.append(message)  # the append path is blocked on the fsync
        elif self.core is not None:
            self.execute(self.core.handle(message, now_ms), now_ms)

    def execute(self, effects: list[Effect], now_ms: int) -> None:
        """Run the core's effects with the shared executor (harness/drive/replica_effects.py),
        this broker being its env; with a modelled disk, up to the first append its policy
        fsyncs, the rest when that fsync completes (`_fsync_done`)."""
        assert self.view is not None
        disk = self.disk
        if not disk.is_modelled:
            execute_replica_effects(effects, self.view, self, self._on_high_watermark)
            return
        for i, effect in enumerate(effects):
            if disk.must_fsync(effect):
                assert isinstance(effect, AppendAsLeader | AppendAsFollower)
                head = [*effects[:i], replace(effect, flush=False)]
                execute_replica_effects(head, self.view, self, self._on_high_watermark)
                done_ms = now_ms + disk.fsync_ms(len(effect.records))
                self.fsync_until_ms = done_ms
                assert self.clock is not None
                self.clock.call_at(done_ms, self._fsync_done, self.disk_generation,
                                   effects[i + 1:])
                return
        # No fsync under this policy: appends go to the page cache only.
        plain = [replace(e, flush=False) if isinstance(e, AppendAsLeader | AppendAsFollower)
                 and e.flush else e for e in effects]
        execute_replica_effects(plain, self.view, self, self._on_high_watermark)

    def _fsync_done(self, generation: int, rest: list[Effect]) -> None:
        """The fsync started by `execute` completed: the bytes are durable; run the effects that
        waited for it, then the inputs held meanwhile."""
        if generation != self.disk_generation or not self.up or self.log is None:
            return
        assert self.clock is not None and self.fsync_until_ms is not None
        now_ms = self.fsync_until_ms
        if self.paused:
            # SIGSTOP: the disk finishes, the process does not go on until it is resumed.
            self.fsync_until_ms = now_ms + PAUSED_FSYNC_POLL_MS
            self.clock.call_at(self.fsync_until_ms, self._fsync_done, generation, rest)
            return
        self.log.flush()
        self.fsync_until_ms = None
        self.execute(rest, now_ms)
        while self.fsync_until_ms is None and self.held and self.core is not None:
            self.execute(self.core.handle(self.held.pop(0), now_ms), now_ms)
        self.clock.after(self)

    # -- the ReplicaEffectsEnv (messages queue in the outbox, in effect order) -------------------

    def _on_high_watermark(self, before: int, after: int) -> None:
        self.checker.on_high_watermark(self, before, after)

    def send_fetch(self, to: int, request: FetchRequest) -> None:
        self.outbox.append((to, request))

    def send_fetch_response(self, to: int, response: FetchResponse) -> None:
        dst = self.clients.pop(response.request_id, None) if to < 0 else to
        if dst is not None:
            self.outbox.append((dst, response))

    def send_alter_partition(self, request: AlterPartitionRequest) -> None:
        self._call(request)

    def send_replica_position(self, request: ReportReplicaPositionRequest) -> None:
        if request.leader_epoch > self.fenced_epoch:
            # Durable before the vote leaves (partition.replica.effects), as ReplicaManager does.
            assert self.log is not None
            self.log.write_fenced_epoch(request.leader_epoch)
            self.fenced_epoch = request.leader_epoch
        self._call(request)

    def send(self, to: int, message: Any) -> None:
        """A raft envelope onto the outbox (the RaftHostEnv)."""
        self.outbox.append((to, message))

    def complete_produce(self, response: ProduceResponse) -> None:
        dst = self.clients.pop(response.request_id, None)
        if dst is not None:
            self.outbox.append((dst, response))

    def leadership_changed(self, effect: LeadershipChanged) -> None:
        pass  # no broker state outside the core follows leadership in the simulator

    def _call(self, request: Any) -> None:
        """A controller request outside the session (best effort: the core re-sends)."""
        controller = self.find_controller(self.node_id)
        if controller is None:
            return
        self.next_call_id += 1
        self.outbox.append(
            (controller, ControllerRpcRequest(self.next_call_id, request, self.node_id))
        )
