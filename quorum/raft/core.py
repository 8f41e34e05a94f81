"""RaftCore: the sans-IO KRaft-style Raft state machine (KIP-595, KIP-996 pre-vote, KIP-630
snapshots, check-quorum). Inputs are messages, ticks and API calls with an explicit `now_ms`;
outputs are ordered effects (quorum.raft.effects). No I/O, no clock, only the seeded RNG.

The log contract: the core READS through RaftLog and WRITES only through effects, which the
driver executes synchronously, in order, before the next input. Within one call the core keeps
its own view of what it has asked for but the driver has not yet done (quorum.raft.log_view),
resynchronised from the log at the start of every call.

Invariants (InvariantViolation when broken), each enforced where the state changes:
- the high watermark never decreases; a follower never truncates below it (KIP-595, Kafka's
  truncateToEndOffset check) (LogView); a leader advances it only past its epoch start
  (figure 8; LeaderState);
- at most one leader and one vote per epoch (QuorumState);
- responses are matched statelessly (see quorum.raft.messages): stale ones are dropped.

Liveness rules (no message storms; tests/raft/test_no_storms.py): a node names itself leader
only while it leads, and names no leader it has lost (Member.leader_id, Member.leader_hint); an
observer whose Fetch is refused, or answered NOT_LEADER without a usable hint, waits a backoff
before it asks the next voter, never at the same instant.

Structure (after apache/kafka raft/): this module holds the API, the queries and the dispatch.
The state every handler shares is one explicit object, quorum.raft.member.Member (QuorumState,
the log view, who we are); the message handlers are functions over it (quorum.raft.elections,
quorum.raft.replication); role behaviour lives in the roles (quorum.raft.leader.LeaderState,
quorum.raft.follower.Follower); every role change goes through quorum.raft.state.QuorumState.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import assert_never

from quorum.raft import elections, membership, replication
from quorum.raft.config import RaftConfig
from quorum.raft.effects import DeleteLogPrefix, Effect, ElectionState, ReadBarrierFailed
from quorum.raft.errors import RaftUsageError
from quorum.raft.follower import Follower
from quorum.raft.leader import LeaderState
from quorum.raft.log import OffsetAndEpoch, RaftLog
from quorum.raft.member import Member
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.state import (
    Candidate,
    LeaderRole,
    Prospective,
    Resigned,
    Unattached,
    Voted,
)
from quorum.raft.voters import Voter, VotersRecord

__all__ = ["Accepted", "NotLeader", "ProposeResult", "QuorumStatus", "RaftCore", "ReplicaStatus"]


OBSERVER_SESSION_TIMEOUT_MS = 300_000

_ROLE_NAMES: dict[type, str] = {
    cls: "leader" if cls is LeaderRole else cls.__name__.lower()
    for cls in (Unattached, Voted, Prospective, Candidate, Follower, Resigned, LeaderRole)
}


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
    log_start_offset: int = 0
    latest_snapshot: OffsetAndEpoch | None = None
    voter_endpoints: tuple[tuple[int, str], ...] = ()  # (node id, host:port), KIP-853 records


class RaftCore:
    def __init__(
        self,
        config: RaftConfig,
        node_id: int,
        voters: tuple[int, ...],
        log: RaftLog,
        election_state: ElectionState | None,
        seed: int,
        now_ms: int,
        voter_endpoints: Mapping[int, str] | None = None,
    ) -> None:
        """`voters` (with `voter_endpoints`) is the bootstrap set, `controller.quorum.voters`:
        in force until a snapshot or a VotersRecord in the log says otherwise (KIP-853)."""
        if len(set(voters)) != len(voters) or not voters:
            raise RaftUsageError(f"voters must be distinct and non-empty: {voters}")
        endpoints = voter_endpoints or {}
        bootstrap = VotersRecord.of([Voter(v, endpoints.get(v, "")) for v in voters])
        self._log = log
        self._member = m = Member(
            config, node_id, bootstrap, log, election_state or ElectionState(0), seed, now_ms
        )
        snapshot = log.latest_snapshot()
        self._snapshots: list[OffsetAndEpoch] = [snapshot] if snapshot is not None else []
        m.qs.restore(now_ms)
        role = m.qs.role
        if m.voters == (node_id,) and isinstance(role, Unattached | Resigned):
            role.election_deadline_ms = now_ms  # a quorum of one elects itself at once

    # ------------------------------------------------------------------------------ queries

    @property
    def node_id(self) -> int:
        return self._member.node_id

    @property
    def voters(self) -> tuple[int, ...]:
        return self._member.voters

    @property
    def epoch(self) -> int:
        return self._member.qs.election.epoch

    @property
    def leader_id(self) -> int | None:
        """The leader of the current epoch, if known; never this node unless it leads now
        (Member.leader_id has the rule and why)."""
        return self._member.leader_id

    @property
    def is_leader(self) -> bool:
        return self._member.qs.leader is not None

    @property
    def high_watermark(self) -> int:
        return self._member.log.hw

    @property
    def election_state(self) -> ElectionState:
        return self._member.qs.election

    @property
    def role(self) -> object:
        """The current role object: a new one at every transition (and so at every new epoch),
        which lets a driver notice a change with one identity test after each input."""
        return self._member.qs.role

    @property
    def role_name(self) -> str:
        # A table, not isinstance and a str.lower(): drivers ask after every input.
        return _ROLE_NAMES[type(self._member.qs.role)]

    def status(self) -> QuorumStatus:
        """DescribeQuorum: role, epoch, HW; on the leader, one row per voter and live observer.
        Times are core times (`now_ms` of the calls); drivers convert them for display."""
        m = self._member
        replicas: tuple[ReplicaStatus, ...] = ()
        ls = m.qs.leader
        if ls is not None:
            rows = [
                ReplicaStatus(
                    p.node_id,
                    m.log.end if p.node_id == m.node_id else p.end_offset,
                    m.now_ms if p.node_id == m.node_id else p.last_fetch_ms,
                    m.now_ms if p.node_id == m.node_id else p.last_caught_up_ms,
                    is_voter,
                )
                for is_voter, table in ((True, ls.voter_progress), (False, ls.observer_progress))
                for p in table.values()
                # Observers are listed until 5 min after their last fetch (Kafka's
                # OBSERVER_SESSION_TIMEOUT_MS), as DescribeQuorum does.
                if is_voter or m.now_ms - (p.last_fetch_ms or 0) <= OBSERVER_SESSION_TIMEOUT_MS
            ]
            replicas = tuple(rows)
        e = m.qs.election
        return QuorumStatus(
            m.node_id,
            self.role_name,
            e.epoch,
            m.leader_id,
            e.voted_id,
            m.log.hw,
            m.log.end,
            m.voters,
            replicas,
            self._log.start_offset,
            self._log.latest_snapshot(),
            tuple((v.node_id, v.endpoint) for v in m.voters_record.voters),
        )

    @property
    def voters_record(self) -> VotersRecord:
        """The voter set in force, with endpoints (the newest VotersRecord in the log)."""
        return self._member.voters_record

    def voters_at(self, offset: int) -> VotersRecord:
        """The voter set in force at `offset` (what a snapshot ending there records)."""
        return self._member.history.at(offset)

    @property
    def voter_change_pending(self) -> bool:
        """A voter change is in flight on this leader, or the newest one is not committed."""
        m = self._member
        ls = m.qs.leader
        return (ls is not None and ls.voter_change is not None) or (
            m.history.latest_offset >= m.log.hw
        )

    def next_deadline_ms(self) -> int:
        """The time at which `tick` next has something to do."""
        m = self._member
        role = m.qs.role
        match role:  # the steady roles first: drivers ask after every input
            case LeaderRole():
                return role.state.next_deadline_ms()
            case Follower():
                return role.next_deadline_ms(m.now_ms, m.config.fetch_retry_ms)
            case Unattached():
                if m.is_voter:
                    return role.election_deadline_ms
                return m.bootstrap_next_ms
            case Voted() | Prospective() | Candidate() | Resigned():
                return role.election_deadline_ms
            case _:
                assert_never(role)

    # -------------------------------------------------------------------------------- inputs

    def handle(self, src: int, message: RaftMessage, now_ms: int) -> list[Effect]:
        """Process one message from node `src`."""
        effects = self._dispatch(src, message, now_ms)
        more = membership.step(self._member, now_ms)  # [] after nearly every input
        return effects + more if more else effects

    def _dispatch(self, src: int, message: RaftMessage, now_ms: int) -> list[Effect]:
        m = self._member
        m.begin(now_ms)
        match message:  # replication first: nearly every message (the classes are disjoint)
            case FetchRequest():
                return replication.on_fetch_request(m, src, message, now_ms)
            case FetchResponse():
                return replication.on_fetch_response(m, src, message, now_ms)
            case VoteRequest():
                return elections.on_vote_request(m, src, message, now_ms)
            case VoteResponse():
                return elections.on_vote_response(m, src, message, now_ms)
            case BeginQuorumEpochRequest():
                return elections.on_begin_quorum_epoch(m, src, message, now_ms)
            case EndQuorumEpochRequest():
                return elections.on_end_quorum_epoch(m, src, message, now_ms)
            case BeginQuorumEpochResponse():
                return elections.on_begin_quorum_epoch_response(m, src, message, now_ms)
            case EndQuorumEpochResponse():
                return m.observe(message.leader_id, message.leader_epoch, now_ms)
            case FetchSnapshotRequest():
                return replication.on_fetch_snapshot_request(m, src, message, now_ms)
            case FetchSnapshotResponse():
                return replication.on_fetch_snapshot_response(m, src, message, now_ms)
            case _:
                assert_never(message)

    def tick(self, now_ms: int) -> list[Effect]:
        """Fire whatever timers are due at `now_ms`."""
        effects = self._tick(now_ms)
        return effects + membership.step(self._member, now_ms)

    def _tick(self, now_ms: int) -> list[Effect]:
        m = self._member
        m.begin(now_ms)
        role = m.qs.role
        match role:
            case Unattached():
                if not m.is_voter:
                    return m.maybe_bootstrap(now_ms)
                if now_ms >= role.election_deadline_ms:
                    return m.start_prospective(now_ms)
                return []
            case Voted() | Resigned() | Candidate():
                if now_ms >= role.election_deadline_ms:
                    return m.start_prospective(now_ms)
                return []
            case Prospective():
                if now_ms < role.election_deadline_ms:
                    return []
                if role.leader_id is not None:
                    # Try our old leader again before another round (it may be reachable now),
                    # still granting pre-votes until a fetch succeeds (no ping-pong of refusals).
                    return m.become_follower(role.epoch, role.leader_id, now_ms, leader_lost=True)
                return m.start_prospective(now_ms)
            case Follower():
                return replication.tick_follower(m, role, now_ms)
            case LeaderRole():
                return replication.tick_leader(m, role.state, now_ms)
            case _:
                assert_never(role)

    def propose(self, records: Sequence[bytes], now_ms: int,
                counts: Sequence[int] | None = None) -> tuple[ProposeResult, list[Effect]]:  # fmt: skip
        """Append `records` as one batch if leader, record i as one entry spanning counts[i]
        offsets (default one each; a data partition proposes a Kafka batch as one entry).
        Drivers should pass every record that arrived while the previous effects ran in ONE
        call: that is the group commit (one fsync)."""
        m = self._member
        m.begin(now_ms)
        ls = m.qs.leader
        if ls is None:
            return NotLeader(m.leader_id, m.epoch), []
        if not records:
            raise RaftUsageError("propose() needs at least one record")
        if counts is not None and (len(counts) != len(records) or min(counts) < 1):
            raise RaftUsageError(f"counts {counts} do not give each record >= 1 offset")
        first, effects = ls.propose(records, now_ms, counts)
        total = len(records) if counts is None else sum(counts)
        effects += membership.step(m, now_ms)
        return Accepted(first, first + total - 1, ls.epoch), effects

    # ------------------------------------------------------------ voter changes (KIP-853)

    def add_voter(self, request_id: int, voter: Voter, now_ms: int) -> list[Effect]:
        """AddRaftVoter: answered by VoterChangeCompleted(request_id) (quorum.raft.membership)."""
        self._member.begin(now_ms)
        return membership.add_voter(self._member, request_id, voter, now_ms)

    def remove_voter(self, request_id: int, node_id: int, now_ms: int) -> list[Effect]:
        """RemoveRaftVoter: answered by VoterChangeCompleted(request_id)."""
        self._member.begin(now_ms)
        return membership.remove_voter(self._member, request_id, node_id, now_ms)

    def update_voter(self, request_id: int, voter: Voter, now_ms: int) -> list[Effect]:
        """UpdateRaftVoter (a voter's endpoint): answered by VoterChangeCompleted(request_id)."""
        self._member.begin(now_ms)
        return membership.update_voter(self._member, request_id, voter, now_ms)

    def read_barrier(self, request_id: int, now_ms: int) -> list[Effect]:
        """Ask for a linearizable read point: ReadBarrierCompleted once a majority confirmed this
        leadership after now (Raft thesis 6.4 ReadIndex, over pull replication)."""
        m = self._member
        m.begin(now_ms)
        ls = m.qs.leader
        if ls is None:
            return [ReadBarrierFailed(request_id, m.leader_id, m.epoch)]
        return ls.read_barrier(request_id, now_ms)

    def answer_long_polls(self, src: int, due_by_ms: int, now_ms: int) -> list[Effect]:
        """Answer now the parked Fetch of `src` whose long poll would end by `due_by_ms` (a
        leader may answer a long poll at any time before its max wait). For drivers that host
        many Raft groups: answering every group's poll of one peer together puts their next
        fetches in one message (partition/raft/mux.py). Nothing to do unless leading."""
        m = self._member
        m.begin(now_ms)
        ls = m.qs.leader
        if ls is None:
            return []
        return ls.answer_parked(src, due_by_ms)

    def peer_unreachable(self, peer: int, now_ms: int) -> list[Effect]:
        """The driver could not connect to `peer` (refused), or its liveness probe found the
        process hung (harness/net/liveness.py). A voter whose leader is gone starts a pre-vote at
        once (ours, not Kafka's: pre-vote keeps it from disturbing a live leader, since the other
        voters refuse it while they still fetch from that leader).

        An observer asks the next voter only after controller.quorum.retry.backoff.ms (Kafka's
        RequestManager backs a failed node off for retry.backoff.ms): asking at once spins at
        one instant when every voter is down (the refused-bootstrap storm the simulator found),
        since each refusal comes back immediately and triggers the next request."""
        m = self._member
        m.begin(now_ms)
        role = m.qs.role
        retry_ms = now_ms + m.config.retry_backoff_ms
        if isinstance(role, Follower) and role.leader_id == peer:
            if not m.is_voter:
                m.bootstrap_next_ms = retry_ms
                return m.qs.to_unattached(m.epoch, now_ms)
            if m.config.fast_pre_vote_on_unreachable and m.config.pre_vote:
                return m.start_prospective(now_ms, leader_lost=True)
        elif (
            isinstance(role, Prospective)
            and role.leader_id == peer
            and role.rejected
            and m.config.fast_pre_vote_on_unreachable
        ):
            # A voter refused our pre-vote, maybe because it still heard that leader then; the
            # leader is still unreachable now: ask again rather than wait out the election
            # timeout (two followers that notice a few ms apart would refuse each other, one
            # for its live leader, the other for a shorter log). A pre-vote changes no state.
            return m.start_prospective(now_ms, leader_lost=True)
        elif isinstance(role, Unattached) and not m.is_voter:
            # Sooner than the unanswered-fetch retry, never at once: at most one bootstrap Fetch
            # per retry.backoff.ms, however many refusals (or duplicates of them) arrive.
            m.bootstrap_next_ms = retry_ms
        return []

    def resign(self, now_ms: int) -> list[Effect]:
        """Graceful step-down (controlled shutdown): flush the batch, then EndQuorumEpoch naming
        successors by log end offset so #0 campaigns without waiting for a timeout."""
        m = self._member
        m.begin(now_ms)
        ls = m.qs.leader
        if ls is None:
            return []
        effects = ls.flush_batch(now_ms) if ls.batch else []
        return effects + m.resign(ls, now_ms, "graceful")

    def snapshot_taken(self, snapshot: OffsetAndEpoch, now_ms: int) -> list[Effect]:
        """The state machine wrote a snapshot at a committed offset: drop the log prefix below
        the newest snapshot that is at least `snapshot_retention_entries` behind this one, so
        replicas a little behind still fetch records. The log start always stays at a snapshot's
        end offset (KIP-630): below it, only a snapshot id tells the epoch of an offset, which
        the leader needs to judge a fetcher's last_fetched_epoch."""
        m = self._member
        m.begin(now_ms)
        if snapshot.offset > m.log.hw:
            raise RaftUsageError(
                f"snapshot {snapshot} is beyond the high watermark {m.log.hw} (epoch {m.epoch})"
            )
        if snapshot not in self._snapshots:
            self._snapshots.append(snapshot)
            self._snapshots.sort()
        limit = snapshot.offset - m.config.snapshot_retention_entries
        eligible = [s for s in self._snapshots if s.offset <= limit]
        if not eligible or eligible[-1].offset <= self._log.start_offset:
            return []
        before = eligible[-1].offset
        self._snapshots = [s for s in self._snapshots if s.offset >= before]
        ls = m.qs.leader
        # A spare voter's long poll may wait below the new log start (spare_voter_linger_ms):
        # it takes its records now, while they are still in the log, not after the deletion.
        effects = ls.answer_parked_below(before) if ls is not None else []
        return effects + [DeleteLogPrefix(before)]

    # ----------------------------------------------------------------------------- internals

    def _leader_state(self) -> LeaderState | None:
        """The leader role's state while this node leads (for white-box tests)."""
        return self._member.qs.leader
