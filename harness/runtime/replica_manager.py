"""The broker's replica manager: hosts this broker's data partition replicas (Kafka's
ReplicaManager + ReplicaFetcherManager + the produce/fetch purgatories), driving one sans-IO
ReplicaCore per partition (partition/replica) exactly as runtime.py drives the Raft core:
input -> `core.handle/tick(..., now_ms)` -> `execute_replica_effects` -> re-arm that core's ONE
timer at `core.next_deadline_ms()`.

What it does:
- On every applied metadata change (`on_metadata`), creates a replica for each partition assigned
  to this broker (logs opened through partition.log.LogManager under `<node dir>/data`, so a
  truncation rewrites the checkpoints) and feeds MetadataUpdated to every replica whose Partition
  record or whose set of eligible brokers (registered, unfenced, not shutting down: every fence and
  unfence) changed. Become leader / become follower with the right truncation is the core's job.
- Follower fetches: every SendFetch queued in one loop iteration for the same source broker goes
  out as ONE ReplicaFetchBatch frame (the fetcher thread per source broker, batching partitions);
  the answers come back batched the same way. Long polls (replica.fetch.wait.max.ms) are parked by
  the leader's core (DelayedFetch), woken when its log or HW moves.
- Produce: acks=all requests wait in the core (its purgatory) until the HW passes them; the core's
  CompleteProduce resolves the caller by the broker-wide request id. Consumer fetches likewise
  (SendFetchResponse to -1, routed by request id).
- AlterPartition goes to the active controller over the node transport (broker.py), the answer is
  fed back to the core on a later loop iteration. Quorum-mode position reports (the replica's vote
  in a fencing election, partition/replica/quorum_mode.py) go the same way; the core re-sends
  while fenced, but a report the active controller accepted is not sent again unchanged (until
  the controller changes or POSITION_REPORT_REFRESH_MS), and one in flight is not duplicated.
- Metadata reaches the replicas only after the initial catch-up: the image must have applied
  this broker's own RegisterBroker record (`_caught_up`), so a restart never acts on a snapshot
  older than a quorum-mode fence. The quorum-mode epoch marker is the core's own
  effect; ISR mode needs none (docs/replication.md, "HW rules per mode").
- Topic configs reach the logs (harness/runtime/log_configs.py): every hosted log gets its topic's
  LogConfig (broker defaults < topic overrides) at creation and again whenever the image changes
  (dynamic topic config); the core's ReplicaConfig likewise.
- Every replica.high.watermark.checkpoint.interval.ms (5000) the HW/recovery/log-start checkpoints
  are written and logs flushed per flush.ms; every log.retention.check.interval.ms (300000)
  retention is applied (retention.ms against the wall clock, retention.bytes).
- A deleted topic's logs are renamed to `<topic>-<partition>.<uuid>-delete` at once and removed
  after log.segment.delete.delay.ms (60000), also when left over from before a restart
  (LogManager.open schedules them).
- Topic ids (KIP-516): every hosted log records its topic id (partition.metadata); a directory
  holding another topic's id (deleted and re-created under the same name while this broker was
  down) is renamed aside as deleted and the replica starts from a fresh log (LogManager).

Invariants:
- A core is never re-entered: inputs that arrive while its effects run are queued and fed after
  (a harness/loop Serial per replica, whose drain ends by re-arming the core's Timer).
- Deferred work (the fetch batches' flush, the core timers, housekeeping, retention, deletions)
  runs through harness/loop with the node's crash as on_error, as the cores' steps do.
- The env callbacks (send_*, complete_produce) only queue work, never step a core.
- Request ids are unique per broker process, so a late answer can never reach another caller.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import structlog

from harness.drive.raft_host import RaftPartitionHost
from harness.drive.replica_effects import execute_replica_effects
from harness.loop import LoopTime, Serial, Soon, Timer
from harness.runtime.context import BrokerLink, NodeContext
from harness.runtime.file_storage import BufferedFileStorage, FileStorage
from harness.runtime.log_configs import TopicLogConfigs
from harness.runtime.raft_leadership import RaftLeadership
from harness.runtime.raft_partitions import (
    host_partition,
    partition_config,
    raft_partitions,
    receive_envelope,
    status_row,
)
from partition.log.log import PartitionLog
from partition.log.manager import LogManager
from partition.raft import RaftEnvelope
from partition.raft.election_states import ELECTION_STATES_FILE, ElectionStates
from partition.replica import (
    ACKS_NONE,
    CONSUMER_REPLICA_ID,
    FetchRequest,
    FetchResponse,
    LeadershipChanged,
    LocalReplicaLog,
    MetadataUpdated,
    ProduceRequest,
    ProduceResponse,
    ReplicaConfig,
    ReplicaCore,
    ReplicaInput,
)
from quorum import codec
from quorum.controller.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerState,
    ReportReplicaPositionRequest,
    ReportReplicaPositionResponse,
)
from quorum.metadata.configs import INTERNAL_TOPICS, REPLICATION_MODE, REPLICATION_MODE_RAFT
from quorum.metadata.errors import Errors
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import NO_LEADER, Partition

log = structlog.get_logger()

# Quorum mode: an accepted position report is sent again after this long even if nothing
# changed (a controller failover this broker has not noticed yet), not every report interval.
POSITION_REPORT_REFRESH_MS = 10_000

ProduceCallback = Callable[[ProduceResponse], None]
FetchCallback = Callable[[FetchResponse], None]


@codec.register("node.ReplicaFetchBatch")
@dataclass(frozen=True, slots=True)
class ReplicaFetchBatch:
    """The follower fetches of one broker to one leader broker, sent as one frame."""

    requests: tuple[FetchRequest, ...]


@codec.register("node.ReplicaFetchBatchResponse")
@dataclass(frozen=True, slots=True)
class ReplicaFetchBatchResponse:
    responses: tuple[FetchResponse, ...]


@dataclass(frozen=True, slots=True)
class OffsetsView:
    """What ListOffsets reads of a hosted partition (harness/kafka), whatever its mode."""

    is_leader: bool
    leader_epoch: int
    log_start_offset: int
    high_watermark: int
    log: PartitionLog


@dataclass(slots=True)
class _SentReport:
    """The last quorum-mode position report of one partition (send_replica_position)."""

    request: ReportReplicaPositionRequest
    controller: tuple[int | None, int]  # (active controller id, metadata quorum epoch)
    in_flight: bool = True
    accepted_ms: int | None = None  # answered NONE at this time


@dataclass(slots=True)
class HostedReplica:
    topic: str
    topic_id: str
    partition: int
    core: ReplicaCore
    log: LocalReplicaLog
    last_partition: Partition | None = None
    last_eligible: tuple[BrokerState, ...] = ()
    config_overrides: dict[str, str] = field(default_factory=dict)  # the topic's, last applied
    fenced_epoch: int = -1  # quorum mode: the stored fenced epoch (SendReplicaPosition)
    # The core's inputs (None: a tick), one at a time, and its one timer (ReplicaManager._create).
    inputs: Serial[ReplicaInput | None] = field(init=False)
    timer: Timer = field(init=False)


class ReplicaManager:
    """All data replicas of one broker process, on the running loop."""

    def __init__(self, node: NodeContext, broker: BrokerLink) -> None:
        self.node = node
        self.broker = broker
        self.loop = node.loop
        self.broker_id = node.node_id
        self.data_dir = Path(node.config.metadata_log_dir) / "data"
        c = node.config
        # kraftlab.log.unflushed.in.process: appends stay in memory until flushed (crash tests).
        storage = BufferedFileStorage() if c.unflushed_in_process else FileStorage()
        self.topic_logs = TopicLogConfigs(c)  # broker log defaults (log.segment.bytes, ...)
        self.log_manager = LogManager.open(
            storage, str(self.data_dir), self.topic_logs.log_config({}), now_ms=node.now_ms(),
            file_delete_delay_ms=c.log_segment_delete_delay_ms)
        self.replicas: dict[tuple[str, int], HostedReplica] = {}
        self.by_name: dict[tuple[str, int], HostedReplica] = {}
        self._produce_waiters: dict[int, ProduceCallback] = {}
        self._fetch_waiters: dict[int, FetchCallback] = {}
        self._next_request_id = 1
        self._fetch_out: dict[int, list[FetchRequest]] = {}
        self._fetch_resp_out: dict[int, list[FetchResponse]] = {}
        self._flush_soon = Soon(self.loop, self._flush, on_error=node.crash)
        self._eligible: tuple[BrokerState, ...] = ()
        self._known_peers: dict[int, tuple[str, int]] = {}
        loop_time = LoopTime(self.loop)  # periodic work follows real time, not the skewed clock
        self._housekeeping = Timer(loop_time, self._on_housekeeping, on_error=node.crash)
        self._retention_timer = Timer(loop_time, self._on_retention, on_error=node.crash)
        self._delete_timer = Timer(node.clock, self._on_deletions, on_error=node.crash)
        self._closed = False
        self._published = False  # the image reached our registration (`_caught_up`)
        self._strays_checked = False  # `_delete_strays` ran (once, on the first caught-up image)
        # Producer ids handed out from blocks the controller allocates (KIP-730).
        self._pid_next = 0
        self._pid_end = 0
        self._pid_lock = asyncio.Lock()
        self.produced_batches = 0
        self.fetch_frames_sent = 0
        self.fetch_requests_sent = 0
        self._reports: dict[tuple[str, int], _SentReport] = {}
        self.position_reports_sent = 0
        # replication.mode=raft partitions: their own driver and leadership reports.
        self.leadership = RaftLeadership(node, broker)
        states = ElectionStates(storage, str(self.data_dir / ELECTION_STATES_FILE))
        self.raft: RaftPartitionHost = raft_partitions(node, self, self.leadership, states)
        self.leadership.start(self.raft)
        self._arm_housekeeping()
        self._arm_retention()
        self._arm_deletions()

    # --- config -------------------------------------------------------------------------------

    def _replica_config(self, image: MetadataImage, topic: str) -> ReplicaConfig:
        c = self.node.config
        return ReplicaConfig.from_topic_configs(
            self.topic_logs.effective(image.topic_config_overrides(topic)),
            replica_lag_time_max_ms=c.replica_lag_time_max_ms,
            replica_fetch_wait_max_ms=c.replica_fetch_wait_max_ms,
            replica_socket_timeout_ms=c.replica_socket_timeout_ms,
            replica_fetch_backoff_ms=c.replica_fetch_backoff_ms,
        )

    # --- metadata -----------------------------------------------------------------------------

    def on_metadata(self, image: MetadataImage) -> None:
        """Sync hosted replicas with the image (called after every applied batch of records)."""
        if self._closed or not self.broker.session.registered:
            return  # act on assignments only once registered (the broker epoch is known)
        if not self._caught_up(image):
            return
        self._learn_peers(image)
        eligible = tuple(BrokerState(b.broker_id, b.broker_epoch) for b in image.brokers()
                         if image.is_broker_usable(b.broker_id))  # fmt: skip
        broker_epoch = self.broker.broker_epoch
        assigned = image.partitions_hosted_by(self.broker_id)
        if not self._strays_checked:
            self._strays_checked = True
            self._delete_strays(image, {(topic.name, part.partition) for topic, part in assigned})
        overrides_of: dict[str, dict[str, str]] = {}  # topic configs, read once per topic
        hosted = {(topic.topic_id, part.partition) for topic, part in assigned}
        # Removals first: a topic deleted and created again under the same name must not find
        # the old log still open (the new replica gets a fresh directory).
        for key in [k for k in self.replicas if k not in hosted]:
            self._remove(image, self.replicas[key])
        for key in [k for k in self.raft.replicas if k not in hosted]:
            self._remove_raft(image, key)
        raft_topics: dict[str, bool] = {}
        new_raft: list[tuple[str, str, Partition, PartitionLog]] = []
        for topic, part in assigned:
            key = (topic.topic_id, part.partition)
            if raft_topics.setdefault(topic.name, self._is_raft(image, topic.name)):
                plog = self._sync_raft(image, topic.name, topic.topic_id, part, overrides_of)
                if plog is not None:
                    new_raft.append((topic.name, topic.topic_id, part, plog))
                continue
            r = self.replicas.get(key)
            if r is None:
                r = self._create(image, topic.name, topic.topic_id, part.partition)
            else:
                overrides = overrides_of.get(topic.name)
                if overrides is None:
                    overrides = overrides_of[topic.name] = image.topic_config_overrides(topic.name)
                if overrides != r.config_overrides:
                    self._apply_topic_configs(image, r, overrides)
            r.core.broker_epoch = broker_epoch  # KIP-903: fetches and AlterPartition carry it
            if part != r.last_partition or eligible != r.last_eligible:
                r.last_partition, r.last_eligible = part, eligible
                self._step(r, MetadataUpdated(part, eligible))
        # The cores of new raft partitions start together, after every log was opened (a
        # thousand logs take seconds): their election timers all start from now.
        for name, topic_id, part, plog in new_raft:
            new = host_partition(self.raft, self.node, name, topic_id, part.partition,
                                 part.replicas, plog, self.topic_logs.effective(overrides_of[name]))
            new.config_overrides = overrides_of[name]

    @staticmethod
    def _is_raft(image: MetadataImage, topic: str) -> bool:
        return image.topic_configs(topic).get(REPLICATION_MODE) == REPLICATION_MODE_RAFT

    def _sync_raft(self, image: MetadataImage, topic: str, topic_id: str, part: Partition,
                   overrides_of: dict[str, dict[str, str]]) -> PartitionLog | None:  # fmt: skip
        """A raft partition assigned here: its log opened if it is new (the caller hosts it,
        its voters being its replicas, fixed at creation), or a changed topic config applied."""
        overrides = overrides_of.get(topic)
        if overrides is None:
            overrides = overrides_of[topic] = image.topic_config_overrides(topic)
        r = self.raft.replicas.get((topic_id, part.partition))
        if r is None:
            return self._open_log(image, topic, topic_id, part.partition)
        if overrides != r.config_overrides:
            r.config_overrides = overrides
            self.log_manager.set_config(topic, part.partition, self.topic_logs.log_config(overrides))
            # Dynamic topic config (max.message.bytes); the Raft timing is the broker's.
            r.core.config = partition_config(self.node, self.topic_logs.effective(overrides))
        return None

    def _caught_up(self, image: MetadataImage) -> bool:
        """Kafka's initial catch-up (BrokerServer publishes metadata to the ReplicaManager only
        once the broker's image reached its own registration): the image must have applied our
        RegisterBroker record (its offset is the broker epoch, KIP-631). Before that it may be a
        snapshot older than a quorum-mode fence, and acting on it would let this replica follow
        (and help commit for) a leader that was already fenced."""
        broker_epoch = self.broker.broker_epoch
        me = image.broker(self.broker_id)
        caught_up = (image.applied_offset >= broker_epoch and me is not None
                     and me.broker_epoch == broker_epoch)  # fmt: skip
        if caught_up != self._published:
            self._published = caught_up
            log.info("replica.metadata_caught_up" if caught_up else "replica.metadata_behind",
                     broker_epoch=broker_epoch, metadata_offset=image.applied_offset)  # fmt: skip
        return caught_up

    def _delete_strays(self, image: MetadataImage, assigned: set[tuple[str, int]]) -> None:
        """Logs opened at start whose topic id the caught-up image does not know: their topic
        was deleted while this broker was down (topic ids are never reused, KIP-516), so they
        are deleted as the topic's logs would have been (Kafka's stray-log detection). A log
        with no recorded id (older layout) or of an assigned partition is left alone: the
        latter goes through LogManager.get_or_create's topic id check."""
        for (topic, partition), plog in list(self.log_manager.logs.items()):
            if ((topic, partition) in assigned or plog.topic_id is None
                    or image.topic_by_id(plog.topic_id) is not None):  # fmt: skip
                continue
            self.log_manager.delete_log(topic, partition, uuid.uuid4().hex, self.node.now_ms())
            log.info("replica.stray_log_deleted", topic=topic, partition=partition,
                     topic_id=plog.topic_id)  # fmt: skip
            self._arm_deletions()

    def _learn_peers(self, image: MetadataImage) -> None:
        for b in image.brokers():
            endpoint = b.endpoint("rpc")
            if b.broker_id == self.broker_id or endpoint is None:
                continue
            address = (endpoint.host, endpoint.port)
            if self._known_peers.get(b.broker_id) != address:
                self._known_peers[b.broker_id] = address
                self.node.transport.learn_peer(b.broker_id, list(address))

    def _apply_topic_configs(self, image: MetadataImage, r: HostedReplica,
                             overrides: dict[str, str]) -> None:  # fmt: skip
        """Dynamic topic config: a changed config applies to the open log and the core."""
        r.config_overrides = overrides
        self.log_manager.set_config(r.topic, r.partition, self.topic_logs.log_config(overrides))
        config = self._replica_config(image, r.topic)
        if config != r.core.config:
            r.core.config = config
            log.info("replica.config_changed", topic=r.topic, partition=r.partition)

    def _open_log(self, image: MetadataImage, topic: str, topic_id: str,
                  partition: int) -> PartitionLog:  # fmt: skip
        log_config = self.topic_logs.log_config(image.topic_config_overrides(topic))
        # KIP-516: a directory left by a deleted topic of the same name (another topic id in its
        # partition.metadata) is renamed aside as deleted and a fresh log created; its epochs and
        # quorum-fenced-epoch-checkpoint would otherwise wedge the new topic's replica.
        pending = len(self.log_manager.pending_deletes)
        plog = self.log_manager.get_or_create(topic, partition, log_config, topic_id=topic_id,
                                              now_ms=self.node.now_ms())  # fmt: skip
        if len(self.log_manager.pending_deletes) != pending:
            self._arm_deletions()
        self.log_manager.set_config(topic, partition, log_config)  # opened at start: defaults
        return plog

    def _create(self, image: MetadataImage, topic: str, topic_id: str, partition: int) -> HostedReplica:
        plog = self._open_log(image, topic, topic_id, partition)
        local = LocalReplicaLog(plog)
        fenced_epoch = plog.read_fenced_epoch()
        core = ReplicaCore(self.broker_id, topic_id, partition, local,
                           self._replica_config(image, topic),
                           broker_epoch=self.broker.broker_epoch, topic=topic,
                           fenced_epoch=fenced_epoch)  # fmt: skip
        r = HostedReplica(topic, topic_id, partition, core, local,
                          config_overrides=image.topic_config_overrides(topic),
                          fenced_epoch=fenced_epoch)  # fmt: skip
        crash = self.node.crash
        r.inputs = Serial(partial(self._handle, r), on_error=crash, after=partial(self._arm, r))
        r.timer = Timer(self.node.clock, partial(self._on_timer, r), on_error=crash)
        self.replicas[(topic_id, partition)] = r
        self.by_name[(topic, partition)] = r
        log.info("replica.created", topic=topic, partition=partition,
                 log_end_offset=plog.log_end_offset, high_watermark=plog.high_watermark)
        return r

    def _remove(self, image: MetadataImage, r: HostedReplica) -> None:
        part = image.partition(r.topic_id, r.partition)
        if part is not None:  # reassigned away: the core goes offline (fails its waiters)
            self._step(r, MetadataUpdated(part, r.last_eligible))
        r.timer.cancel()
        del self.replicas[(r.topic_id, r.partition)]
        self._reports.pop((r.topic_id, r.partition), None)
        self.by_name.pop((r.topic, r.partition), None)
        self._drop_log(r.topic, r.partition, deleted=part is None)

    def _remove_raft(self, image: MetadataImage, key: tuple[str, int]) -> None:
        deleted = image.partition(*key) is None
        r = self.raft.remove(key, deleted)
        if r is not None:
            log.info("raft_partition.removed", topic=r.topic, partition=r.partition)
            self._drop_log(r.topic, r.partition, deleted)

    def _drop_log(self, topic: str, partition: int, deleted: bool) -> None:
        if deleted:
            # The topic is gone: rename its log aside at once and remove the files after
            # log.segment.delete.delay.ms, as Kafka's LogManager.asyncDelete.
            self.log_manager.delete_log(topic, partition, uuid.uuid4().hex, self.node.now_ms())
            self._arm_deletions()
        else:
            plog = self.log_manager.logs.pop((topic, partition), None)
            if plog is not None:
                plog.flush()
                plog.close()
        log.info("replica.removed", topic=topic, partition=partition, topic_deleted=deleted)

    # --- driving cores --------------------------------------------------------------------------

    def _step(self, r: HostedReplica, message: ReplicaInput | None) -> None:
        """Feed one input (None: a tick) and run its effects; queued if the core is busy. An
        exception (an InvariantViolation or a bug) crashes the node, as in node.py."""
        r.inputs.submit(message)

    def _handle(self, r: HostedReplica, message: ReplicaInput | None) -> None:
        now_ms = self.node.now_ms()
        core = r.core
        effects = core.tick(now_ms) if message is None else core.handle(message, now_ms)
        if effects:
            execute_replica_effects(effects, r.log, self)

    def _arm(self, r: HostedReplica) -> None:
        r.timer.set(r.core.next_deadline_ms())

    def _on_timer(self, r: HostedReplica) -> None:
        if (r.topic_id, r.partition) in self.replicas:
            self._step(r, None)

    def _request_id(self) -> int:
        self._next_request_id += 1
        return self._next_request_id

    # --- the ReplicaEffectsEnv ------------------------------------------------------------------

    def send_fetch(self, to: int, request: FetchRequest) -> None:
        self._fetch_out.setdefault(to, []).append(request)
        self._schedule_flush()

    def send_fetch_response(self, to: int, response: FetchResponse) -> None:
        if to == CONSUMER_REPLICA_ID:
            callback = self._fetch_waiters.pop(response.request_id, None)
            if callback is not None:
                callback(response)
            return
        self._fetch_resp_out.setdefault(to, []).append(response)
        self._schedule_flush()

    def send_alter_partition(self, request: AlterPartitionRequest) -> None:
        key = (request.topic_id, request.partition)

        def answered(response: Any) -> None:
            r = self.replicas.get(key)
            if r is None:
                return
            if not isinstance(response, AlterPartitionResponse):
                response = AlterPartitionResponse(Errors.REQUEST_TIMED_OUT, *key)
            self._step(r, response)

        self.broker.send_controller(request, answered)

    def complete_produce(self, response: ProduceResponse) -> None:
        callback = self._produce_waiters.pop(response.request_id, None)
        if callback is not None:
            callback(response)

    def send_replica_position(self, request: ReportReplicaPositionRequest) -> None:
        """Best effort: the core re-sends while it stays fenced (every
        position_report_interval_ms). Sent again only if it differs from the last one, or the
        active controller changed (a new one has no reports: they live in its memory), or none
        is in flight and the last was not accepted, or the accepted one is older than
        POSITION_REPORT_REFRESH_MS (a failover this broker did not notice)."""
        key = (request.topic_id, request.partition)
        r = self.replicas.get(key)
        if r is not None and request.leader_epoch > r.fenced_epoch:
            # Durable before the vote leaves: after a restart the core refuses partition state
            # of an earlier epoch (defence in depth behind the initial catch-up).
            r.log.log.write_fenced_epoch(request.leader_epoch)
            r.fenced_epoch = request.leader_epoch
        controller = (self.node.leader_id, self.node.epoch)
        now_ms = self.node.now_ms()
        last = self._reports.get(key)
        if last is not None and last.request == request and last.controller == controller and (
            last.in_flight
            or (last.accepted_ms is not None
                and now_ms - last.accepted_ms < POSITION_REPORT_REFRESH_MS)
        ):  # fmt: skip
            return
        sent = self._reports[key] = _SentReport(request, controller)
        self.position_reports_sent += 1

        def answered(response: Any) -> None:
            if self._reports.get(key) is not sent:
                return
            sent.in_flight = False
            if isinstance(response, ReportReplicaPositionResponse) and response.error is Errors.NONE:
                sent.accepted_ms = self.node.now_ms()

        self.broker.send_controller(request, answered)

    def leadership_changed(self, effect: LeadershipChanged) -> None:
        pass  # the core logs partition.became_leader / became_follower itself

    def _schedule_flush(self) -> None:
        self._flush_soon.schedule()

    def _flush(self) -> None:
        fetches, self._fetch_out = self._fetch_out, {}
        answers, self._fetch_resp_out = self._fetch_resp_out, {}
        for to, requests in fetches.items():
            self.fetch_frames_sent += 1
            self.fetch_requests_sent += len(requests)
            self.node.send(to, ReplicaFetchBatch(tuple(requests)))
        for to, responses in answers.items():
            self.node.send(to, ReplicaFetchBatchResponse(tuple(responses)))

    # --- inputs from other brokers ----------------------------------------------------------------

    def on_fetch_batch(self, src: int, batch: ReplicaFetchBatch) -> None:
        for request in batch.requests:
            r = self.replicas.get((request.topic_id, request.partition))
            if r is None or request.replica_id != src:
                error = (Errors.NOT_LEADER_OR_FOLLOWER if r is None
                         else Errors.INVALID_REQUEST)  # fmt: skip
                self.send_fetch_response(src, FetchResponse(
                    request.topic_id, request.partition, error, request.fetch_offset,
                    request.request_id))  # fmt: skip
                continue
            self._step(r, request)

    def on_fetch_batch_response(self, src: int, batch: ReplicaFetchBatchResponse) -> None:
        for response in batch.responses:
            r = self.replicas.get((response.topic_id, response.partition))
            if r is not None:
                self._step(r, response)

    # --- produce and consume (admin API and native clients) ---------------------------------------

    def lookup(self, topic: str, partition: int) -> tuple[HostedReplica | None, Errors, int, int]:
        """(replica, error, leader hint, leader epoch hint) for a client request."""
        r = self.by_name.get((topic, partition))
        if r is not None:
            return r, Errors.NONE, -1, -1
        image = self.node.image
        t = image.topic(topic)
        part = None if t is None else image.partition(t.topic_id, partition)
        if part is None:
            return None, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
        return None, Errors.NOT_LEADER_OR_FOLLOWER, part.leader, part.leader_epoch

    def produce(self, topic: str, partition: int, records: bytes, acks: int, timeout_ms: int,
                callback: ProduceCallback, *, internal_topics_allowed: bool = False) -> None:  # fmt: skip
        """Append `records` (RecordBatch v2) as leader; `callback` gets the ProduceResponse (for
        acks=0 at once, with no offsets: Kafka does not answer acks=0 at all).

        Only the group coordinator writes an internal topic (`internal_topics_allowed=True`); a
        client's produce to one is refused with INVALID_TOPIC_EXCEPTION before anything is
        appended, as Kafka's ReplicaManager.appendToLocalLog does with internalTopicsAllowed=false
        ("Cannot append to internal topic")."""
        if topic in INTERNAL_TOPICS and not internal_topics_allowed:
            callback(ProduceResponse(self._request_id(), Errors.INVALID_TOPIC_EXCEPTION,
                                     message=f"Cannot append to internal topic {topic}"))  # fmt: skip
            return
        raft = self.raft.by_name.get((topic, partition))
        r, error, leader, epoch = (None, Errors.NONE, -1, -1) if raft else self.lookup(topic, partition)
        request_id = self._request_id()
        if r is None and raft is None:
            callback(ProduceResponse(request_id, error, leader_id=leader, leader_epoch=epoch))
            return
        if acks != ACKS_NONE:
            self._produce_waiters[request_id] = callback
        self.produced_batches += 1
        if raft is not None:
            self.raft.produce(raft, ProduceRequest(raft.topic_id, partition, request_id, records,
                                                   acks, timeout_ms))  # fmt: skip
            leader_epoch = raft.core.leader_epoch
        else:
            assert r is not None
            self._step(r, ProduceRequest(r.topic_id, partition, request_id, records, acks,
                                         timeout_ms))  # fmt: skip
            leader_epoch = r.core.leader_epoch
        if acks == ACKS_NONE:
            callback(ProduceResponse(request_id, Errors.NONE, leader_id=self.broker_id,
                                     leader_epoch=leader_epoch))  # fmt: skip

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int,
              callback: FetchCallback, current_leader_epoch: int = -1,
              follower_read: bool = False) -> None:  # fmt: skip
        """A consumer fetch (below the HW only, long-polling up to max_wait_ms). A
        current_leader_epoch >= 0 is checked by the core (KIP-320: FENCED_LEADER_EPOCH /
        UNKNOWN_LEADER_EPOCH). `follower_read` (KIP-392, a Kafka Fetch v11+): an ISR follower
        serves it too, below its own HW (partition/replica/follower_reads.py)."""
        raft = self.raft.by_name.get((topic, partition))
        r, error, leader, epoch = (None, Errors.NONE, -1, -1) if raft else self.lookup(topic, partition)
        request_id = self._request_id()
        if r is None and raft is None:
            callback(FetchResponse("", partition, error, offset, request_id, leader_id=leader,
                                   leader_epoch=epoch))  # fmt: skip
            return
        self._fetch_waiters[request_id] = callback
        hosted = raft if raft is not None else r
        assert hosted is not None
        request = FetchRequest(hosted.topic_id, partition, CONSUMER_REPLICA_ID, offset,
                               current_leader_epoch=current_leader_epoch, max_bytes=max_bytes,
                               max_wait_ms=max_wait_ms, request_id=request_id,
                               follower_read=follower_read)  # fmt: skip
        if raft is not None:
            self.raft.input(raft, request)
        else:
            assert r is not None
            self._step(r, request)

    def on_raft_envelope(self, src: int, envelope: RaftEnvelope) -> None:
        """A peer's round of Raft messages for the raft partitions (FrameError if malformed)."""
        receive_envelope(self.raft, src, envelope)

    def answer_consumer_fetch(self, response: FetchResponse) -> None:
        self.send_fetch_response(CONSUMER_REPLICA_ID, response)

    def leader_for(self, part: Partition) -> tuple[int, int]:
        """(leader, epoch) a Metadata answer gives for `part`: for a raft partition hosted here,
        this broker's Raft view when it is newer than the image (raft_leadership.py)."""
        return self.leadership.leader_for(part)

    def offsets_view(self, topic: str, partition: int) -> tuple[Errors, OffsetsView | None]:
        """What ListOffsets reads of a partition hosted here, any mode; else the lookup error."""
        raft = self.raft.by_name.get((topic, partition))
        if raft is not None:
            status = raft.core.status()
            return Errors.NONE, OffsetsView(raft.core.is_leader, raft.core.leader_epoch,
                                            status.log_start_offset, status.high_watermark,
                                            raft.plog)  # fmt: skip
        r, error, _, _ = self.lookup(topic, partition)
        if r is None:
            return error, None
        s = r.core.status()
        return Errors.NONE, OffsetsView(r.core.is_leader, r.core.leader_epoch, s.log_start_offset,
                                        s.high_watermark, r.log.log)  # fmt: skip

    def forget_produce(self, request_id: int) -> None:
        self._produce_waiters.pop(request_id, None)

    async def allocate_producer_id(self) -> tuple[Errors, int]:
        """A fresh producer id from this broker's block; a new block from the controller
        (AllocateProducerIds) when it is used up."""
        async with self._pid_lock:
            if self._pid_next >= self._pid_end:
                from quorum.controller.messages import (
                    AllocateProducerIdsRequest,
                    AllocateProducerIdsResponse,
                )

                response = await self.broker.call_controller(
                    AllocateProducerIdsRequest(self.broker_id, self.broker.broker_epoch)
                )
                if not isinstance(response, AllocateProducerIdsResponse):
                    return Errors.REQUEST_TIMED_OUT, -1
                if response.error is not Errors.NONE:
                    return response.error, -1
                self._pid_next = response.producer_id_start
                self._pid_end = response.producer_id_start + response.producer_id_len
            pid = self._pid_next
            self._pid_next += 1
            return Errors.NONE, pid

    # --- status ---------------------------------------------------------------------------------

    def statuses(self) -> list[dict[str, Any]]:
        out = self._isr_statuses() + [status_row(r, self.node.now_ms())
                                      for r in self.raft.by_name.values()]  # fmt: skip
        return sorted(out, key=lambda row: (row["topic"], row["partition"]))

    def _isr_statuses(self) -> list[dict[str, Any]]:
        out = []
        for (topic, partition), r in sorted(self.by_name.items()):
            s = r.core.status()
            out.append({
                "topic": topic, "partition": partition, "role": s.role,
                "leader": None if s.leader_id == NO_LEADER else s.leader_id,
                "leader_epoch": s.leader_epoch, "partition_epoch": s.partition_epoch,
                "log_start_offset": s.log_start_offset, "log_end_offset": s.log_end_offset,
                "high_watermark": s.high_watermark, "isr": list(s.isr),
                "maximal_isr": list(s.maximal_isr),
                "followers": [{"replica_id": f.replica_id, "log_end_offset": f.log_end_offset,
                               "last_caught_up_time_ms": f.last_caught_up_time_ms}
                              for f in s.followers],
            })  # fmt: skip
        return out

    # --- housekeeping -----------------------------------------------------------------------------

    def _arm_housekeeping(self) -> None:
        self._housekeeping.arm_in(self.node.config.replica_high_watermark_checkpoint_interval_ms)

    def _on_housekeeping(self) -> None:
        if self._closed:
            return
        now_ms = self.node.now_ms()
        for plog in self.log_manager.logs.values():
            plog.maybe_flush(now_ms)
        self.log_manager.checkpoint()
        self._arm_housekeeping()

    def _arm_retention(self) -> None:
        self._retention_timer.arm_in(self.node.config.log_retention_check_interval_ms)

    def _on_retention(self) -> None:
        """log.retention.check.interval.ms: retention.ms (batch timestamps against the wall
        clock) then retention.bytes on every log; a moved log start is checkpointed at once."""
        if self._closed:
            return
        wall_ms = self.node.wall_ms(self.node.now_ms())
        # Not on raft partitions: their log start must become a KIP-630 snapshot boundary a
        # lagging voter can jump to first (docs/replication.md, Status).
        deleted = sum(plog.apply_retention(wall_ms)
                      for name, plog in self.log_manager.logs.items()
                      if name not in self.raft.by_name)  # fmt: skip
        if deleted:
            self.log_manager.checkpoint()
        self._arm_retention()

    def _arm_deletions(self) -> None:
        due_ms = self.log_manager.next_delete_due_ms()
        if due_ms is None or self._closed:
            self._delete_timer.cancel()
        else:
            self._delete_timer.arm(due_ms + 1)

    def _on_deletions(self) -> None:
        self.log_manager.remove_deleted_logs(self.node.now_ms())
        self._arm_deletions()

    def close(self) -> None:
        """Clean shutdown: stop timers, flush logs and write the checkpoints."""
        if self._closed:
            return
        self._closed = True
        for timer in (self._housekeeping, self._retention_timer, self._delete_timer):
            timer.cancel()
        for r in self.replicas.values():
            r.timer.cancel()
        self.leadership.close()
        self.raft.close()
        self.log_manager.close()
