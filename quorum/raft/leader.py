"""Bookkeeping of a leader for one epoch (after Kafka's LeaderState): what each voter holds, parked
long-poll fetches, the proposal batch under linger, BeginQuorumEpoch acks, read barriers and
check-quorum. Pure data + arithmetic; quorum.raft.core turns decisions into effects.

Invariants:
- the high watermark only moves forward, and only to an offset held by a majority of voters
  (the leader counts its own LEO, made of flushed appends) that is > epoch_start_offset, i.e.
  once this epoch's LeaderChange record is committed (Raft thesis 3.6.2, "figure 8");
- observers never count towards the high watermark, check-quorum or read barriers;
- a read barrier completes only after a majority proved, by a fetch echoing a read round that
  began after the barrier was requested, that they still followed this leader.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from quorum.raft.log import Entry
from quorum.raft.messages import FetchRequest


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one replica (for HW, check-quorum and DescribeQuorum)."""

    node_id: int
    end_offset: int = -1  # the replica's LEO as acknowledged by its fetch_offset; -1 unknown
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None
    read_round: int = 0  # newest read round this replica echoed
    hw_sent: int = -1  # the HW in our last answer to it: a stale one is answered without parking


@dataclass(slots=True)
class ParkedFetch:
    src: int
    request: FetchRequest
    deadline_ms: int


@dataclass(slots=True)
class ReadBarrier:
    request_id: int
    read_round: int  # completes once a majority echoed a round >= this one


@dataclass(slots=True)
class LeaderState:
    epoch: int
    node_id: int
    voters: tuple[int, ...]
    epoch_start_offset: int  # offset of this epoch's LeaderChange record
    now_ms: int
    granting_voters: tuple[int, ...] = ()
    voter_progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    observer_progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    unacked_begin: set[int] = field(default_factory=set)
    begin_resend_ms: int = 0
    parked: list[ParkedFetch] = field(default_factory=list)
    batch: list[Entry] = field(default_factory=list)
    batch_deadline_ms: int | None = None
    last_append_ms: int = 0
    read_round: int = 0
    barriers: list[ReadBarrier] = field(default_factory=list)
    check_quorum_start_ms: int = 0  # fetches before this do not count (the epoch began here)

    def __post_init__(self) -> None:
        for v in self.voters:
            # Check-quorum gives every voter a full timeout from the start of the epoch.
            self.voter_progress[v] = ReplicaProgress(v, last_fetch_ms=self.now_ms)
        self.unacked_begin = {v for v in self.voters if v != self.node_id}
        self.last_append_ms = self.now_ms
        self.check_quorum_start_ms = self.now_ms

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def progress_for(self, node_id: int) -> ReplicaProgress:
        if node_id in self.voter_progress:
            return self.voter_progress[node_id]
        return self.observer_progress.setdefault(node_id, ReplicaProgress(node_id))

    def record_fetch(self, src: int, request: FetchRequest, leader_end: int, now_ms: int) -> None:
        """A valid (non-diverging) fetch from `src`: it holds everything below fetch_offset."""
        p = self.progress_for(src)
        # max(): a delayed duplicate must not move a replica backwards within this epoch.
        p.end_offset = max(p.end_offset, request.fetch_offset)
        p.last_fetch_ms = now_ms
        p.read_round = max(p.read_round, request.read_round)
        if request.fetch_offset >= leader_end:
            p.last_caught_up_ms = now_ms
        self.unacked_begin.discard(src)

    def majority_end_offset(self, own_end: int) -> int:
        """The largest offset held by a majority of voters (Kafka's maybeUpdateHighWatermark)."""
        ends = sorted(
            (own_end if v == self.node_id else max(0, self.voter_progress[v].end_offset))
            for v in self.voters
        )
        ends.reverse()
        return ends[self.majority - 1]

    def has_quorum_contact(self, now_ms: int, timeout_ms: int) -> bool:
        """Check-quorum (KAFKA-15489): a majority (counting us) fetched within timeout_ms."""
        live = 1
        for v, p in self.voter_progress.items():
            last = p.last_fetch_ms
            if v != self.node_id and last is not None and now_ms - last <= timeout_ms:
                live += 1
        return live >= self.majority

    def check_quorum_deadline_ms(self, timeout_ms: int) -> int:
        """When has_quorum_contact may next turn false."""
        fetch_times = sorted(
            (p.last_fetch_ms or 0 for v, p in self.voter_progress.items() if v != self.node_id),
            reverse=True,
        )
        needed = self.majority - 1  # others needed besides us
        if needed <= 0 or len(fetch_times) < needed:
            return 1 << 62
        return fetch_times[needed - 1] + timeout_ms + 1

    def confirmed_round(self) -> int:
        """The newest read round a majority (counting us, always current) has echoed."""
        rounds = sorted(
            (self.read_round if v == self.node_id else self.voter_progress[v].read_round)
            for v in self.voters
        )
        rounds.reverse()
        return rounds[self.majority - 1]

    def successors_by_end_offset(self) -> tuple[int, ...]:
        """Other voters, most up-to-date first (EndQuorumEpoch.preferred_successors)."""
        others = [p for v, p in self.voter_progress.items() if v != self.node_id]
        others.sort(key=lambda p: (-p.end_offset, p.node_id))
        return tuple(p.node_id for p in others)

    def next_deadline_ms(self, check_quorum_timeout_ms: int, idle_interval_ms: int) -> int:
        deadlines = [self.check_quorum_deadline_ms(check_quorum_timeout_ms)]
        if self.unacked_begin:
            deadlines.append(self.begin_resend_ms)
        if self.parked:
            deadlines.append(min(p.deadline_ms for p in self.parked))
        if self.batch_deadline_ms is not None:
            deadlines.append(self.batch_deadline_ms)
        if idle_interval_ms > 0 and not self.batch:  # a lingering batch is the next append
            deadlines.append(self.last_append_ms + idle_interval_ms)
        return min(deadlines)
