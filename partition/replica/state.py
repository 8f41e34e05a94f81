"""Roles of a replica and the leader's per-follower bookkeeping, one dataclass each.

Roles: `Offline` (no leader known, or not a replica), `Follower` (fetching from `leader_id`),
`Leader`. partition.replica.core owns every transition between them (`_become_leader`,
`_become_follower`, `_become_offline`), driven only by MetadataUpdated, never by a peer's word:
the leader never changes the ISR by itself either, it applies what the controller answers.

`FollowerReplica.update_fetch_state` is Kafka's Replica.updateFetchStateOrThrow; the caught-up
rule it keeps (lastCaughtUpTimeMs) is what ISR shrink (replica.lag.time.max.ms) reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from partition.purgatory import Purgatory
from partition.replica.messages import FetchRequest
from quorum.controller.messages import AlterPartitionRequest

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class FollowerReplica:
    """What the leader knows of one follower (Kafka's Replica / ReplicaState)."""

    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET  # its fetch offset; unknown until it fetches
    last_fetched_epoch: int = -1
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    broker_epoch: int = -1

    def update_fetch_state(self, fetch_offset: int, last_fetched_epoch: int, leader_log_end_offset: int,
                           now_ms: int, broker_epoch: int) -> None:  # fmt: skip
        """A fetch at or beyond the leader's LEO *now* makes the follower caught up now; one at or
        beyond the leader's LEO at its *previous* fetch makes it caught up as of that fetch."""
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetched_epoch = last_fetched_epoch
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = now_ms
        self.broker_epoch = broker_epoch

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, lag_time_max_ms: int) -> bool:
        """Kafka Replica.isCaughtUp: at the leader's LEO, or caught up within the lag time."""
        return (self.log_end_offset == leader_log_end_offset
                or now_ms - self.last_caught_up_time_ms <= lag_time_max_ms)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PendingProduce:
    """An acks=all produce, parked (partition.purgatory) until the HW reaches
    `required_offset` (last offset + 1): Kafka's DelayedProduce."""

    request_id: int
    base_offset: int
    last_offset: int

    @property
    def required_offset(self) -> int:
        return self.last_offset + 1


@dataclass(frozen=True, slots=True)
class InFlightAlterPartition:
    """The one AlterPartition in flight (KIP-497): while it is, the HW and acks use the maximal
    ISR (current | proposed)."""

    request: AlterPartitionRequest
    proposed_isr: frozenset[int]
    sent_ms: int


@dataclass(slots=True)
class Leader:
    leader_epoch: int
    epoch_start_offset: int  # LEO when elected: the first offset of this leader's epoch
    followers: dict[int, FollowerReplica] = field(default_factory=dict)
    produces: Purgatory[PendingProduce] = field(default_factory=Purgatory)  # acks=all
    fetches: Purgatory[FetchRequest] = field(default_factory=Purgatory)  # long polls
    in_flight: InFlightAlterPartition | None = None
    alter_retry_ms: int = 0  # no new AlterPartition before this (backoff after an error)
    awaiting_metadata: bool = False  # in_flight's outcome is unknown: wait for the records
    next_isr_check_ms: int = 0


@dataclass(slots=True)
class Follower:
    leader_id: int
    leader_epoch: int
    in_flight: FetchRequest | None = None
    sent_ms: int = 0
    next_fetch_ms: int = 0  # when to (re)send a fetch if none is in flight
    parked_reads: Purgatory[FetchRequest] = field(default_factory=Purgatory)  # KIP-392 long polls


@dataclass(slots=True)
class Offline:
    leader_epoch: int = -1
    # replication.mode=quorum, fenced (a replica, no leader): when to re-send the position report
    next_report_ms: int | None = None


Role = Leader | Follower | Offline
