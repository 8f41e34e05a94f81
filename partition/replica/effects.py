"""What the replica core asks its driver to do. Effects come as an ordered list and the order is
the durability contract (as in quorum/raft/effects.py): a driver executes them one after another,
synchronously, before the core sees its next input. So a produce is answered (CompleteProduce)
only after the AppendAsLeader it depends on, a follower's next fetch is sent only after the
truncation or append before it, and log effects are applied in the order the core decided them.

Log effects (AppendAsLeader, AppendAsFollower, TruncateTo, TruncateFully, UpdateHighWatermark,
IncrementLogStartOffset)
are executed by `partition.replica.local_log.LocalReplicaLog.execute` over a PartitionLog.
"""

from __future__ import annotations

from dataclasses import dataclass

from partition.replica.messages import FetchRequest, FetchResponse, ProduceResponse
from quorum.controller.messages import AlterPartitionRequest, ReportReplicaPositionRequest


@dataclass(frozen=True, slots=True)
class AppendAsLeader:
    """Append producer batches at the log end. `records` are the producer's bytes, validated by
    the core (CRC included); the log stamps `base_offset` (== the LEO when executed) and
    `leader_epoch` into them as it writes, and the executor checks it assigned exactly
    [base_offset, last_offset]."""

    records: bytes
    base_offset: int
    last_offset: int
    leader_epoch: int
    # replication.mode=quorum: fsync before the next effect (the leader counts its own LEO in
    # the majority, and a majority must mean durable, as a Raft vote does). ISR mode: False,
    # Kafka's flush.ms/flush.messages policy (replication, not fsync, is the durability).
    flush: bool = False


@dataclass(frozen=True, slots=True)
class AppendAsFollower:
    """Append batches fetched from the leader, unchanged; the first starts at the LEO."""

    records: bytes
    # replication.mode=quorum: fsync before the next effect, so the next fetch (which reports
    # this LEO to the leader, who counts it in the majority) and a position report carry only
    # durable data. One fsync per fetch round, not per record.
    flush: bool = False


@dataclass(frozen=True, slots=True)
class TruncateTo:
    """Remove everything at or above `offset` (a batch boundary) after divergence."""

    offset: int


@dataclass(frozen=True, slots=True)
class TruncateFully:
    """Empty the log and restart it at `start_offset` (the leader's log start moved past ours)."""

    start_offset: int


@dataclass(frozen=True, slots=True)
class UpdateHighWatermark:
    """The HW is now `high_watermark`: consumers may read below it (checkpointed lazily, as
    Kafka's replication-offset-checkpoint)."""

    high_watermark: int


@dataclass(frozen=True, slots=True)
class IncrementLogStartOffset:
    """A follower follows the leader's log start offset (Kafka's fetcher: the follower's log
    start = max(own, leader's) after each fetch; maybeIncrementLogStartOffset): segments wholly
    below it are deleted. Never above the follower's HW."""

    log_start_offset: int


@dataclass(frozen=True, slots=True)
class SendFetch:
    """Send a Fetch to the leader `to` (best effort; retried on the core's own timers)."""

    to: int
    request: FetchRequest


@dataclass(frozen=True, slots=True)
class SendFetchResponse:
    """Answer a Fetch: to replica `to`, or to the consumer whose request had `request_id` when
    `to` is CONSUMER_REPLICA_ID."""

    to: int
    response: FetchResponse


@dataclass(frozen=True, slots=True)
class SendAlterPartition:
    """Send AlterPartition to the active controller (one in flight per partition, KIP-497)."""

    request: AlterPartitionRequest


@dataclass(frozen=True, slots=True)
class SendReplicaPosition:
    """replication.mode=quorum: send this replica's position at the fenced epoch to the active
    controller (its vote in the election; best effort, re-sent on the core's timer). Before
    sending, the driver persists `request.leader_epoch` as the partition's fenced epoch if it is
    higher than the stored one, and gives it back to the core after a restart (`fenced_epoch`):
    a replica never follows a leader of an earlier epoch than one it voted at."""

    request: ReportReplicaPositionRequest


@dataclass(frozen=True, slots=True)
class CompleteProduce:
    """Answer the produce request `response.request_id` (never for acks=0)."""

    response: ProduceResponse


@dataclass(frozen=True, slots=True)
class LeadershipChanged:
    """This replica became leader or follower (or offline: leader_id -1) in `leader_epoch`."""

    leader_id: int
    leader_epoch: int
    is_self: bool


Effect = (
    AppendAsLeader
    | AppendAsFollower
    | TruncateTo
    | TruncateFully
    | UpdateHighWatermark
    | IncrementLogStartOffset
    | SendFetch
    | SendFetchResponse
    | SendAlterPartition
    | SendReplicaPosition
    | CompleteProduce
    | LeadershipChanged
)
LogEffect = (
    AppendAsLeader
    | AppendAsFollower
    | TruncateTo
    | TruncateFully
    | UpdateHighWatermark
    | IncrementLogStartOffset
)
