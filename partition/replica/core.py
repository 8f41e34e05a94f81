"""ReplicaCore: the sans-IO state machine of one partition replica (leader or follower), driven
exactly like the Raft core: `handle(input, now_ms) -> list[Effect]`, `tick(now_ms)`,
`next_deadline_ms()`. No I/O, no clock, no randomness.

The log contract: the core READS its local log through `ReplicaLog` and WRITES only through
effects, which the driver executes synchronously, in order, before the next input. Within one
call the core keeps its own view of what it asked for but the driver has not done yet (`_leo`,
`_hw`, `_latest_epoch`), resynchronised from the log at the start of every call.

Transitions (this module owns all of them; inputs are MetadataUpdated only):

    Offline --(leader == self)--> Leader --(leader != self, new epoch)--> Follower
       ^  <--(not a replica / no leader)--  |  <--(leader == self)--------'
    A Leader leaving: acks=all produces fail NOT_LEADER_OR_FOLLOWER (with the new leader hint)
    and parked fetches are answered with the same error.
    replication.mode=quorum (partition.replica.quorum_mode): Offline with no leader is the
    *fenced* state; the replica reports its position at that epoch (SendReplicaPosition) at once
    and every position_report_interval_ms, and takes nothing from an earlier leader. A new
    quorum-mode leader with HW < LEO appends an epoch marker first.

Stale metadata (lower leader epoch, or same epoch and lower partition epoch) is ignored; in
quorum mode so is any leader epoch below `fenced_epoch` (the last fenced epoch this replica
reported at, persisted by the driver across restarts) or below its log's last epoch.

Invariants enforced (InvariantViolation): a leader's HW never decreases, and never exceeds its
LEO; a follower's HW never exceeds its LEO.

Leader-side rules live in partition.replica.leader, follower-side rules in
partition.replica.follower (their docstrings list them).
"""

from __future__ import annotations

import dataclasses
from typing import assert_never

import structlog

from partition.log import batch as rb
from partition.replica.config import ReplicaConfig
from partition.replica.effects import AppendAsLeader, Effect, LeadershipChanged, SendReplicaPosition
from partition.replica.errors import InvariantViolation, ReplicaUsageError
from partition.replica.follower import FollowerMixin
from partition.replica.leader import LeaderMixin
from partition.replica.local_log import ReplicaLog
from partition.replica.messages import (
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


class ReplicaCore(LeaderMixin, FollowerMixin):
    def __init__(self, node_id: int, topic_id: str, partition: int, log: ReplicaLog,
                 config: ReplicaConfig | None = None, *, broker_epoch: int = -1,
                 topic: str = "", fenced_epoch: int = -1) -> None:  # fmt: skip
        self.node_id = node_id
        # Quorum mode: the highest fenced epoch this replica reported its position at (the
        # driver persists it before sending the report and passes it back after a restart).
        # Partition state of an earlier leader epoch is never acted on again (quorum_mode).
        self.fenced_epoch = fenced_epoch
        self.topic_id = topic_id
        self.partition_id = partition
        self.log = log
        self.config = config or ReplicaConfig()
        self.broker_epoch = broker_epoch
        self.partition: Partition | None = None
        self.eligible_brokers: dict[int, int] = {}
        self.role: Role = Offline()
        self._now_ms = 0
        self._next_fetch_id = 1
        self._logger = structlog.get_logger().bind(
            node=node_id, topic=topic or topic_id, partition=partition
        )
        self._sync()

    # ------------------------------------------------------------------------------- views

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def leader_epoch(self) -> int:
        return self.partition.leader_epoch if self.partition is not None else -1

    @property
    def is_leader(self) -> bool:
        return isinstance(self.role, Leader)

    @property
    def isr(self) -> tuple[int, ...]:
        return tuple(sorted(self._isr()))

    def position(self) -> ReplicaPosition:
        """(last epoch, LEO) of this replica: what a quorum-mode election compares."""
        return ReplicaPosition(self.node_id, self._latest_epoch, self._leo)

    def status(self) -> ReplicaStatus:
        role = self.role
        p = self.partition
        followers: tuple[FollowerStatus, ...] = ()
        maximal = self._isr()
        in_flight = False
        if isinstance(role, Leader):
            followers = tuple(FollowerStatus(f.replica_id, f.log_end_offset, f.last_fetch_time_ms,
                                             f.last_caught_up_time_ms, f.broker_epoch)
                              for _, f in sorted(role.followers.items()))  # fmt: skip
            maximal = self._maximal_isr(role)
            in_flight = role.in_flight is not None
        name = (
            "leader"
            if isinstance(role, Leader)
            else "follower"
            if isinstance(role, Follower)
            else "offline"
        )
        return ReplicaStatus(
            self.node_id, name, p.leader if p else NO_LEADER, p.leader_epoch if p else -1,
            p.partition_epoch if p else -1, tuple(sorted(self._isr())), tuple(sorted(maximal)),
            self._log_start, self._leo, self._hw, followers, in_flight,
        )  # fmt: skip

    # --------------------------------------------------------------------------- the API

    def handle(self, message: ReplicaInput, now_ms: int) -> list[Effect]:
        self._begin(now_ms)
        match message:
            case MetadataUpdated():
                effects = self._on_metadata(message, now_ms)
            case FetchRequest():
                effects = self._on_fetch_request(message, now_ms)
            case FetchResponse():
                effects = self._on_fetch_response(message, now_ms)
            case ProduceRequest():
                effects = self._on_produce(message, now_ms)
            case AlterPartitionResponse():
                effects = self._on_alter_partition_response(message, now_ms)
            case _:
                assert_never(message)
        self._check()
        return effects

    def tick(self, now_ms: int) -> list[Effect]:
        self._begin(now_ms)
        role = self.role
        effects: list[Effect] = []
        match role:
            case Leader():
                effects += self._maybe_resend_alter_partition(role, now_ms)
                effects += self._maybe_advance_hw(role, now_ms)  # caught-up status moves with time
                if now_ms >= role.next_isr_check_ms:
                    role.next_isr_check_ms = now_ms + self.config.replica_lag_time_max_ms // 2
                    effects += self._maybe_shrink_isr(role, now_ms)
                effects += self._maybe_expand_isr(role, now_ms)
                effects += self._expire_produces(role, now_ms)
                effects += self._answer_parked_fetches(role, now_ms)
            case Follower():
                effects += self._follower_tick(role, now_ms)
            case Offline():
                effects += self._maybe_report_position(role, now_ms)
            case _:
                assert_never(role)
        self._check()
        return effects

    def next_deadline_ms(self) -> int | None:
        """When `tick` has something to do (None: nothing until the next input)."""
        role = self.role
        match role:
            case Leader():
                if role.wake_fetches and role.parked_fetches:
                    return self._now_ms
                deadlines = [role.next_isr_check_ms]
                deadlines += [p.deadline_ms for p in role.pending_produces]
                deadlines += [f.deadline_ms for f in role.parked_fetches]
                if role.in_flight is not None and not role.awaiting_metadata:
                    deadlines.append(
                        role.in_flight.sent_ms + self.config.alter_partition_timeout_ms
                    )
                return min(deadlines)
            case Follower():
                return self._follower_deadline(role)
            case Offline():
                return role.next_report_ms
            case _:
                assert_never(role)

    # ------------------------------------------------------------------------ internals

    def _sync(self) -> None:
        """Re-read the log: every effect of the previous call has been executed by now."""
        self._leo = self.log.log_end_offset
        self._hw = self.log.high_watermark
        self._log_start = self.log.log_start_offset
        self._latest_epoch = self.log.latest_epoch()

    def _begin(self, now_ms: int) -> None:
        previous_hw = self._hw
        self._sync()
        if isinstance(self.role, Leader) and self._hw < previous_hw:
            raise InvariantViolation(f"leader HW went back from {previous_hw} to {self._hw}")
        self._now_ms = max(self._now_ms, now_ms)

    def _check(self) -> None:
        if self._hw > self._leo:
            raise InvariantViolation(f"HW {self._hw} above LEO {self._leo} on {self.node_id}")

    def _on_metadata(self, update: MetadataUpdated, now_ms: int) -> list[Effect]:
        p = update.partition
        if (p.topic_id, p.partition) != (self.topic_id, self.partition_id):
            raise ReplicaUsageError(f"metadata for {p.topic_id}-{p.partition} given to "
                                    f"{self.topic_id}-{self.partition_id}")  # fmt: skip
        self.eligible_brokers = {b.broker_id: b.broker_epoch for b in update.eligible_brokers}
        current = self.partition
        if current is not None and _epochs(p) < _epochs(current):
            # Stale partition state (an older record); only the eligible brokers may be new.
            return self._leader_reevaluate(now_ms)
        floor = self._epoch_floor()
        if p.leader_epoch < floor:
            # Older than an epoch we voted at, or than our own log's last epoch (a stale image
            # after a restart): acting on it could help a fenced zombie commit, or lead at an
            # epoch below our own entries (quorum_mode).
            self._logger.warning("partition.stale_metadata_ignored", leader_epoch=p.leader_epoch,
                                 epoch_floor=floor)  # fmt: skip
            return self._leader_reevaluate(now_ms)
        self.partition = p
        role = self.role
        if self.node_id not in p.replicas or p.leader == NO_LEADER:
            return self._become_offline(p, now_ms)
        if p.leader == self.node_id:
            if isinstance(role, Leader) and role.leader_epoch == p.leader_epoch:
                return self._leader_partition_changed(role, current, now_ms)
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
        if not self.config.is_quorum_mode:
            return -1
        return max(self.fenced_epoch, self._latest_epoch)

    def _leader_reevaluate(self, now_ms: int) -> list[Effect]:
        role = self.role
        return self._maybe_expand_isr(role, now_ms) if isinstance(role, Leader) else []

    def _leader_partition_changed(
        self, leader: Leader, old: Partition | None, now_ms: int
    ) -> list[Effect]:
        p = self.partition
        assert p is not None
        in_flight = leader.in_flight
        if in_flight is not None and p.partition_epoch > in_flight.request.partition_epoch:
            leader.in_flight = None  # superseded by what the controller committed
            leader.awaiting_metadata = False
        for r in p.replicas:  # a reassignment may add replicas (or remove them)
            if r != self.node_id and r not in leader.followers:
                leader.followers[r] = FollowerReplica(r)
        for r in [r for r in leader.followers if r not in p.replicas]:
            del leader.followers[r]
        old_isr = frozenset(old.isr) if old is not None else frozenset()
        return self._after_isr_change(leader, old_isr, now_ms)

    def _leave_leadership(self) -> list[Effect]:
        role = self.role
        if not isinstance(role, Leader):
            return []
        failed = self._fail_produces(role, Errors.NOT_LEADER_OR_FOLLOWER)
        return failed + self._fail_parked_fetches(role)

    def _become_leader(self, p: Partition, now_ms: int) -> list[Effect]:
        effects = self._leave_leadership()
        leader = Leader(p.leader_epoch, epoch_start_offset=self._leo,
                        next_isr_check_ms=now_ms + self.config.replica_lag_time_max_ms // 2)  # fmt: skip
        for r in p.replicas:
            if r != self.node_id:
                # Kafka Replica.resetReplicaState: ISR members count as caught up at election.
                caught_up_ms = now_ms if r in p.isr else 0
                leader.followers[r] = FollowerReplica(r, last_caught_up_time_ms=caught_up_ms)
        self.role = leader
        self._logger.info("partition.became_leader", leader_epoch=p.leader_epoch, isr=list(p.isr),
                          log_end_offset=self._leo, high_watermark=self._hw)  # fmt: skip
        effects.append(LeadershipChanged(self.node_id, p.leader_epoch, True))
        if self.config.is_quorum_mode and self._hw < self._leo:
            effects += self._append_epoch_marker(leader)
        effects += self._maybe_advance_hw(leader, now_ms)
        effects += self._maybe_expand_isr(leader, now_ms)
        return effects

    def _become_follower(self, p: Partition, now_ms: int) -> list[Effect]:
        effects = self._leave_leadership()
        follower = Follower(p.leader, p.leader_epoch, next_fetch_ms=now_ms)
        self.role = follower
        self._logger.info("partition.became_follower", leader=p.leader, leader_epoch=p.leader_epoch,
                          log_end_offset=self._leo, high_watermark=self._hw)  # fmt: skip
        effects.append(LeadershipChanged(p.leader, p.leader_epoch, False))
        if not self.config.leader_epoch_enable:
            # Pre-KIP-101: truncate to the local HW, which may be behind the leader's (KAFKA-1211).
            effects += self._truncate(self._hw)
        return effects + self._send_fetch(follower, now_ms)

    def _append_epoch_marker(self, leader: Leader) -> list[Effect]:
        """Quorum mode, a new leader with an uncommitted tail: an entry of its own epoch at once
        (Raft's no-op; partition.replica.quorum_mode step 5), so the figure-8 rule can let the HW
        pass the tail even if every later write is an idempotent retry of it."""
        marker = bytearray(epoch_marker_batch())
        rb.patch(marker, 0, self._leo, leader.leader_epoch)
        base = self._leo
        self._leo = base + 1
        self._latest_epoch = leader.leader_epoch
        leader.wake_fetches = True
        self._logger.info("partition.epoch_marker_appended", leader_epoch=leader.leader_epoch,
                          offset=base, high_watermark=self._hw)  # fmt: skip
        return [AppendAsLeader(bytes(marker), base, base, leader.leader_epoch, flush=True)]

    def _become_offline(self, p: Partition, now_ms: int) -> list[Effect]:
        effects = self._leave_leadership()
        if not isinstance(self.role, Offline) or self.role.leader_epoch != p.leader_epoch:
            offline = self.role = Offline(p.leader_epoch)
            self._logger.info(
                "partition.became_offline", leader=p.leader, leader_epoch=p.leader_epoch
            )
            effects.append(LeadershipChanged(p.leader, p.leader_epoch, False))
            if self.config.is_quorum_mode and self.node_id in p.replicas:
                # Fenced (quorum_mode step 2-3): from here on nothing of an earlier leader is
                # taken (no fetch is sent; responses are dropped: we are no follower), so the
                # position reported now is final until a leader of a later epoch.
                offline.next_report_ms = now_ms
                self.fenced_epoch = max(self.fenced_epoch, p.leader_epoch)
                effects += self._maybe_report_position(offline, now_ms)
        return effects

    def _maybe_report_position(self, offline: Offline, now_ms: int) -> list[Effect]:
        """Quorum mode, fenced: report (last epoch, LEO) at the fenced epoch, again every
        position_report_interval_ms (lost reports; a new active controller forgets them)."""
        if offline.next_report_ms is None or now_ms < offline.next_report_ms:
            return []
        offline.next_report_ms = now_ms + self.config.position_report_interval_ms
        request = position_report(self.node_id, self.broker_epoch, self.topic_id,
                                  self.partition_id, offline.leader_epoch, self.position())  # fmt: skip
        return [SendReplicaPosition(request)]
