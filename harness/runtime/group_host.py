"""The group coordinator on a broker: drives the sans-IO GroupCoordinator (coordinator/service.py)
on the event loop, with the `__consumer_offsets` partitions this broker leads as its storage
(Kafka's CoordinatorRuntime + CoordinatorPartitionWriter + CoordinatorLoaderImpl).

Shape, as every driver here: input (a request, an append completion, a timer, a leadership
change) -> `coordinator.<input>(..., now_ms)` -> execute the effects in order -> re-arm ONE timer
at `coordinator.next_deadline_ms()`.

- **The internal topic.** `__consumer_offsets` is created on the first FindCoordinator that
  finds it missing (Kafka's AutoTopicCreationManager), through the active controller, with
  `offsets.topic.num.partitions` partitions, replication factor min(offsets.topic.replication.
  factor, registered brokers) and `cleanup.policy=compact` (kept as a config; kraftlab has no log
  cleaner, so the log only grows: docs/groups.md). Groups map to partitions by the topic's actual
  partition count (a topic created under another setting keeps working).
- **Leadership.** After every applied metadata batch (and every second, for leadership changes
  that no metadata record carries) each hosted offsets partition's replica core is asked whether
  it leads and at which epoch. Became leader: `begin_loading`, then on the next loop iteration
  `load` with every record from the log start to the log end offset *at that moment* (Kafka
  loads to the log end: a leader never truncates its own log). Stopped leading, or a newer
  epoch: `unload` (pending requests get NOT_COORDINATOR; clients find the new coordinator).
- **Appends.** An AppendRecords effect becomes ONE RecordBatch v2 produced through the
  partition's replica (ReplicaManager.produce, acks=all, `offsets.commit.timeout.ms`), refused
  with NOT_LEADER_OR_FOLLOWER if the replica no longer leads at the effect's epoch. Its
  completion is fed back when the high watermark passes the batch, or with the failure, in append
  order per partition (a later append's completion waits for the earlier ones').
- **Ambiguous failures** (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND: the batch is in
  the leader's log and may still be committed) are not fed back as failures: the core would
  forget a write the log may keep. The partition is reloaded from its log instead (unload, then
  load to the log end again, at the same epoch), so the coordinator's state is again exactly what
  the log says; its pending requests get NOT_COORDINATOR and the clients retry.

Invariants: the coordinator is never re-entered (inputs that arrive while its effects run, such
as a produce answered synchronously, are queued and fed after: a harness/loop Serial); every
request handed to `call` gets exactly one answer (the core's contract, and `close` answers
nothing more). Deferred work (loads, completions fed in order, the core's timer, the leadership
check) runs through harness/loop with the node's crash as on_error, as the core's inputs do.
"""

from __future__ import annotations

import itertools
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, assert_never

import structlog

from coordinator import (
    AppendCompleted,
    AppendRecords,
    CoordinatorRecord,
    CoordinatorRecordError,
    Effect,
    GroupCoordinator,
    GroupCoordinatorConfig,
    GroupRequest,
    GroupResponse,
    SendResponse,
    decode_key,
    decode_value,
)
from harness.loop import LoopTime, Serial, Timer, run_soon
from harness.runtime.context import BrokerLink, NodeContext
from partition.log import batch as rb
from partition.replica import ACKS_ALL
from quorum.controller.messages import CreateTopicRequest, CreateTopicResponse
from quorum.metadata.errors import Errors

if TYPE_CHECKING:
    from harness.runtime.replica_manager import HostedReplica, ReplicaManager

log = structlog.get_logger()

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIGS = (("cleanup.policy", "compact"),)
LEADERSHIP_CHECK_INTERVAL_MS = 1_000
LOAD_READ_BYTES = 1 << 20
# The batch may be in the leader's log: reload rather than tell the core it was not written.
AMBIGUOUS_APPEND_ERRORS = frozenset({Errors.REQUEST_TIMED_OUT,
                                     Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND})  # fmt: skip

Respond = Callable[[GroupResponse], None]


def coordinator_config(node_config: Any, num_partitions: int | None = None) -> GroupCoordinatorConfig:
    """The core's config from the node's (Kafka's names, harness/runtime/config.py)."""
    c = node_config
    return GroupCoordinatorConfig(
        offsets_topic_num_partitions=num_partitions or c.offsets_topic_num_partitions,
        offsets_topic_replication_factor=c.offsets_topic_replication_factor,
        group_initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
        group_min_session_timeout_ms=c.group_min_session_timeout_ms,
        group_max_session_timeout_ms=c.group_max_session_timeout_ms,
        group_max_size=c.group_max_size,
    )


@dataclass(slots=True)
class _Partition:
    """What the host knows of one offsets partition it leads (or loads)."""

    leader_epoch: int
    session: int  # bumped at every (re)load: completions of an older session are dropped
    loaded: bool = False
    order: deque[int] = field(default_factory=deque)  # append ids in issue order
    done: dict[int, Errors] = field(default_factory=dict)  # completed, not yet fed (out of order)


class GroupHost:
    """The group coordinator of one broker process, on the running loop."""

    def __init__(self, node: NodeContext, broker: BrokerLink, replicas: ReplicaManager) -> None:
        self.node = node
        self.broker = broker
        self.replicas = replicas
        self.loop = node.loop
        self.coordinator = self._new_coordinator(None)
        self._partitions: dict[int, _Partition] = {}
        self._sessions = itertools.count(1)
        self._request_ids = itertools.count(1)
        self._waiters: dict[int, Respond] = {}
        self._steps: Serial[Callable[[], list[Effect]]] = Serial(
            self._step, on_error=node.crash, after=self._arm)
        self._timer = Timer(node.clock, self._on_timer, on_error=node.crash)
        self._creating = False
        self._closed = False
        self.appends = 0
        self.reloads = 0
        self._check_timer = Timer(LoopTime(self.loop), self._on_check, on_error=node.crash)
        self._check_timer.arm_in(LEADERSHIP_CHECK_INTERVAL_MS)

    def _new_coordinator(self, num_partitions: int | None) -> GroupCoordinator:
        return GroupCoordinator(coordinator_config(self.node.config, num_partitions),
                                member_id_suffix=lambda: str(uuid.uuid4()))  # fmt: skip

    # --- requests (the Kafka listener's group handlers, the admin API) -------------------------

    def next_request_id(self) -> int:
        return next(self._request_ids)

    def call(self, request: GroupRequest, respond: Respond) -> None:
        """Hand `request` (its request_id from `next_request_id`) to the coordinator; `respond`
        gets its one answer, possibly much later (JoinGroup and SyncGroup are parked)."""
        if self._closed:
            return
        self._waiters[request.request_id] = respond
        self._run(lambda: self.coordinator.handle(request, self.node.now_ms()))

    def partition_for(self, group_id: str) -> int:
        return self.coordinator.partition_for(group_id)

    def offsets_topic_partitions(self) -> int | None:
        """The partition count of `__consumer_offsets` in the image (None: not created yet)."""
        image = self.node.image
        topic = image.topic(OFFSETS_TOPIC)
        return None if topic is None else len(image.partitions(topic.topic_id))

    def ensure_offsets_topic(self) -> None:
        """Ask the active controller to create `__consumer_offsets` (once at a time)."""
        if self._creating or self._closed or self.offsets_topic_partitions() is not None:
            return
        self._creating = True
        # Registered brokers, fenced ones included: a broker restarting at that moment must not
        # leave the topic with fewer replicas for good. The controller refuses while fewer are
        # usable (INVALID_REPLICATION_FACTOR) and the next FindCoordinator asks again.
        registered = len(list(self.node.image.brokers()))
        config = self.coordinator.config
        rf = max(1, min(config.offsets_topic_replication_factor, registered))
        request = CreateTopicRequest(OFFSETS_TOPIC, config.offsets_topic_num_partitions, rf,
                                     OFFSETS_TOPIC_CONFIGS)  # fmt: skip

        def answered(response: Any) -> None:
            self._creating = False
            error = response.error if isinstance(response, CreateTopicResponse) else None
            log.info("groups.offsets_topic_create", partitions=request.partitions,
                     replication_factor=rf, error=None if error is None else error.name)  # fmt: skip

        self.broker.send_controller(request, answered)

    # --- leadership ---------------------------------------------------------------------------

    def on_metadata(self) -> None:
        """After every applied metadata batch (broker.py on_applied)."""
        if not self._closed:
            self._check_leadership()

    def _on_check(self) -> None:
        if self._closed:
            return
        self._check_leadership()
        self._check_timer.arm_in(LEADERSHIP_CHECK_INTERVAL_MS)

    def _check_leadership(self) -> None:
        count = self.offsets_topic_partitions()
        if count is None:
            return
        if count != self.coordinator.config.offsets_topic_num_partitions:
            self._resize(count)
        for partition in range(count):
            r = self.replicas.by_name.get((OFFSETS_TOPIC, partition))
            leading = r is not None and r.core.is_leader
            epoch = r.core.leader_epoch if r is not None else -1
            state = self._partitions.get(partition)
            if leading and (state is None or state.leader_epoch != epoch):
                self._begin_load(partition, epoch)
            elif not leading and state is not None:
                self._unload(partition, max(epoch, state.leader_epoch))

    def _unload(self, partition: int, leader_epoch: int) -> None:
        del self._partitions[partition]
        log.info("groups.partition_unloaded", partition=partition, leader_epoch=leader_epoch)
        self._run(lambda: self.coordinator.unload(partition, leader_epoch))

    def _resize(self, count: int) -> None:
        """The topic has another partition count than the configured one (created under another
        setting): route groups by the topic's. Only before anything is loaded."""
        if self._partitions:
            return
        log.warning("groups.offsets_partitions_differ", configured=self.coordinator.config
                    .offsets_topic_num_partitions, topic=count)  # fmt: skip
        self.coordinator = self._new_coordinator(count)

    def _begin_load(self, partition: int, leader_epoch: int) -> None:
        state = _Partition(leader_epoch, next(self._sessions))
        self._partitions[partition] = state
        log.info("groups.partition_loading", partition=partition, leader_epoch=leader_epoch)
        self._run(lambda: self.coordinator.begin_loading(partition, leader_epoch))
        run_soon(self.loop, self._load, partition, state, on_error=self.node.crash)

    def _load(self, partition: int, state: _Partition) -> None:
        if self._closed or self._partitions.get(partition) is not state:
            return  # unloaded, or loading again at a newer epoch
        r = self.replicas.by_name.get((OFFSETS_TOPIC, partition))
        if r is None or not r.core.is_leader or r.core.leader_epoch != state.leader_epoch:
            return  # the next leadership check sees the change
        records = read_records(r)
        state.loaded = True
        log.info("groups.partition_loaded", partition=partition,
                 leader_epoch=state.leader_epoch, records=len(records))  # fmt: skip
        self._run(lambda: self.coordinator.load(partition, state.leader_epoch, records,
                                                self.node.now_ms()))  # fmt: skip

    def _reload(self, partition: int, state: _Partition) -> None:
        """An append may or may not be in the log: make the core's state the log's again."""
        self.reloads += 1
        log.warning("groups.partition_reloading", partition=partition,
                    leader_epoch=state.leader_epoch)  # fmt: skip
        fresh = _Partition(state.leader_epoch, next(self._sessions))
        self._partitions[partition] = fresh
        epoch = state.leader_epoch
        self._run(lambda: self.coordinator.unload(partition, epoch)
                  + self.coordinator.begin_loading(partition, epoch))  # fmt: skip
        run_soon(self.loop, self._load, partition, fresh, on_error=self.node.crash)

    # --- driving the core ---------------------------------------------------------------------

    def _run(self, step: Callable[[], list[Effect]]) -> None:
        """Run one input and its effects; queued if the coordinator is busy. An exception (an
        InvariantViolation or a bug) crashes the node, as in node.py."""
        self._steps.submit(step)

    def _step(self, step: Callable[[], list[Effect]]) -> None:
        self._execute(step())

    def _execute(self, effects: list[Effect]) -> None:
        for effect in effects:
            match effect:
                case AppendRecords():
                    self._append(effect)
                case SendResponse(response=response):
                    respond = self._waiters.pop(response.request_id, None)
                    if respond is not None:
                        respond(response)
                case _:
                    assert_never(effect)

    def _append(self, effect: AppendRecords) -> None:
        state = self._partitions.get(effect.partition)
        if state is None or state.leader_epoch != effect.leader_epoch:
            return  # unloaded meanwhile: the core already answered its requests
        session = state.session
        state.order.append(effect.append_id)
        r = self.replicas.by_name.get((OFFSETS_TOPIC, effect.partition))
        if r is None or not r.core.is_leader or r.core.leader_epoch != effect.leader_epoch:
            self._completed(effect.partition, session, effect.append_id,
                            Errors.NOT_LEADER_OR_FOLLOWER)  # fmt: skip
            return
        now_wall_ms = self.node.wall_ms(self.node.now_ms())
        batch = rb.encode_batch([rb.Record(record.value, record.key, timestamp_ms=now_wall_ms)
                                 for record in effect.records])  # fmt: skip
        self.appends += 1
        self.replicas.produce(
            OFFSETS_TOPIC, effect.partition, batch, ACKS_ALL,
            self.node.config.offsets_commit_timeout_ms,
            lambda response: self._completed(effect.partition, session, effect.append_id,
                                             response.error),
            internal_topics_allowed=True)  # fmt: skip

    def _completed(self, partition: int, session: int, append_id: int, error: Errors) -> None:
        """A produce answer (possibly synchronous, from inside a replica core's effects):
        recorded now, fed to the coordinator in append order on a later loop iteration."""
        state = self._partitions.get(partition)
        if state is None or state.session != session:
            return
        state.done[append_id] = error
        run_soon(self.loop, self._feed, partition, session, on_error=self.node.crash)

    def _feed(self, partition: int, session: int) -> None:
        state = self._partitions.get(partition)
        if self._closed or state is None or state.session != session:
            return
        while state.order and state.order[0] in state.done:
            append_id = state.order.popleft()
            error = state.done.pop(append_id)
            if error in AMBIGUOUS_APPEND_ERRORS:
                self._reload(partition, state)
                return
            self._run(lambda a=append_id, e=error: self.coordinator.append_completed(
                AppendCompleted(partition, a, e), self.node.now_ms()))  # fmt: skip

    def _arm(self) -> None:
        deadline = None if self._closed else self.coordinator.next_deadline_ms()
        # A deadline already past fires on a later pass (one ms on), not in this one.
        self._timer.set(deadline, not_before_ms=self.node.now_ms() + 1)

    def _on_timer(self) -> None:
        if not self._closed:
            self._run(lambda: self.coordinator.tick(self.node.now_ms()))

    # --- status -------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return {
            "offsets_topic_partitions": self.offsets_topic_partitions(),
            "leading": sorted(p for p, s in self._partitions.items() if s.loaded),
            "loading": sorted(p for p, s in self._partitions.items() if not s.loaded),
            "appends": self.appends,
            "reloads": self.reloads,
        }

    def close(self) -> None:
        self._closed = True
        self._waiters.clear()
        self._timer.cancel()
        self._check_timer.cancel()


def read_records(r: HostedReplica) -> list[CoordinatorRecord]:
    """Every record of an offsets partition's log, from its log start to its log end offset, in
    order. Control batches and records without a key are not the coordinator's; a record of a
    known type that does not decode is logged and skipped (a client's garbage, not ours)."""
    plog = r.log
    end = plog.log_end_offset
    offset = plog.log_start_offset
    out: list[CoordinatorRecord] = []
    while offset < end:
        buf = plog.read(offset, LOAD_READ_BYTES, max_offset=end)
        if not buf:
            break
        for h in rb.iter_headers(buf, check_crc=False):
            offset = max(offset, h.base_offset + h.last_offset_delta + 1)
            if h.attributes & rb.CONTROL_BIT:
                continue
            for record in rb.decode_records(buf, h):
                if record.offset < plog.log_start_offset or record.key is None:
                    continue
                try:
                    key = decode_key(record.key)
                    if key is not None:
                        decode_value(key, record.value)
                except CoordinatorRecordError as exc:
                    log.warning("groups.record_skipped", partition=r.partition,
                                offset=record.offset, error=str(exc))  # fmt: skip
                    continue
                out.append(CoordinatorRecord(record.key, record.value))
    return out


__all__ = ["OFFSETS_TOPIC", "GroupHost", "coordinator_config", "read_records"]
