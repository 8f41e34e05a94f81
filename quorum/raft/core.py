"""RaftCore: the sans-IO KRaft-style Raft state machine (KIP-595, KIP-996 pre-vote, KIP-630
snapshots, check-quorum). Inputs are messages, ticks and API calls with an explicit `now_ms`;
outputs are ordered effects (quorum.raft.effects). No I/O, no clock, only the seeded RNG.

The log contract: the core READS through RaftLog and WRITES only through effects, which the
driver executes synchronously, in order, before the next input. Within one call the core keeps
its own view of what it has asked for but the driver has not yet done (`_end`, `_last_epoch`,
`_pending`), resynchronised from the log at the start of every call.

Invariants enforced here (InvariantViolation when broken):
- the high watermark never decreases; a follower never truncates below it (KIP-595, Kafka's
  truncateToEndOffset check); a leader advances it only past its epoch start (figure 8);
- at most one leader and one vote per epoch (QuorumState);
- responses are matched statelessly (see quorum.raft.messages): stale ones are dropped.

Liveness rules (no message storms; tests/raft/test_no_storms.py): a node names itself leader
only while it leads, and names no leader it has lost (RaftCore.leader_id, _leader_hint); an
observer whose Fetch is refused, or answered NOT_LEADER without a usable hint, waits a backoff
before it asks the next voter, never at the same instant.

This module holds the API and dispatch; elections live in quorum.raft.elections and replication
in quorum.raft.replication (mixins over the same object).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from quorum.raft.config import RaftConfig
from quorum.raft.effects import (
    DeleteLogPrefix,
    Effect,
    ElectionState,
    ReadBarrierFailed,
    Send,
)
from quorum.raft.elections import ElectionMixin
from quorum.raft.errors import RaftUsageError
from quorum.raft.leader import LeaderState, ReadBarrier
from quorum.raft.log import Entry, OffsetAndEpoch, RaftLog
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.replication import ReplicationMixin
from quorum.raft.state import (
    Candidate,
    Follower,
    LeaderRole,
    Prospective,
    QuorumState,
    Resigned,
    Unattached,
    Voted,
)

__all__ = ["Accepted", "NotLeader", "ProposeResult", "QuorumStatus", "RaftCore", "ReplicaStatus"]


OBSERVER_SESSION_TIMEOUT_MS = 300_000


@dataclass(frozen=True, slots=True)
class Accepted:
    """The records got offsets [first_offset, last_offset] in `epoch`; they are committed once
    CommitAdvanced passes last_offset (and lost, indeterminately, if LeaderChanged comes first)."""

    first_offset: int
    last_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class NotLeader:
    leader_id: int | None
    epoch: int


ProposeResult = Accepted | NotLeader


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    node_id: int
    log_end_offset: int
    last_fetch_ms: int | None
    last_caught_up_ms: int | None
    is_voter: bool


@dataclass(frozen=True, slots=True)
class QuorumStatus:
    """What DescribeQuorum / kafka-metadata-quorum --status|--replication need."""

    node_id: int
    role: str
    epoch: int
    leader_id: int | None
    voted_id: int | None
    high_watermark: int
    log_end_offset: int
    voters: tuple[int, ...]
    replicas: tuple[ReplicaStatus, ...]  # leader only: every voter and observer it knows


class RaftCore(ElectionMixin, ReplicationMixin):
    def __init__(
        self,
        config: RaftConfig,
        node_id: int,
        voters: tuple[int, ...],
        log: RaftLog,
        election_state: ElectionState | None,
        seed: int,
        now_ms: int,
    ) -> None:
        if len(set(voters)) != len(voters) or not voters:
            raise RaftUsageError(f"voters must be distinct and non-empty: {voters}")
        self._config = config
        self._node_id = node_id
        self._voters = tuple(voters)
        self._log = log
        self._qs = QuorumState(
            config, node_id, self._voters, election_state or ElectionState(0), random.Random(seed)
        )
        snapshot = log.latest_snapshot()
        # Everything in a snapshot is committed; otherwise the HW is unknown until a leader says.
        self._hw = max(log.start_offset, snapshot.offset if snapshot else 0)
        self._now_ms = now_ms
        self._end = log.end_offset
        self._last_epoch = log.last_epoch()
        self._pending: list[Entry] = []
        self._snapshots: list[OffsetAndEpoch] = [snapshot] if snapshot is not None else []
        self._bootstrap_index = 0
        self._bootstrap_next_ms = now_ms
        self._qs.restore(now_ms)
        role = self._qs.role
        if self._voters == (node_id,) and isinstance(role, Unattached | Resigned):
            role.election_deadline_ms = now_ms  # a quorum of one elects itself at once

    # ------------------------------------------------------------------------------ queries

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def voters(self) -> tuple[int, ...]:
        return self._voters

    @property
    def epoch(self) -> int:
        return self._qs.epoch

    @property
    def leader_id(self) -> int | None:
        """The leader of the current epoch, if known. Never this node unless it leads now
        (KIP-595: a replica only names a leader it knows for the epoch): a former leader that
        resigned, restarted or fell back to a pre-vote keeps leader_id = itself in its persisted
        ElectionState, but naming itself would send every fetcher and client straight back here
        (the self-named-leader fetch storm the simulator found)."""
        role = self._qs.role
        if isinstance(role, LeaderRole):
            return self._node_id
        leader = self._qs.leader_id
        if isinstance(role, Resigned | Unattached) or leader == self._node_id:
            return None  # Unattached: an observer that lost its leader and bootstraps again
        return leader

    @property
    def is_leader(self) -> bool:
        return isinstance(self._qs.role, LeaderRole)

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def election_state(self) -> ElectionState:
        return self._qs.election

    @property
    def role_name(self) -> str:
        role = self._qs.role
        return "leader" if isinstance(role, LeaderRole) else type(role).__name__.lower()

    def status(self) -> QuorumStatus:
        """DescribeQuorum: role, epoch, HW; on the leader, one row per voter and live observer.
        Times are core times (`now_ms` of the calls); drivers convert them for display."""
        replicas: tuple[ReplicaStatus, ...] = ()
        ls = self._leader_state()
        if ls is not None:
            rows = [
                ReplicaStatus(
                    p.node_id,
                    self._end if p.node_id == self._node_id else p.end_offset,
                    self._now_ms if p.node_id == self._node_id else p.last_fetch_ms,
                    self._now_ms if p.node_id == self._node_id else p.last_caught_up_ms,
                    is_voter,
                )
                for is_voter, table in ((True, ls.voter_progress), (False, ls.observer_progress))
                for p in table.values()
                # Observers are listed until 5 min after their last fetch (Kafka's
                # OBSERVER_SESSION_TIMEOUT_MS), as DescribeQuorum does.
                if is_voter or self._now_ms - (p.last_fetch_ms or 0) <= OBSERVER_SESSION_TIMEOUT_MS
            ]
            replicas = tuple(rows)
        e = self._qs.election
        return QuorumStatus(
            self._node_id,
            self.role_name,
            e.epoch,
            self.leader_id,
            e.voted_id,
            self._hw,
            self._end,
            self._voters,
            replicas,
        )

    def next_deadline_ms(self) -> int:
        """The time at which `tick` next has something to do."""
        role = self._qs.role
        match role:
            case Unattached():
                if self._qs.is_voter:
                    return role.election_deadline_ms
                return self._bootstrap_next_ms
            case Voted() | Prospective() | Candidate() | Resigned():
                return role.election_deadline_ms
            case Follower():
                if role.fetch_sent_ms is None:
                    return min(role.fetch_deadline_ms, self._now_ms)
                return min(role.fetch_deadline_ms, role.fetch_sent_ms + self._config.fetch_retry_ms)
            case LeaderRole():
                ls = self._leader_state()
                assert ls is not None
                return ls.next_deadline_ms(
                    self._config.check_quorum_timeout_ms, self._config.max_idle_interval_ms
                )
            case _:
                assert_never(role)

    # -------------------------------------------------------------------------------- inputs

    def handle(self, src: int, message: RaftMessage, now_ms: int) -> list[Effect]:
        """Process one message from node `src`."""
        self._begin(now_ms)
        match message:
            case VoteRequest():
                return self._on_vote_request(src, message, now_ms)
            case VoteResponse():
                return self._on_vote_response(src, message, now_ms)
            case BeginQuorumEpochRequest():
                return self._on_begin_quorum_epoch(src, message, now_ms)
            case EndQuorumEpochRequest():
                return self._on_end_quorum_epoch(src, message, now_ms)
            case BeginQuorumEpochResponse():
                return self._on_begin_quorum_epoch_response(src, message, now_ms)
            case EndQuorumEpochResponse():
                return self._observe(message.leader_id, message.leader_epoch, now_ms)
            case FetchRequest():
                return self._on_fetch_request(src, message, now_ms)
            case FetchResponse():
                return self._on_fetch_response(src, message, now_ms)
            case FetchSnapshotRequest():
                return self._on_fetch_snapshot_request(src, message, now_ms)
            case FetchSnapshotResponse():
                return self._on_fetch_snapshot_response(src, message, now_ms)
            case _:
                assert_never(message)

    def tick(self, now_ms: int) -> list[Effect]:
        """Fire whatever timers are due at `now_ms`."""
        self._begin(now_ms)
        role = self._qs.role
        match role:
            case Unattached():
                if not self._qs.is_voter:
                    return self._maybe_bootstrap(now_ms)
                if now_ms >= role.election_deadline_ms:
                    return self._start_prospective(now_ms)
                return []
            case Voted() | Resigned():
                if now_ms >= role.election_deadline_ms:
                    return self._start_prospective(now_ms)
                return []
            case Prospective():
                if now_ms < role.election_deadline_ms:
                    return []
                if role.leader_id is not None:
                    # Try our old leader again before another round (it may be reachable now),
                    # still granting pre-votes until a fetch succeeds (no ping-pong of refusals).
                    effects = self._become_follower(role.epoch, role.leader_id, now_ms)
                    if isinstance(follower := self._qs.role, Follower):
                        follower.leader_lost = True
                    return effects
                return self._start_prospective(now_ms)
            case Candidate():
                if now_ms >= role.election_deadline_ms:
                    return self._start_prospective(now_ms)
                return []
            case Follower():
                return self._tick_follower(role, now_ms)
            case LeaderRole():
                return self._tick_leader(now_ms)
            case _:
                assert_never(role)

    def propose(self, records: Sequence[bytes], now_ms: int) -> tuple[ProposeResult, list[Effect]]:
        """Append `records` as one batch if leader. Drivers should pass every record that arrived
        while the previous effects ran in ONE call: that is the group commit (one fsync)."""
        self._begin(now_ms)
        ls = self._leader_state()
        if ls is None:
            return NotLeader(self.leader_id, self.epoch), []
        if not records:
            raise RaftUsageError("propose() needs at least one record")
        first = self._end + len(ls.batch)
        for i, data in enumerate(records):
            ls.batch.append(Entry(first + i, ls.epoch, bytes(data)))
        effects: list[Effect] = []
        linger = self._config.append_linger_ms
        if linger == 0 or len(ls.batch) >= self._config.max_batch_entries:
            effects = self._flush_batch(now_ms)
        elif ls.batch_deadline_ms is None:
            ls.batch_deadline_ms = now_ms + linger
        return Accepted(first, first + len(records) - 1, ls.epoch), effects

    def read_barrier(self, request_id: int, now_ms: int) -> list[Effect]:
        """Ask for a linearizable read point: ReadBarrierCompleted once a majority confirmed this
        leadership after now (Raft thesis 6.4 ReadIndex, over pull replication)."""
        self._begin(now_ms)
        ls = self._leader_state()
        if ls is None:
            return [ReadBarrierFailed(request_id, self.leader_id, self.epoch)]
        ls.read_round += 1
        ls.barriers.append(ReadBarrier(request_id, ls.read_round))
        effects = self._maybe_complete_barriers()
        if ls.barriers:
            # Answer parked long polls now so followers echo the new round at once.
            effects += self._complete_parked(now_ms, only_with_data=False)
        return effects

    def answer_long_polls(self, src: int, due_by_ms: int, now_ms: int) -> list[Effect]:
        """Answer now the parked Fetch of `src` whose long poll would end by `due_by_ms` (a
        leader may answer a long poll at any time before its max wait). For drivers that host
        many Raft groups: answering every group's poll of one peer together puts their next
        fetches in one message (partition/raft/mux.py). Nothing to do unless leading."""
        self._begin(now_ms)
        ls = self._leader_state()
        if ls is None:
            return []
        due = [p for p in ls.parked if p.src == src and p.deadline_ms <= due_by_ms]
        if not due:
            return []
        ls.parked = [p for p in ls.parked if not (p.src == src and p.deadline_ms <= due_by_ms)]
        return [Send(p.src, self._fetch_response(ls, p.src, p.request)) for p in due]

    def peer_unreachable(self, peer: int, now_ms: int) -> list[Effect]:
        """The driver could not connect to `peer` (refused). A voter whose leader is gone starts a
        pre-vote at once (ours, not Kafka's: pre-vote keeps it from disturbing a live leader).

        An observer asks the next voter only after controller.quorum.retry.backoff.ms (Kafka's
        RequestManager backs a failed node off for retry.backoff.ms): asking at once spins at
        one instant when every voter is down (the refused-bootstrap storm the simulator found),
        since each refusal comes back immediately and triggers the next request."""
        self._begin(now_ms)
        role = self._qs.role
        retry_ms = now_ms + self._config.retry_backoff_ms
        if isinstance(role, Follower) and role.leader_id == peer:
            if not self._qs.is_voter:
                self._bootstrap_next_ms = retry_ms
                return self._qs.to_unattached(self.epoch, now_ms)
            if self._config.fast_pre_vote_on_unreachable and self._config.pre_vote:
                return self._start_prospective(now_ms, leader_lost=True)
        elif isinstance(role, Unattached) and not self._qs.is_voter:
            # Sooner than the unanswered-fetch retry, never at once: at most one bootstrap Fetch
            # per retry.backoff.ms, however many refusals (or duplicates of them) arrive.
            self._bootstrap_next_ms = retry_ms
        return []

    def resign(self, now_ms: int) -> list[Effect]:
        """Graceful step-down (controlled shutdown): flush the batch, then EndQuorumEpoch naming
        successors by log end offset so #0 campaigns without waiting for a timeout."""
        self._begin(now_ms)
        ls = self._leader_state()
        if ls is None:
            return []
        effects = self._flush_batch(now_ms) if ls.batch else []
        return effects + self._resign(now_ms, "graceful")

    def snapshot_taken(self, snapshot: OffsetAndEpoch, now_ms: int) -> list[Effect]:
        """The state machine wrote a snapshot at a committed offset: drop the log prefix below
        the newest snapshot that is at least `snapshot_retention_entries` behind this one, so
        replicas a little behind still fetch records. The log start always stays at a snapshot's
        end offset (KIP-630): below it, only a snapshot id tells the epoch of an offset, which
        the leader needs to judge a fetcher's last_fetched_epoch."""
        self._begin(now_ms)
        if snapshot.offset > self._hw:
            raise RaftUsageError(
                f"snapshot {snapshot} is beyond the high watermark {self._hw} (epoch {self.epoch})"
            )
        if snapshot not in self._snapshots:
            self._snapshots.append(snapshot)
            self._snapshots.sort()
        limit = snapshot.offset - self._config.snapshot_retention_entries
        eligible = [s for s in self._snapshots if s.offset <= limit]
        if not eligible or eligible[-1].offset <= self._log.start_offset:
            return []
        before = eligible[-1].offset
        self._snapshots = [s for s in self._snapshots if s.offset >= before]
        return [DeleteLogPrefix(before)]

    # ----------------------------------------------------------------------------- internals

    def _begin(self, now_ms: int) -> None:
        self._now_ms = max(self._now_ms, now_ms)
        self._end = self._log.end_offset
        self._last_epoch = self._log.last_epoch()
        self._pending.clear()

    def _leader_state(self) -> LeaderState | None:
        role = self._qs.role
        if isinstance(role, LeaderRole):
            assert isinstance(role.state, LeaderState)
            return role.state
        return None

    def _log_is_ok(self, last_epoch: int, end_offset: int) -> bool:
        """Raft 5.4.1: the candidate's log is at least as up to date as ours."""
        return (last_epoch, end_offset) >= (self._last_epoch, self._end)

    def _abandon_leadership(self) -> list[Effect]:
        """Leaving the leader role: fail waiting barriers (the batch never reached the log), and
        answer parked long polls NOT_LEADER_OR_FOLLOWER so fetchers move on at once."""
        ls = self._leader_state()
        if ls is None:
            return []
        failed: list[Effect] = [
            ReadBarrierFailed(b.request_id, None, ls.epoch) for b in ls.barriers
        ]
        for p in ls.parked:
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            answer = FetchResponse(
                error,
                None,
                ls.epoch,
                p.request.fetch_offset,
                last_fetched_epoch=p.request.last_fetched_epoch,
            )
            failed.append(Send(p.src, answer))
        ls.barriers.clear()
        ls.batch.clear()
        ls.parked.clear()
        return failed

    def _observe(self, leader_id: int | None, epoch: int, now_ms: int) -> list[Effect]:
        """Learn from any epoch/leader hint: a higher epoch always wins (KIP-595)."""
        if epoch > self.epoch:
            effects = self._abandon_leadership()
            if leader_id is not None and leader_id != self._node_id:
                return effects + self._become_follower(epoch, leader_id, now_ms)
            effects += self._qs.to_unattached(epoch, now_ms)
            if not self._qs.is_voter:
                effects += self._maybe_bootstrap(now_ms)
            return effects
        if epoch == self.epoch and leader_id is not None and leader_id != self._node_id:
            role = self._qs.role
            if isinstance(role, Follower) and role.leader_id == leader_id:
                return []
            if isinstance(role, Prospective) and role.leader_lost and role.leader_id == leader_id:
                return []  # it resigned or refused us: others still naming it is not news
            return self._become_follower(epoch, leader_id, now_ms)
        return []

    # --------------------------------------------------------------------------- observers

    def _maybe_bootstrap(self, now_ms: int) -> list[Effect]:
        """An observer without a leader asks the voters in turn; any answer names the leader."""
        if now_ms < self._bootstrap_next_ms:
            return []
        voter = self._voters[self._bootstrap_index % len(self._voters)]
        self._bootstrap_index += 1
        self._bootstrap_next_ms = now_ms + self._config.fetch_retry_ms
        return [Send(voter, self._fetch_request(self._end, self._last_epoch, 0, max_wait_ms=0))]
