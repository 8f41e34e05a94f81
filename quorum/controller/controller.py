"""The active controller (KIP-631), sans-IO: requests in, records to propose and a response out.

It runs on the Raft leader. It reads cluster state from the committed `MetadataImage` it is given
on every call and keeps only soft state of its own (broker heartbeat sessions, as Kafka's
BrokerHeartbeatManager does: after a failover every session starts afresh).

Driver contract (harness/node and harness/sim):
1. Run one controller operation at a time: `handle`/`tick` -> propose `result.records` -> wait
   until they are applied to the image -> answer `result.complete(apply_results)` -> next. The
   next operation then sees the image with the previous one's records, so validation is never
   done against stale state. (Kafka pipelines on a speculative in-memory state instead; kraftlab
   serializes: simpler, and a commit costs about a millisecond here.)
2. A result with no records is answered at once with `result.response`.
3. Create a fresh `QuorumController` each time the node becomes the Raft leader, once its image
   has applied its own epoch's LeaderChange (then the image holds everything earlier leaders
   committed), and call `tick(image, now_ms)` by `next_deadline_ms()`.

Records inside one result are ordered so that every intermediate image keeps the invariants: a
broker leaves ISRs and leaderships (PartitionChange) before it is fenced or marked shutting
down, and is unfenced before it is elected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

import structlog

from quorum.controller.alter_partition import alter_partition_outcome, validate_alter_partition
from quorum.controller.config import ControllerConfig
from quorum.controller.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterConfigsRequest,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    ControllerRequest,
    CreateTopicRequest,
    DeleteTopicRequest,
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionElectionResult,
    ReportRaftLeadersRequest,
    ReportReplicaPositionRequest,
    ReportReplicaPositionResponse,
)
from quorum.controller.partition_change import (
    ElectionRules,
    ElectionType,
    ReplicaLogState,
    build_change,
)
from quorum.controller.raft_leaders import is_raft_topic, report_raft_leaders
from quorum.controller.result import ControllerResult, PendingRecords
from quorum.controller.topics import alter_topic_configs, create_topic, delete_topic
from quorum.metadata.configs import (
    MIN_INSYNC_REPLICAS,
    REPLICATION_MODE,
    REPLICATION_MODE_QUORUM,
    REPLICATION_MODE_RAFT,
    UNCLEAN_LEADER_ELECTION_ENABLE,
)
from quorum.metadata.errors import Errors
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import (
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    NO_LEADER,
    BrokerRegistrationChange,
    FeatureLevel,
    FenceBroker,
    Partition,
    PartitionChange,
    ProducerIds,
    RegisterBroker,
    Topic,
    UnfenceBroker,
)


@dataclass(slots=True)
class _Session:
    """Heartbeat soft state of one broker (Kafka's BrokerHeartbeatState)."""

    last_contact_ms: int
    metadata_offset: int = -1
    shutdown_offset: int | None = None


_log = structlog.get_logger("controller")


class QuorumController:
    """The active controller's logic. Pure: time comes in as `now_ms`, state as the image."""

    def __init__(
        self,
        config: ControllerConfig | None = None,
        *,
        image: MetadataImage | None = None,
        now_ms: int = 0,
    ) -> None:
        self.config = config or ControllerConfig()
        self._sessions: dict[int, _Session] = {}
        self._log_states: dict[tuple[str, int], dict[int, ReplicaLogState]] = {}
        # Heartbeats received but maybe not processed yet: broker -> (broker epoch, receipt ms).
        self._received: dict[int, tuple[int, int]] = {}
        self._next_rebalance_ms = now_ms + self.config.leader_imbalance_check_interval_ms
        # Repair and offline-partition elections run at least this often (tick).
        self._next_maintenance_ms = now_ms + self.config.broker_heartbeat_interval_ms
        if image is not None:
            # A new active controller gives every unfenced broker a fresh session (Kafka).
            for b in image.brokers():
                if not b.fenced:
                    self._sessions[b.broker_id] = _Session(now_ms)

    # --- entry points --------------------------------------------------------------------------

    def handle(
        self, request: ControllerRequest, image: MetadataImage, now_ms: int
    ) -> ControllerResult:
        return self._with_bootstrap(image, self._dispatch(request, image, now_ms))

    def _dispatch(
        self, request: ControllerRequest, image: MetadataImage, now_ms: int
    ) -> ControllerResult:
        match request:
            case BrokerRegistrationRequest():
                return self._register(request, image, now_ms)
            case BrokerHeartbeatRequest():
                return self._heartbeat(request, image, now_ms)
            case CreateTopicRequest():
                return create_topic(request, image)
            case DeleteTopicRequest():
                return delete_topic(request, image)
            case AlterConfigsRequest():
                return alter_topic_configs(request, image)
            case AlterPartitionRequest():
                return self._alter_partition(request, image)
            case ElectLeadersRequest():
                return self._elect_leaders(request, image)
            case AllocateProducerIdsRequest():
                return self._allocate_producer_ids(request, image)
            case ReportReplicaPositionRequest():
                return self._report_position(request, image)
            case ReportRaftLeadersRequest():
                return report_raft_leaders(request, image)
            case _:
                assert_never(request)

    def tick(self, image: MetadataImage, now_ms: int) -> ControllerResult:
        """Fence brokers whose session expired, retry elections of offline partitions, and run
        the periodic preferred-leader rebalance. Records only (response None)."""
        batch = PendingRecords(image)
        self._apply_receipts(image)
        for b in image.brokers():
            session = self._sessions.get(b.broker_id)
            if session is None:
                if not b.fenced:  # registered by an earlier controller, not heard from yet
                    self._sessions[b.broker_id] = _Session(now_ms)
                continue
            if now_ms - session.last_contact_ms >= self.config.broker_session_timeout_ms:
                # broker.session.timeout.ms of silence: fence and forget the session (KIP-631).
                del self._sessions[b.broker_id]
                if not b.fenced:
                    self._fence(batch, b.broker_id, "session_timeout")
        self._repair_partitions(batch)
        self._next_maintenance_ms = now_ms + self.config.broker_heartbeat_interval_ms
        if self.config.auto_leader_rebalance_enable and now_ms >= self._next_rebalance_ms:
            self._next_rebalance_ms = now_ms + self.config.leader_imbalance_check_interval_ms
            self._rebalance(batch)
        return self._with_bootstrap(image, batch.result(None))

    def _with_bootstrap(self, image: MetadataImage, result: ControllerResult) -> ControllerResult:
        """`result` with FeatureLevel records first for every bootstrap feature the image holds
        at a lower level (written by the first operation of a new cluster's active controller,
        as Kafka's bootstrap metadata is; a later operation sees them applied and adds none)."""
        features = tuple(
            FeatureLevel(name, level)
            for name, level in self.config.bootstrap_features
            if image.feature_level(name) < level
        )
        if not features:
            return result
        _log.info("controller.finalizing_features", features=dict(self.config.bootstrap_features))
        return ControllerResult((*features, *result.records), result.response)

    def elr_enabled(self, image: MetadataImage) -> bool:
        """KIP-966: by this controller's config or by the feature finalized in the log."""
        return (
            self.config.eligible_leader_replicas_enable
            or image.feature_level(ELIGIBLE_LEADER_REPLICAS_VERSION) >= 1
        )

    def _repair_partitions(self, batch: PendingRecords) -> None:
        """Take unusable brokers out of ISRs and leaderships they are still in (a change that
        was refused as stale, or state left by an earlier controller), one broker at a time,
        then retry the election of every offline partition (topic configs may have changed).
        Raft partitions are left alone: a fenced broker may still lead its Raft group (cut off
        from the controllers only), and its reports are recorded (raft_leaders.py)."""
        raft: dict[str, bool] = {}  # topic name -> replication.mode=raft, read once per topic
        for topic, part in list(batch.view.all_partitions()):
            if raft.setdefault(topic.name, is_raft_topic(batch.view, topic)):
                continue
            for member in (*part.isr, part.leader):
                current = batch.view.partition(part.topic_id, part.partition)
                assert current is not None
                if member == NO_LEADER or batch.view.is_broker_usable(member):
                    continue
                if member in current.isr or current.leader == member:
                    rules = self._rules(batch.view, topic, part.partition)
                    change = build_change(
                        batch.view, current, rules, remove=(member,), unusable=(member,)
                    )
                    batch.add(change)
        for topic, part in batch.view.offline_partitions():
            if raft.setdefault(topic.name, is_raft_topic(batch.view, topic)):
                continue
            batch.add(
                build_change(batch.view, part, self._rules(batch.view, topic, part.partition))
            )

    def next_deadline_ms(self) -> int:
        """When `tick` has work next: the earliest session expiry, rebalance check or periodic
        repair (every broker.heartbeat.interval.ms)."""
        deadlines = [
            s.last_contact_ms + self.config.broker_session_timeout_ms
            for s in self._sessions.values()
        ]
        deadlines.append(self._next_maintenance_ms)
        if self.config.auto_leader_rebalance_enable:
            deadlines.append(self._next_rebalance_ms)
        return min(deadlines)

    def update_replica_log_state(
        self, topic_id: str, partition: int, state: ReplicaLogState
    ) -> None:
        """replication.mode=quorum: one replica's (last epoch, LEO) reported at the fenced epoch
        `state.leader_epoch`; it counts in that partition's election only while the partition
        is still at that epoch (soft state: a new active controller waits for new reports)."""
        states = self._log_states.setdefault((topic_id, partition), {})
        states[state.broker_id] = state
        for broker_id in [b for b, s in states.items() if s.leader_epoch < state.leader_epoch]:
            del states[broker_id]  # reports of an earlier fence never count again

    def heartbeat_received(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """A heartbeat arrived at `now_ms` (called by the driver on receipt, before it waits in
        the queue behind proposals). It counts as contact from its arrival, even if the session
        deadline passes before it is processed (KAFKA-15019: no fencing of a live broker because
        the controller was busy). Checked against the image's broker epoch at the next tick."""
        previous = self._received.get(broker_id)
        if previous is None or previous[0] != broker_epoch or previous[1] < now_ms:
            self._received[broker_id] = (broker_epoch, now_ms)

    def _apply_receipts(self, image: MetadataImage) -> None:
        for broker_id, (broker_epoch, received_ms) in self._received.items():
            b = image.broker(broker_id)
            session = self._sessions.get(broker_id)
            if b is not None and session is not None and b.broker_epoch == broker_epoch:
                session.last_contact_ms = max(session.last_contact_ms, received_ms)
        self._received.clear()

    def has_live_session(self, broker_id: int, now_ms: int) -> bool:
        s = self._sessions.get(broker_id)
        return s is not None and now_ms - s.last_contact_ms < self.config.broker_session_timeout_ms

    # --- brokers -------------------------------------------------------------------------------

    def _register(
        self, req: BrokerRegistrationRequest, image: MetadataImage, now_ms: int
    ) -> ControllerResult:
        existing = image.broker(req.broker_id)
        if (
            existing is not None
            and existing.incarnation_id != req.incarnation_id
            and self.has_live_session(req.broker_id, now_ms)
        ):
            # Another process still holds this id's session (KIP-631).
            _log.info("controller.duplicate_registration", broker_id=req.broker_id)
            return ControllerResult(
                response=BrokerRegistrationResponse(Errors.DUPLICATE_BROKER_REGISTRATION)
            )
        batch = PendingRecords(image)
        if existing is not None:
            # The old incarnation leaves every ISR and leadership before the new, fenced one is
            # registered: a fenced broker never leads (KIP-841).
            self._leave_partitions(batch, req.broker_id)
            unclean = req.previous_broker_epoch != existing.broker_epoch
            _log.info("controller.broker_restarted", broker_id=req.broker_id,
                      clean_shutdown=not unclean, previous_broker_epoch=req.previous_broker_epoch,
                      registered_broker_epoch=existing.broker_epoch)  # fmt: skip
            if unclean and self.elr_enabled(image):
                self._drop_from_elr(batch, req.broker_id)  # KAFKA-15586: unclean shutdown
        _log.info(
            "controller.registering_broker",
            broker_id=req.broker_id,
            incarnation_id=req.incarnation_id,
        )
        batch.add(RegisterBroker(req.broker_id, req.incarnation_id, req.endpoints, req.rack))
        self._sessions[req.broker_id] = _Session(now_ms)
        for states in self._log_states.values():
            # Quorum mode: a new incarnation may have lost what its old one reported (unflushed
            # data); it reports again if it is still fenced.
            states.pop(req.broker_id, None)
        response = BrokerRegistrationResponse(
            Errors.NONE, heartbeat_interval_ms=self.config.broker_heartbeat_interval_ms
        )
        return batch.result(response)

    def _heartbeat(
        self, req: BrokerHeartbeatRequest, image: MetadataImage, now_ms: int
    ) -> ControllerResult:
        b = image.registered_sender(req.broker_id, req.broker_epoch)
        if isinstance(b, Errors):
            return ControllerResult(response=BrokerHeartbeatResponse(b))
        session = self._sessions.setdefault(req.broker_id, _Session(now_ms))
        session.last_contact_ms = max(session.last_contact_ms, now_ms)
        session.metadata_offset = req.current_metadata_offset
        # Unfence once the broker has applied the log up to its own registration (KIP-631).
        caught_up = req.current_metadata_offset >= b.broker_epoch
        batch = PendingRecords(image)
        should_shut_down = False
        if b.fenced:
            if req.want_shut_down:
                should_shut_down = True  # a fenced broker leads nothing: it may go at once
            elif not req.want_fence and caught_up:
                self._unfence(batch, req.broker_id)
        elif req.want_fence:
            self._fence(batch, req.broker_id, "requested")
        elif req.want_shut_down:
            should_shut_down = self._controlled_shutdown(batch, req.broker_id, session)
        after = batch.view.broker(req.broker_id)
        response = BrokerHeartbeatResponse(
            Errors.NONE,
            is_caught_up=caught_up,
            is_fenced=after is None or after.fenced,
            should_shut_down=should_shut_down,
        )
        return batch.result(response)

    def _controlled_shutdown(
        self, batch: PendingRecords, broker_id: int, session: _Session
    ) -> bool:
        """Move leaderships away and leave ISRs, marked in_controlled_shutdown (KIP-841); True
        once it leads nothing and every other active broker has seen that (Kafka's rule)."""
        b = batch.view.broker(broker_id)
        assert b is not None
        if not self.config.controlled_shutdown_enable:
            self._fence(batch, broker_id, "shutdown")
            return True
        if not b.in_controlled_shutdown:
            _log.info("controller.controlled_shutdown_started", broker_id=broker_id)
            self._leave_partitions(batch, broker_id)
            batch.add(
                BrokerRegistrationChange(broker_id, b.broker_epoch, in_controlled_shutdown=True)
            )
            return False
        if session.shutdown_offset is None:
            session.shutdown_offset = batch.view.applied_offset
        self._leave_partitions(batch, broker_id)  # anything it was elected to since
        if batch.view.partitions_led_by(broker_id):
            return False
        for other in batch.view.brokers():
            s = self._sessions.get(other.broker_id)
            if (
                other.broker_id == broker_id
                or other.fenced
                or other.in_controlled_shutdown
                or s is None
            ):
                continue
            if s.metadata_offset < session.shutdown_offset:
                return False  # it may not know the new leaders yet
        self._fence(batch, broker_id, "controlled_shutdown_done")
        self._sessions.pop(broker_id, None)
        return True

    def _fence(self, batch: PendingRecords, broker_id: int, reason: str) -> None:
        b = batch.view.broker(broker_id)
        assert b is not None
        _log.info(
            "controller.fencing_broker",
            broker_id=broker_id,
            broker_epoch=b.broker_epoch,
            reason=reason,
        )
        self._leave_partitions(batch, broker_id)
        batch.add(FenceBroker(broker_id, b.broker_epoch))

    def _unfence(self, batch: PendingRecords, broker_id: int) -> None:
        b = batch.view.broker(broker_id)
        assert b is not None
        _log.info("controller.unfencing_broker", broker_id=broker_id, broker_epoch=b.broker_epoch)
        batch.add(UnfenceBroker(broker_id, b.broker_epoch))
        for topic, part in batch.view.partitions_hosted_by(broker_id):
            if part.leader == NO_LEADER:
                batch.add(
                    build_change(batch.view, part, self._rules(batch.view, topic, part.partition))
                )

    def _leave_partitions(self, batch: PendingRecords, broker_id: int) -> None:
        """PartitionChanges taking `broker_id` out of every ISR and leadership (the last ISR
        member stays without ELR, leader -1), electing new leaders as needed."""
        for topic, part in batch.view.partitions_hosted_by(broker_id):
            if broker_id in part.isr or part.leader == broker_id:
                rules = self._rules(batch.view, topic, part.partition)
                batch.add(
                    build_change(
                        batch.view, part, rules, remove=(broker_id,), unusable=(broker_id,)
                    )
                )

    def _drop_from_elr(self, batch: PendingRecords, broker_id: int) -> None:
        """KAFKA-15586: a broker back from an unclean shutdown may have lost its unflushed tail,
        so it is no longer eligible. It stays in LastKnownElr: as the last known leader it may
        still be elected once nobody is eligible (KIP-966, partition_change.py)."""
        for _, part in batch.view.partitions_hosted_by(broker_id):
            if broker_id in part.elr:
                batch.add(
                    PartitionChange(
                        part.topic_id,
                        part.partition,
                        elr=tuple(r for r in part.elr if r != broker_id),
                        expected_partition_epoch=part.partition_epoch,
                    )
                )

    # --- topics --------------------------------------------------------------------------------

    def _rules(self, image: MetadataImage, topic: Topic, partition: int) -> ElectionRules:
        configs = image.topic_configs(topic.name)
        return ElectionRules(
            unclean_allowed=configs[UNCLEAN_LEADER_ELECTION_ENABLE] == "true",
            elr_enabled=self.elr_enabled(image),
            min_isr=int(configs[MIN_INSYNC_REPLICAS]),
            quorum_mode=configs[REPLICATION_MODE] == REPLICATION_MODE_QUORUM,
            raft_mode=configs[REPLICATION_MODE] == REPLICATION_MODE_RAFT,
            log_states=self._log_states.get((topic.topic_id, partition), {}),
        )

    # --- AlterPartition ------------------------------------------------------------------------

    def _alter_partition(
        self, req: AlterPartitionRequest, image: MetadataImage
    ) -> ControllerResult:
        error = validate_alter_partition(req, image)
        part = image.partition(req.topic_id, req.partition)
        if error is not Errors.NONE or part is None:
            return ControllerResult(
                response=AlterPartitionResponse(error, req.topic_id, req.partition)
            )
        topic = image.topic_by_id(req.topic_id)
        assert topic is not None
        if is_raft_topic(image, topic):  # its leader reports its ISR (raft_leaders.py)
            return ControllerResult(response=AlterPartitionResponse(
                Errors.INVALID_REQUEST, req.topic_id, req.partition))  # fmt: skip
        new_isr = tuple(s.broker_id for s in req.new_isr_with_epochs)
        change = build_change(
            image,
            part,
            self._rules(image, topic, req.partition),
            isr=new_isr,
            recovery_state=req.leader_recovery_state,
        )
        batch = PendingRecords(image)
        batch.add(change)
        after = batch.view.partition(req.topic_id, req.partition)
        assert after is not None
        error = alter_partition_outcome(change, req.broker_id)
        return batch.result(_partition_response(error, after))

    # --- leader elections ----------------------------------------------------------------------

    def _elect_leaders(self, req: ElectLeadersRequest, image: MetadataImage) -> ControllerResult:
        try:
            election = ElectionType(req.election_type)
        except ValueError:
            election = ElectionType.ONLINE
        if election is ElectionType.ONLINE:
            return ControllerResult(
                response=ElectLeadersResponse(
                    Errors.INVALID_REQUEST, message="election_type is preferred or unclean"
                )
            )
        topic = image.topic(req.topic)
        if topic is None:
            return ControllerResult(
                response=ElectLeadersResponse(
                    Errors.UNKNOWN_TOPIC_OR_PARTITION, message=f"no topic {req.topic!r}"
                )
            )
        indexes = (
            [p.partition for p in image.partitions(topic.topic_id)]
            if req.partition is None
            else [req.partition]
        )
        batch = PendingRecords(image)
        results = [self._elect_one(batch, topic, p, election) for p in indexes]
        return batch.result(ElectLeadersResponse(Errors.NONE, tuple(results)))

    def _elect_one(
        self, batch: PendingRecords, topic: Topic, index: int, election: ElectionType
    ) -> PartitionElectionResult:
        part = batch.view.partition(topic.topic_id, index)
        if part is None:
            return PartitionElectionResult(topic.name, index, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        if is_raft_topic(batch.view, topic):
            return PartitionElectionResult(topic.name, index, Errors.INVALID_REQUEST,
                                           "raft partitions elect their own leaders")  # fmt: skip
        if election is ElectionType.PREFERRED and part.replicas and part.leader == part.replicas[0]:
            return PartitionElectionResult(topic.name, index, Errors.ELECTION_NOT_NEEDED)
        if election is ElectionType.UNCLEAN and part.leader != NO_LEADER:
            return PartitionElectionResult(topic.name, index, Errors.ELECTION_NOT_NEEDED)
        rules = self._rules(batch.view, topic, index)
        change = build_change(batch.view, part, rules, election=election)
        if change is None or change.leader is None:
            error = (
                Errors.PREFERRED_LEADER_NOT_AVAILABLE
                if election is ElectionType.PREFERRED
                else Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
            )
            return PartitionElectionResult(topic.name, index, error)
        if election is ElectionType.PREFERRED and change.leader != part.replicas[0]:
            return PartitionElectionResult(topic.name, index, Errors.PREFERRED_LEADER_NOT_AVAILABLE)
        batch.add(change)
        return PartitionElectionResult(topic.name, index, Errors.NONE)

    def _rebalance(self, batch: PendingRecords) -> None:
        """auto.leader.rebalance.enable: preferred elections on brokers whose share of
        partitions led by someone else exceeds leader.imbalance.per.broker.percentage."""
        preferred: dict[int, list[tuple[Topic, Partition]]] = {}
        for topic, part in batch.view.all_partitions():
            if part.replicas and not is_raft_topic(batch.view, topic):
                preferred.setdefault(part.replicas[0], []).append((topic, part))
        for broker_id in sorted(preferred):
            owned = preferred[broker_id]
            imbalanced = [(t, p) for t, p in owned if p.leader != broker_id]
            if not imbalanced or 100 * len(
                imbalanced
            ) <= self.config.leader_imbalance_per_broker_percentage * len(owned):
                continue
            if not batch.view.is_broker_usable(broker_id):
                continue
            for topic, part in imbalanced:
                current = batch.view.partition(part.topic_id, part.partition)
                assert current is not None
                rules = self._rules(batch.view, topic, part.partition)
                change = build_change(batch.view, current, rules, election=ElectionType.PREFERRED)
                if change is not None and change.leader == broker_id:
                    batch.add(change)

    # --- replication.mode=quorum: position reports ------------------------------------------

    def _report_position(
        self, req: ReportReplicaPositionRequest, image: MetadataImage
    ) -> ControllerResult:
        """Record a replica's position at the fenced epoch, then try the election (step 3 of
        the quorum-mode election in partition_change.py). Errors: BROKER_ID_NOT_REGISTERED,
        STALE_BROKER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (not a replica, or not a
        quorum-mode topic), FENCED_LEADER_EPOCH (reported at an older epoch: the partition moved
        on), UNKNOWN_LEADER_EPOCH (an epoch this image does not have yet)."""

        def answer(error: Errors, part: Partition | None = None) -> ControllerResult:
            leader, epoch = (part.leader, part.leader_epoch) if part is not None else (-1, -1)
            return ControllerResult(response=ReportReplicaPositionResponse(
                error, req.topic_id, req.partition, leader, epoch))  # fmt: skip

        if isinstance(error := image.registered_sender(req.broker_id, req.broker_epoch), Errors):
            return answer(error)
        topic = image.topic_by_id(req.topic_id)
        part = image.partition(req.topic_id, req.partition)
        if topic is None or part is None:
            return answer(Errors.UNKNOWN_TOPIC_OR_PARTITION)
        rules = self._rules(image, topic, req.partition)
        if req.broker_id not in part.replicas or not rules.quorum_mode:
            return answer(Errors.INVALID_REQUEST, part)
        if req.leader_epoch < part.leader_epoch:
            return answer(Errors.FENCED_LEADER_EPOCH, part)
        if req.leader_epoch > part.leader_epoch:
            return answer(Errors.UNKNOWN_LEADER_EPOCH, part)
        if part.leader != NO_LEADER:
            return answer(Errors.NONE, part)  # elected already (a late or repeated report)
        self.update_replica_log_state(req.topic_id, req.partition, ReplicaLogState(
            req.broker_id, req.last_epoch, req.log_end_offset, req.leader_epoch))  # fmt: skip
        batch = PendingRecords(image)
        batch.add(build_change(image, part, self._rules(image, topic, req.partition)))
        after = batch.view.partition(req.topic_id, req.partition)
        if after is not None and after.leader != NO_LEADER:
            _log.info("controller.quorum_leader_elected", topic_id=req.topic_id,
                      partition=req.partition, leader=after.leader,
                      leader_epoch=after.leader_epoch, voters=list(after.isr))  # fmt: skip
        return batch.result(ReportReplicaPositionResponse(
            Errors.NONE, req.topic_id, req.partition, after.leader if after else -1,
            after.leader_epoch if after else -1))  # fmt: skip

    # --- producer ids --------------------------------------------------------------------------

    def _allocate_producer_ids(
        self, req: AllocateProducerIdsRequest, image: MetadataImage
    ) -> ControllerResult:
        if isinstance(error := image.registered_sender(req.broker_id, req.broker_epoch), Errors):
            return ControllerResult(response=AllocateProducerIdsResponse(error))
        start = image.next_producer_id
        size = self.config.producer_id_block_size
        record = ProducerIds(req.broker_id, req.broker_epoch, start + size)
        return ControllerResult((record,), AllocateProducerIdsResponse(Errors.NONE, start, size))


def _partition_response(error: Errors, part: Partition) -> AlterPartitionResponse:
    return AlterPartitionResponse(
        error=error,
        topic_id=part.topic_id,
        partition=part.partition,
        leader=part.leader,
        leader_epoch=part.leader_epoch,
        isr=part.isr,
        partition_epoch=part.partition_epoch,
        leader_recovery_state=part.leader_recovery_state,
    )


__all__ = ["ControllerResult", "QuorumController"]
