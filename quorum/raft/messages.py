"""The quorum RPCs of KIP-595 (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch), KIP-630
(FetchSnapshot) and KIP-996 (pre-vote), as frozen slotted dataclasses registered with
quorum.codec, plus the control records the core writes into the log (LeaderChange, NoOp).

Matching responses to requests: the core keeps NO table of outstanding requests. Every response
echoes the part of its request that the receiver needs to judge whether it still applies
(`candidate_epoch` + `pre_vote` for votes, `fetch_offset` + `last_fetched_epoch` for fetches,
`snapshot_id` + `position` for snapshot chunks), and carries the responder's `leader_id` / `leader_epoch` hint. A response
that no longer matches the receiver's state (other epoch, other position, other role) is
dropped after its epoch hint has been observed. So duplicates and reordering are harmless: a
Fetch response is applied only when (`fetch_offset`, `last_fetched_epoch`) equals the follower's
current (log end offset, last epoch), i.e. the very log prefix the leader validated (two logs
that agree on the epoch of entry n-1 agree on entries 0..n-1: log matching).

`leader_id` is None when the responder knows no leader; `leader_epoch` is the responder's epoch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from quorum import codec
from quorum.raft.log import Entry, OffsetAndEpoch
from quorum.raft.voters import VotersRecord

codec.register("raft.Entry")(Entry)
codec.register("raft.OffsetAndEpoch")(OffsetAndEpoch)


class ErrorCode(enum.IntEnum):
    """Kafka error codes (same numbers as org.apache.kafka.common.protocol.Errors)."""

    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    INCONSISTENT_VOTER_SET = 94
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    INCONSISTENT_CLUSTER_ID = 104
    # KIP-853 (AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter).
    INVALID_VOTER_KEY = 126
    DUPLICATE_VOTER = 127
    VOTER_NOT_FOUND = 128

    @property
    def retriable(self) -> bool:
        """True when the same request may succeed later (after a metadata/leader refresh)."""
        return self in _RETRIABLE


_RETRIABLE = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_OUT_OF_RANGE,
    }
)


# ---------------------------------------------------------------------------------- Vote (KIP-595)


@codec.register("raft.VoteRequest")
@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A (pre-)vote for `candidate_id` in `candidate_epoch`. With `pre_vote` (KIP-996) the
    sender has NOT bumped its epoch: `candidate_epoch` is the epoch it would campaign in (its
    epoch + 1), and a grant changes no durable state on either side."""

    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int  # the candidate's log end offset
    pre_vote: bool = False


@codec.register("raft.VoteResponse")
@dataclass(frozen=True, slots=True)
class VoteResponse:
    error: ErrorCode
    leader_id: int | None
    leader_epoch: int
    vote_granted: bool
    candidate_epoch: int  # echo of the request
    pre_vote: bool  # echo of the request


# ------------------------------------------------------------------ Begin/EndQuorumEpoch (KIP-595)


@codec.register("raft.BeginQuorumEpochRequest")
@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    """A new leader announces itself; resent until acked (or until the voter fetches)."""

    leader_epoch: int
    leader_id: int


@codec.register("raft.BeginQuorumEpochResponse")
@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error: ErrorCode
    leader_id: int | None
    leader_epoch: int


@codec.register("raft.EndQuorumEpochRequest")
@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    """A leader resigns gracefully. `preferred_successors` are the other voters ordered by their
    log end offset, most up to date first: #0 campaigns at once, the others back off."""

    leader_epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@codec.register("raft.EndQuorumEpochResponse")
@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error: ErrorCode
    leader_id: int | None
    leader_epoch: int


# ------------------------------------------------------------------------------- Fetch (KIP-595)


@codec.register("raft.FetchRequest")
@dataclass(frozen=True, slots=True)
class FetchRequest:
    """Pull replication. `fetch_offset` is the follower's log end offset and doubles as the
    acknowledgement of everything below it; `last_fetched_epoch` is the epoch of the entry just
    below it, so the leader can detect divergence. The leader parks the fetch up to
    `max_wait_ms` when it has nothing new (long poll)."""

    replica_id: int
    leader_epoch: int  # the fetcher's current epoch (KIP-320 fencing)
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 500
    max_bytes: int = 1 << 20
    # Echo of the newest `read_round` this fetcher got from this leader: a fetch carrying round r
    # proves the fetcher still followed this leader after round r began (read barriers).
    read_round: int = 0


@codec.register("raft.FetchResponse")
@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Exactly one of: `records` (possibly empty), `diverging_epoch` (truncate to
    min(diverging_epoch.offset, own end offset for that epoch) and fetch again), `snapshot_id`
    (fetch_offset is below the leader's log start: FetchSnapshot it)."""

    error: ErrorCode
    leader_id: int | None
    leader_epoch: int
    fetch_offset: int  # echo of the request
    high_watermark: int = 0
    log_start_offset: int = 0
    records: tuple[Entry, ...] = ()
    diverging_epoch: OffsetAndEpoch | None = None
    snapshot_id: OffsetAndEpoch | None = None
    read_round: int = 0  # the leader's current read-barrier round, echoed by the next fetch
    last_fetched_epoch: int = 0  # echo: with fetch_offset, names the log prefix it was judged on
    # With snapshot_id: the voter set at the snapshot's end (KIP-853), in force once installed.
    snapshot_voters: VotersRecord | None = None


# ----------------------------------------------------------------------- FetchSnapshot (KIP-630)


@codec.register("raft.FetchSnapshotRequest")
@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    replica_id: int
    leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int = 1 << 20


@codec.register("raft.FetchSnapshotResponse")
@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error: ErrorCode
    leader_id: int | None
    leader_epoch: int
    snapshot_id: OffsetAndEpoch  # echo
    position: int  # echo: where `data` starts
    size: int = 0  # total snapshot size in bytes
    data: bytes = b""


# ------------------------------------------------------------------ control records (in the log)


@codec.register("raft.LeaderChangeRecord")
@dataclass(frozen=True, slots=True)
class LeaderChangeRecord:
    """First entry of every epoch (Entry.control=True): the new leader and the voters that
    elected it. Committing it is what lets the leader advance the HW (Raft thesis 3.6.2)."""

    leader_id: int
    leader_epoch: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...] = ()


@codec.register("raft.NoOpRecord")
@dataclass(frozen=True, slots=True)
class NoOpRecord:
    """Appended by an idle leader every metadata.max.idle.interval.ms (Entry.control=True)."""


RaftRequest = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
)
RaftResponse = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
)
RaftMessage = RaftRequest | RaftResponse
