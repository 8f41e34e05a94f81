"""ReplicaCore: the sans-IO state machine of one partition replica (leader or follower), driven
exactly like the Raft core: `handle(input, now_ms) -> list[Effect]`, `tick(now_ms)`,
`next_deadline_ms()`. No I/O, no clock, no randomness.

The log contract: the core READS its local log through `ReplicaLog` and WRITES only through
effects, which the driver executes synchronously, in order, before the next input. Within one
call the core keeps its own view of what it asked for but the driver has not done yet
(LocalReplica's `leo`, `hw`, `latest_epoch`), resynchronised from the log at the start of every
call.

Transitions (this module owns all of them; inputs are MetadataUpdated only):

    Offline --(leader == self)--> Leader --(leader != self, new epoch)--> Follower
       ^  <--(not a replica / no leader)--  |  <--(leader == self)--------'
    A Leader leaving: acks=all produces fail NOT_LEADER_OR_FOLLOWER (with the new leader hint)
    and parked fetches are answered with the same error. A Follower leaving answers the
    consumer reads parked on it (KIP-392, partition.replica.follower_reads) with what it has.
    replication.mode=quorum (partition.replica.quorum_mode): Offline with no leader is the
    *fenced* state; the replica reports its position at that epoch (SendReplicaPosition) at once
    and every position_report_interval_ms, and takes nothing from an earlier leader. A new
    quorum-mode leader with HW < LEO appends an epoch marker first.

Stale metadata (lower leader epoch, or same epoch and lower partition epoch) is ignored; in
quorum mode so is any leader epoch below `fenced_epoch` (the last fenced epoch this replica
reported at, persisted by the driver across restarts) or below its log's last epoch.

Invariants enforced (InvariantViolation): a leader's HW never decreases, and never exceeds its
LEO; a follower's HW never exceeds its LEO.

Structure: the replica's explicit state (identity, config, metadata, the in-call log view) is
one object, partition.replica.local_replica.LocalReplica; the leader-side rules
(partition.replica.leader), follower-side rules (partition.replica.follower) and consumer reads
at a follower (partition.replica.follower_reads) are functions over it and the role they apply
to (their docstrings list the rules). This module owns the role, every transition, and routes
each input to the rules of the role it is for.
"""

from __future__ import annotations

import dataclasses
from typing import assert_never

import structlog

from partition.log import batch as rb
from partition.replica import follower as follower_rules
from partition.replica import follower_reads
from partition.replica import leader as leader_rules
from partition.replica.config import ReplicaConfig
from partition.replica.effects import AppendAsLeader, Effect, LeadershipChanged, SendReplicaPosition
from partition.replica.errors import InvariantViolation, ReplicaUsageError
from partition.replica.local_log import ReplicaLog
from partition.replica.local_replica import LocalReplica
from partition.replica.messages import (
    CONSUMER_REPLICA_ID,
    FetchRequest,
    FetchResponse,
    MetadataUpdated,
    ProduceRequest,
    ReplicaPosition,
)
from partition.replica.quorum_mode import epoch_marker_batch, position_report
from partition.replica.state import Follower, FollowerReplica, Leader, Offline, Role
from quorum.controller.messages import AlterPartitionResponse, BrokerState
from quorum.metadata.errors import Errors
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import NO_LEADER, Partition

ReplicaInput = (
    MetadataUpdated | FetchRequest | FetchResponse | ProduceRequest | AlterPartitionResponse
)

__all__ = [
    "FollowerStatus",
    "ReplicaCore",
    "ReplicaInput",
    "ReplicaStatus",
    "metadata_update_from_image",
]


@dataclasses.dataclass(frozen=True, slots=True)
class FollowerStatus:
    replica_id: int
    log_end_offset: int
    last_fetch_time_ms: int
    last_caught_up_time_ms: int
    broker_epoch: int


@dataclasses.dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """A read-only picture for the admin API, the simulator's invariants and tests."""

    node_id: int
    role: str  # "leader" | "follower" | "offline"
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    maximal_isr: tuple[int, ...]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    followers: tuple[FollowerStatus, ...] = ()
    alter_partition_in_flight: bool = False


def _epochs(p: Partition) -> tuple[int, int]:
    return p.leader_epoch, p.partition_epoch


def metadata_update_from_image(
    image: MetadataImage, topic_id: str, partition: int
) -> MetadataUpdated:
    """The MetadataUpdated input for one partition from a broker's metadata image."""
    part = image.partition(topic_id, partition)
    if part is None:
        raise ReplicaUsageError(f"no partition {topic_id}-{partition} in the metadata image")
    eligible = tuple(BrokerState(b.broker_id, b.broker_epoch) for b in image.brokers()
                     if image.is_broker_usable(b.broker_id))  # fmt: skip
    return MetadataUpdated(part, eligible)


class ReplicaCore:
    def __init__(self, node_id: int, topic_id: str, partition: int, log: ReplicaLog,
                 config: ReplicaConfig | None = None, *, broker_epoch: int = -1,
                 topic: str = "", fenced_epoch: int = -1) -> None:  # fmt: skip
        logger = structlog.get_logger().bind(
            node=node_id, topic=topic or topic_id, partition=partition
        )
        self._local = LocalReplica(node_id, topic_id, partition, log, config or ReplicaConfig(),
                                   broker_epoch, fenced_epoch, logger)  # fmt: skip
        self.role: Role = Offline()

    # ------------------------------------------------------------------------------- views

    @property
    def node_id(self) -> int:
        return self._local.node_id

    @property
    def topic_id(self) -> str:
        return self._local.topic_id

    @property
    def partition_id(self) -> int:
        return self._local.partition_id

    @property
    def log(self) -> ReplicaLog:
        return self._local.log

    @property
    def config(self) -> ReplicaConfig:
        return self._local.config

    @config.setter
    def config(self, config: ReplicaConfig) -> None:
        """Dynamic config: takes effect from the next call."""
        self._local.config = config

    @property
    def broker_epoch(self) -> int:
        return self._local.broker_epoch

    @broker_epoch.setter
    def broker_epoch(self, broker_epoch: int) -> None:
        """KIP-903: a re-registered broker fetches and sends AlterPartition with its new epoch."""
        self._local.broker_epoch = broker_epoch

    @property
    def fenced_epoch(self) -> int:
        """Quorum mode: the highest fenced epoch this replica reported its position at."""
        return self._local.fenced_epoch

    @fenced_epoch.setter
    def fenced_epoch(self, fenced_epoch: int) -> None:
        self._local.fenced_epoch = fenced_epoch

    @property
    def partition(self) -> Partition | None:
        """The partition record this replica acts on (None before the first MetadataUpdated)."""
        return self._local.partition

    @property
    def eligible_brokers(self) -> dict[int, int]:
        return self._local.eligible_brokers

    @property
    def high_watermark(self) -> int:
        return self._local.hw

    @property
    def log_end_offset(self) -> int:
        return self._local.leo

    @property
    def leader_epoch(self) -> int:
        p = self._local.partition
        return p.leader_epoch if p is not None else -1

    @property
    def is_leader(self) -> bool:
        return isinstance(self.role, Leader)

    @property
    def isr(self) -> tuple[int, ...]:
        return tuple(sorted(self._local.isr()))

    def position(self) -> ReplicaPosition:
        """(last epoch, LEO) of this replica: what a quorum-mode election compares."""
        return self._local.position()

    def status(self) -> ReplicaStatus:
        r, role = self._local, self.role
        p = r.partition
        followers: tuple[FollowerStatus, ...] = ()
        maximal = r.isr()
        in_flight = False
        if isinstance(role, Leader):
            followers = tuple(FollowerStatus(f.replica_id, f.log_end_offset, f.last_fetch_time_ms,
                                             f.last_caught_up_time_ms, f.broker_epoch)
                              for _, f in sorted(role.followers.items()))  # fmt: skip
            maximal = r.maximal_isr(role)
            in_flight = role.in_flight is not None
        name = (
            "leader"
            if isinstance(role, Leader)
            else "follower"
            if isinstance(role, Follower)
            else "offline"
        )
        return ReplicaStatus(
            r.node_id, name, p.leader if p else NO_LEADER, p.leader_epoch if p else -1,
            p.partition_epoch if p else -1, tuple(sorted(r.isr())), tuple(sorted(maximal)),
            r.log_start, r.leo, r.hw, followers, in_flight,
        )  # fmt: skip

    # --------------------------------------------------------------------------- the API

    def handle(self, message: ReplicaInput, now_ms: int) -> list[Effect]:
        self._begin(now_ms)
        effects = self._route(message, now_ms)
        self._check()
        return effects

    def tick(self, now_ms: int) -> list[Effect]:
        self._begin(now_ms)
        r, role = self._local, self.role
        effects: list[Effect] = []
        match role:
            case Leader():
                effects += leader_rules.maybe_resend_alter_partition(r, role, now_ms)
                # Caught-up status moves with time.
                effects += leader_rules.maybe_advance_hw(r, role, now_ms)
                if now_ms >= role.next_isr_check_ms:
                    role.next_isr_check_ms = now_ms + r.config.replica_lag_time_max_ms // 2
                    effects += leader_rules.maybe_shrink_isr(r, role, now_ms)
                effects += leader_rules.maybe_expand_isr(r, role, now_ms)
                effects += leader_rules.expire_produces(r, role, now_ms)
                effects += leader_rules.answer_parked_fetches(r, role, now_ms)
            case Follower():
                effects += follower_rules.tick(r, role, now_ms)
                effects += follower_reads.answer_parked_reads(r, role, now_ms)
            case Offline():
                effects += self._maybe_report_position(role, now_ms)
            case _:
                assert_never(role)
        self._check()
        return effects

    def next_deadline_ms(self) -> int | None:
        """When `tick` has something to do (None: nothing until the next input)."""
        r, role = self._local, self.role
        match role:
            case Leader():
                if role.fetches.is_woken:
                    return r.now_ms  # answered on this tick, whatever else is overdue
                deadlines = [d for d in (role.next_isr_check_ms,
                                         role.produces.next_deadline_ms(r.now_ms),
                                         role.fetches.next_deadline_ms(r.now_ms))
                             if d is not None]  # fmt: skip
                if role.in_flight is not None and not role.awaiting_metadata:
                    deadlines.append(role.in_flight.sent_ms + r.config.alter_partition_timeout_ms)
                return min(deadlines)
            case Follower():
                due = [d for d in (follower_rules.next_deadline_ms(r, role),
                                   follower_reads.next_deadline_ms(r, role)) if d is not None]
                return min(due) if due else None
            case Offline():
                return role.next_report_ms
            case _:
                assert_never(role)

    # ------------------------------------------------------------------------ internals

    def _begin(self, now_ms: int) -> None:
        r = self._local
        previous_hw = r.hw
        r.sync()
        if isinstance(self.role, Leader) and r.hw < previous_hw:
            raise InvariantViolation(f"leader HW went back from {previous_hw} to {r.hw}")
        r.now_ms = max(r.now_ms, now_ms)

    def _check(self) -> None:
        r = self._local
        if r.hw > r.leo:
            raise InvariantViolation(f"HW {r.hw} above LEO {r.leo} on {r.node_id}")

    def _route(self, message: ReplicaInput, now_ms: int) -> list[Effect]:
        """Each input to the rules of the role it is for; the others answer or drop it."""
        r, role = self._local, self.role
        match message:
            case MetadataUpdated():
                return self._on_metadata(message, now_ms)
            case FetchRequest():
                if isinstance(role, Leader):
                    return leader_rules.on_fetch_request(r, role, message, now_ms)
                if (isinstance(role, Follower) and message.follower_read
                        and message.replica_id == CONSUMER_REPLICA_ID):
                    return follower_reads.on_consumer_fetch(r, role, message, now_ms)
                return leader_rules.fetch_error(r, message, Errors.NOT_LEADER_OR_FOLLOWER)
            case FetchResponse():
                if isinstance(role, Follower):
                    return follower_rules.on_fetch_response(r, role, message, now_ms)
                return []  # we are no follower: nothing of an earlier leader is taken
            case ProduceRequest():
                if isinstance(role, Leader):
                    return leader_rules.on_produce(r, role, message, now_ms)
                return leader_rules.produce_error(r, message, Errors.NOT_LEADER_OR_FOLLOWER)
            case AlterPartitionResponse():
                if isinstance(role, Leader):
                    return leader_rules.on_alter_partition_response(r, role, message, now_ms)
                return []
            case _:
                assert_never(message)

    # ---------------------------------------------------------------------- transitions

    def _on_metadata(self, update: MetadataUpdated, now_ms: int) -> list[Effect]:
        r, p = self._local, update.partition
        if (p.topic_id, p.partition) != (r.topic_id, r.partition_id):
            raise ReplicaUsageError(f"metadata for {p.topic_id}-{p.partition} given to "
                                    f"{r.topic_id}-{r.partition_id}")  # fmt: skip
        r.eligible_brokers = {b.broker_id: b.broker_epoch for b in update.eligible_brokers}
        current = r.partition
        if current is not None and _epochs(p) < _epochs(current):
            # Stale partition state (an older record); only the eligible brokers may be new.
            return self._leader_reevaluate(now_ms)
        floor = self._epoch_floor()
        if p.leader_epoch < floor:
            # Older than an epoch we voted at, or than our own log's last epoch (a stale image
            # after a restart): acting on it could help a fenced zombie commit, or lead at an
            # epoch below our own entries (quorum_mode).
            r.logger.warning("partition.stale_metadata_ignored", leader_epoch=p.leader_epoch,
                             epoch_floor=floor)  # fmt: skip
            return self._leader_reevaluate(now_ms)
        r.partition = p
        role = self.role
        if r.node_id not in p.replicas or p.leader == NO_LEADER:
            return self._become_offline(p, now_ms)
        if p.leader == r.node_id:
            if isinstance(role, Leader) and role.leader_epoch == p.leader_epoch:
                return self._leader_partition_changed(role, p, current, now_ms)
            return self._become_leader(p, now_ms)
        if isinstance(role, Follower) and (role.leader_id, role.leader_epoch) == (
            p.leader,
            p.leader_epoch,
        ):
            return []  # an ISR change: nothing for a follower to do
        return self._become_follower(p, now_ms)

    def _epoch_floor(self) -> int:
        """Quorum mode: the lowest leader epoch this replica may still act on: its persisted
        fenced epoch, and the epoch of its own last entry (that leader's state was newer)."""
        r = self._local
        if not r.config.is_quorum_mode:
            return -1
        return max(r.fenced_epoch, r.latest_epoch)

    def _leader_reevaluate(self, now_ms: int) -> list[Effect]:
        role = self.role
        if isinstance(role, Leader):
            return leader_rules.maybe_expand_isr(self._local, role, now_ms)
        return []

    def _leader_partition_changed(
        self, leader: Leader, p: Partition, old: Partition | None, now_ms: int
    ) -> list[Effect]:
        in_flight = leader.in_flight
        if in_flight is not None and p.partition_epoch > in_flight.request.partition_epoch:
            leader.in_flight = None  # superseded by what the controller committed
            leader.awaiting_metadata = False
        for b in p.replicas:  # a reassignment may add replicas (or remove them)
            if b != self._local.node_id and b not in leader.followers:
                leader.followers[b] = FollowerReplica(b)
        for b in [b for b in leader.followers if b not in p.replicas]:
            del leader.followers[b]
        old_isr = frozenset(old.isr) if old is not None else frozenset()
        return leader_rules.after_isr_change(self._local, leader, old_isr, now_ms)

    def _leave_leadership(self) -> list[Effect]:
        """Leaving the current role: a leader fails what it holds, a follower answers the
        consumer reads parked on it (follower_reads.py)."""
        role = self.role
        if isinstance(role, Follower):
            return follower_reads.release_parked_reads(self._local, role)
        if not isinstance(role, Leader):
            return []
        failed = leader_rules.fail_produces(self._local, role, Errors.NOT_LEADER_OR_FOLLOWER)
        return failed + leader_rules.fail_parked_fetches(self._local, role)

    def _become_leader(self, p: Partition, now_ms: int) -> list[Effect]:
        r = self._local
        effects = self._leave_leadership()
        leader = Leader(p.leader_epoch, epoch_start_offset=r.leo,
                        next_isr_check_ms=now_ms + r.config.replica_lag_time_max_ms // 2)  # fmt: skip
        for b in p.replicas:
            if b != r.node_id:
                # Kafka Replica.resetReplicaState: ISR members count as caught up at election.
                caught_up_ms = now_ms if b in p.isr else 0
                leader.followers[b] = FollowerReplica(b, last_caught_up_time_ms=caught_up_ms)
        self.role = leader
        r.logger.info("partition.became_leader", leader_epoch=p.leader_epoch, isr=list(p.isr),
                      log_end_offset=r.leo, high_watermark=r.hw)  # fmt: skip
        effects.append(LeadershipChanged(r.node_id, p.leader_epoch, True))
        if r.config.is_quorum_mode and r.hw < r.leo:
            effects += self._append_epoch_marker(leader)
        effects += leader_rules.maybe_advance_hw(r, leader, now_ms)
        effects += leader_rules.maybe_expand_isr(r, leader, now_ms)
        return effects

    def _become_follower(self, p: Partition, now_ms: int) -> list[Effect]:
        r = self._local
        effects = self._leave_leadership()
        follower = Follower(p.leader, p.leader_epoch, next_fetch_ms=now_ms)
        self.role = follower
        r.logger.info("partition.became_follower", leader=p.leader, leader_epoch=p.leader_epoch,
                      log_end_offset=r.leo, high_watermark=r.hw)  # fmt: skip
        effects.append(LeadershipChanged(p.leader, p.leader_epoch, False))
        if not r.config.leader_epoch_enable:
            # Pre-KIP-101: truncate to the local HW, which may be behind the leader's (KAFKA-1211).
            effects += follower_rules.truncate(r, r.hw)
        return effects + follower_rules.send_fetch(r, follower, now_ms)

    def _append_epoch_marker(self, leader: Leader) -> list[Effect]:
        """Quorum mode, a new leader with an uncommitted tail: an entry of its own epoch at once
        (Raft's no-op; partition.replica.quorum_mode step 5), so the figure-8 rule can let the HW
        pass the tail even if every later write is an idempotent retry of it."""
        r = self._local
        marker = bytearray(epoch_marker_batch())
        rb.patch(marker, 0, r.leo, leader.leader_epoch)
        base = r.leo
        r.leo = base + 1
        r.latest_epoch = leader.leader_epoch
        leader.fetches.wake()
        r.logger.info("partition.epoch_marker_appended", leader_epoch=leader.leader_epoch,
                      offset=base, high_watermark=r.hw)  # fmt: skip
        return [AppendAsLeader(bytes(marker), base, base, leader.leader_epoch, flush=True)]

    def _become_offline(self, p: Partition, now_ms: int) -> list[Effect]:
        r = self._local
        effects = self._leave_leadership()
        if not isinstance(self.role, Offline) or self.role.leader_epoch != p.leader_epoch:
            offline = self.role = Offline(p.leader_epoch)
            r.logger.info("partition.became_offline", leader=p.leader, leader_epoch=p.leader_epoch)
            effects.append(LeadershipChanged(p.leader, p.leader_epoch, False))
            if r.config.is_quorum_mode and r.node_id in p.replicas:
                # Fenced (quorum_mode step 2-3): from here on nothing of an earlier leader is
                # taken (no fetch is sent; responses are dropped: we are no follower), so the
                # position reported now is final until a leader of a later epoch.
                offline.next_report_ms = now_ms
                r.fenced_epoch = max(r.fenced_epoch, p.leader_epoch)
                effects += self._maybe_report_position(offline, now_ms)
        return effects

    def _maybe_report_position(self, offline: Offline, now_ms: int) -> list[Effect]:
        """Quorum mode, fenced: report (last epoch, LEO) at the fenced epoch, again every
        position_report_interval_ms (lost reports; a new active controller forgets them)."""
        r = self._local
        if offline.next_report_ms is None or now_ms < offline.next_report_ms:
            return []
        offline.next_report_ms = now_ms + r.config.position_report_interval_ms
        request = position_report(r.node_id, r.broker_epoch, r.topic_id, r.partition_id,
                                  offline.leader_epoch, r.position())  # fmt: skip
        return [SendReplicaPosition(request)]
