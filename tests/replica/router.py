"""A tiny deterministic router for replica-core tests (not the simulator, harness/sim): explicit
virtual time, hand-delivered fetches, a controller stub that answers AlterPartition the way
Kafka's ReplicationControlManager does for the cases used here, and crashes that rebuild a core
from what its simulated disk kept (SimStorage.crash: unflushed bytes are lost).

Every log effect goes through LocalReplicaLog.execute, the adapter the drivers use. Every
message crosses quorum.codec (encode + decode), so the wire types are exercised too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from partition.log import LogConfig, PartitionLog, Record, SimStorage, encode_batch
from partition.replica import (
    AppendAsFollower,
    AppendAsLeader,
    CompleteProduce,
    Effect,
    FetchRequest,
    FetchResponse,
    IncrementLogStartOffset,
    LeadershipChanged,
    LocalReplicaLog,
    MetadataUpdated,
    ProduceRequest,
    ProduceResponse,
    ReplicaConfig,
    ReplicaCore,
    SendAlterPartition,
    SendFetch,
    SendFetchResponse,
    SendReplicaPosition,
    TruncateFully,
    TruncateTo,
    UpdateHighWatermark,
)
from quorum import codec
from quorum.controller.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerState,
    ReportReplicaPositionRequest,
)
from quorum.metadata.errors import Errors
from quorum.metadata.records import Partition

TOPIC_ID = "topic-id-0"
T0_MS = 1_000_000  # far from 0, so "0 = never caught up" behaves as on a real clock


def batch(
    *values: str, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1
) -> bytes:
    return encode_batch([Record(v.encode()) for v in values], producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=base_sequence)  # fmt: skip


def answers(effects: list[Effect]) -> list[FetchResponse]:
    """The FetchResponses among `effects`, in order."""
    return [e.response for e in effects if isinstance(e, SendFetchResponse)]


def wire(message: Any) -> Any:
    """Round-trip through the codec, as the transport would."""
    return codec.decode(codec.encode(message))


@dataclass
class Node:
    node_id: int
    storage: SimStorage
    log: PartitionLog
    view: LocalReplicaLog
    core: ReplicaCore
    outbox: list[FetchRequest] = field(default_factory=list)  # fetches not yet delivered
    up: bool = True

    def values(self) -> list[str]:
        return [
            (r.value or b"").decode()
            for r in self.log.read_records(self.log.log_start_offset, 1 << 24)
        ]

    def entries(self) -> list[tuple[int, int, bytes]]:
        """(offset, epoch, value) of every record: what 'no divergence' compares."""
        out = []
        for h in self.log.batch_headers(0):
            data = self.log.read(h.base_offset, 1)
            from partition.log.batch import decode_records, read_header

            for r in decode_records(data, read_header(data)):
                out.append((r.offset, h.partition_leader_epoch, r.value or b""))
        return out


class Cluster:
    def __init__(self, replicas: tuple[int, ...] = (1, 2, 3), config: ReplicaConfig | None = None,
                 leader: int | None = None, isr: tuple[int, ...] | None = None,
                 auto_alter: bool = True) -> None:  # fmt: skip
        self.config = config or ReplicaConfig(replica_fetch_wait_max_ms=0)
        self.now_ms = T0_MS
        self.nodes: dict[int, Node] = {}
        self.broker_epochs = {r: 100 + r for r in replicas}
        self.unfenced: set[int] = set(replicas)
        self.partition = Partition(TOPIC_ID, 0, replicas, isr if isr is not None else replicas,
                                   leader if leader is not None else replicas[0], 0, 0)  # fmt: skip
        self.responses: dict[int, ProduceResponse] = {}
        self.consumer_responses: list[FetchResponse] = []
        self.alter_inbox: list[AlterPartitionRequest] = []
        self.position_reports: list[ReportReplicaPositionRequest] = []  # quorum mode, fenced
        self.auto_alter = auto_alter
        self.effects: dict[int, list[Effect]] = {r: [] for r in replicas}
        self.next_request_id = 1
        for r in replicas:
            storage = SimStorage()
            log = PartitionLog.open(storage, "/data", "t", 0, LogConfig())
            self.nodes[r] = self._make_node(r, storage, log)
        self.publish()

    def _make_node(self, r: int, storage: SimStorage, log: PartitionLog) -> Node:
        view = LocalReplicaLog(log)
        core = ReplicaCore(r, TOPIC_ID, 0, view, self.config, broker_epoch=self.broker_epochs[r],
                           topic="t", fenced_epoch=log.read_fenced_epoch())  # fmt: skip
        return Node(r, storage, log, view, core)

    # ----------------------------------------------------------------------------- plumbing

    @property
    def leader(self) -> Node:
        return self.nodes[self.partition.leader]

    def execute(self, node_id: int, effects: list[Effect]) -> None:
        node = self.nodes[node_id]
        self.effects[node_id] += effects
        for e in effects:
            match e:
                case (
                    AppendAsLeader()
                    | AppendAsFollower()
                    | TruncateTo()
                    | TruncateFully()
                    | UpdateHighWatermark()
                    | IncrementLogStartOffset()
                ):
                    node.view.execute(e)
                case SendFetch(to, request):
                    node.outbox = [wire(request)]  # one fetch in flight: a resend replaces it
                case SendFetchResponse(to, response):
                    if to < 0:
                        self.consumer_responses.append(wire(response))
                    elif self.nodes[to].up:
                        self.step(to, wire(response))
                case SendAlterPartition(request):
                    self.alter_inbox.append(wire(request))
                case SendReplicaPosition(request):
                    if request.leader_epoch > node.log.read_fenced_epoch():
                        node.log.write_fenced_epoch(request.leader_epoch)  # as the node does
                    self.position_reports.append(wire(request))
                case CompleteProduce(response):
                    self.responses[response.request_id] = wire(response)
                case LeadershipChanged():
                    pass
        if self.auto_alter and self.alter_inbox:
            # The controller answers after every effect of this call ran (never re-entering a
            # core in the middle of its effect list: the ordering contract).
            self.process_alter_partition()

    def step(self, node_id: int, message: Any) -> list[Effect]:
        node = self.nodes[node_id]
        effects = node.core.handle(message, self.now_ms)
        self.execute(node_id, effects)
        return effects

    def tick(self, node_id: int) -> None:
        if self.nodes[node_id].up:
            self.execute(node_id, self.nodes[node_id].core.tick(self.now_ms))

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        for r in self.nodes:
            self.tick(r)

    def fetch(self, follower: int, *, deliver_response: bool = True) -> FetchResponse | None:
        """Deliver `follower`'s oldest queued fetch to its leader (ticking it first if none is
        queued) and, unless told not to, the response back."""
        node = self.nodes[follower]
        if not node.outbox:
            self.tick(follower)
        if not node.outbox:
            return None
        request = node.outbox.pop(0)
        leader = self.partition.leader
        if not self.nodes[leader].up:
            return None
        effects = self.nodes[leader].core.handle(request, self.now_ms)
        responses = [e for e in effects if isinstance(e, SendFetchResponse) and e.to == follower]
        rest = [e for e in effects if not (isinstance(e, SendFetchResponse) and e.to == follower)]
        self.execute(leader, rest)
        for e in responses:
            if deliver_response:
                self.step(follower, wire(e.response))
        return responses[0].response if responses else None

    def fetch_until_idle(self, follower: int, limit: int = 50) -> None:
        for _ in range(limit):
            resp = self.fetch(follower)
            if resp is None or (
                not resp.records
                and resp.diverging_epoch is None
                and resp.error is Errors.NONE
                and self.nodes[follower].core.high_watermark >= resp.high_watermark
            ):
                return  # fmt: skip

    def produce(self, *values: str, acks: int = -1, timeout_ms: int = 30_000, records: bytes | None = None,
                to: int | None = None) -> int:  # fmt: skip
        request_id = self.next_request_id
        self.next_request_id += 1
        req = ProduceRequest(TOPIC_ID, 0, request_id, records if records is not None else batch(*values),
                             acks, timeout_ms)  # fmt: skip
        self.step(to if to is not None else self.partition.leader, wire(req))
        return request_id

    def consume(
        self, offset: int, node: int | None = None, max_wait_ms: int = 0, *,
        follower_read: bool = False, epoch: int = -1,
    ) -> FetchResponse | None:
        before = len(self.consumer_responses)
        req = FetchRequest(TOPIC_ID, 0, -1, offset, max_wait_ms=max_wait_ms, request_id=offset,
                           follower_read=follower_read, current_leader_epoch=epoch)
        self.step(node if node is not None else self.partition.leader, wire(req))
        return self.consumer_responses[-1] if len(self.consumer_responses) > before else None

    # --------------------------------------------------------------------------- controller

    def metadata(self) -> MetadataUpdated:
        eligible = tuple(BrokerState(b, self.broker_epochs[b]) for b in sorted(self.unfenced))
        return MetadataUpdated(self.partition, eligible)

    def publish(self, nodes: tuple[int, ...] | None = None) -> None:
        for r in nodes if nodes is not None else tuple(self.nodes):
            if self.nodes[r].up:
                self.step(r, wire(self.metadata()))

    def fence(self, nodes: tuple[int, ...] | None = None) -> None:
        """Quorum mode's fencing change: leader -1 at a new leader epoch, published to `nodes`
        (default all; leave the old leader out to model one cut off from the controller)."""
        p = self.partition
        self.partition = dataclasses.replace(p, leader=-1, leader_epoch=p.leader_epoch + 1,
                                             partition_epoch=p.partition_epoch + 1)  # fmt: skip
        self.publish(nodes)

    def elect(self, leader: int, isr: tuple[int, ...] | None = None, publish: bool = True) -> None:
        p = self.partition
        self.partition = dataclasses.replace(p, leader=leader, isr=isr if isr is not None else p.isr,
                                             leader_epoch=p.leader_epoch + 1,
                                             partition_epoch=p.partition_epoch + 1)  # fmt: skip
        if publish:
            self.publish()

    def process_alter_partition(
        self, publish_followers: bool = True
    ) -> list[AlterPartitionResponse]:
        """Answer queued AlterPartition requests like the controller (the checks used here)."""
        answers = []
        for _ in range(10):  # bounded: an answer may trigger the next proposal
            if not self.alter_inbox:
                break
            req = self.alter_inbox.pop(0)
            p = self.partition
            error = Errors.NONE
            if req.leader_epoch < p.leader_epoch:
                error = Errors.FENCED_LEADER_EPOCH
            elif req.partition_epoch < p.partition_epoch:
                error = Errors.INVALID_UPDATE_VERSION
            elif any(m.broker_id not in self.unfenced or m.broker_epoch not in (-1, self.broker_epochs[m.broker_id])
                     for m in req.new_isr_with_epochs):  # fmt: skip
                error = Errors.INELIGIBLE_REPLICA
            if error is Errors.NONE:
                isr = tuple(m.broker_id for m in req.new_isr_with_epochs)
                self.partition = dataclasses.replace(p, isr=isr, partition_epoch=p.partition_epoch + 1,
                                                     leader_recovery_state=req.leader_recovery_state)  # fmt: skip
                resp = AlterPartitionResponse(Errors.NONE, TOPIC_ID, 0, self.partition.leader,
                                              self.partition.leader_epoch, isr, self.partition.partition_epoch,
                                              req.leader_recovery_state)  # fmt: skip
            else:
                resp = AlterPartitionResponse(error, TOPIC_ID, 0)
            answers.append(resp)
            if self.nodes[req.broker_id].up:
                self.step(req.broker_id, wire(resp))
            if error is Errors.NONE and publish_followers:
                self.publish(tuple(r for r in self.nodes if r != req.broker_id))
        return answers

    # ------------------------------------------------------------------------------ crashes

    def crash(self, node_id: int) -> None:
        """Power loss: everything not fsynced is gone; the node stays down until `restart`."""
        node = self.nodes[node_id]
        node.up = False
        node.outbox.clear()
        node.storage.crash()

    def restart(self, node_id: int, high_watermark: int, publish: bool = True) -> Node:
        """Rebuild the log from the durable bytes (recovery) and a fresh core. `high_watermark`
        is what its replication-offset-checkpoint held."""
        old = self.nodes[node_id]
        log = PartitionLog.open(
            old.storage, "/data", "t", 0, LogConfig(), high_watermark=high_watermark
        )
        node = self.nodes[node_id] = self._make_node(node_id, old.storage, log)
        if publish:
            self.publish((node_id,))
        return node

    def clean_restart(self, node_id: int, publish: bool = True) -> Node:
        """Flush, checkpoint the HW, stop, and start again (a controlled restart)."""
        node = self.nodes[node_id]
        node.log.flush()
        hw = node.log.high_watermark
        self.crash(node_id)
        return self.restart(node_id, hw, publish)
