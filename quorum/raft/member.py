"""Member: this node as a member of the quorum, the explicit state every handler of RaftCore
works on (quorum.raft.elections, quorum.raft.replication), and the role changes together with
the first messages of the new role (Kafka's KafkaRaftClient.onBecomeLeader / transitionTo*).

It holds who we are (node id, voters, config), QuorumState (the durable ElectionState and the
role: every transition goes through it), the local log view (LogView: log end, HW), the time
of the current call and an observer's bootstrap cursor. Handlers are free functions over a
Member; Member imports none of them, so there is no cycle and no reach back.

Rules kept here:
- a higher epoch always wins (KIP-595): `observe` follows the leader it names, or goes
  Unattached (an observer then asks the voters in turn, `maybe_bootstrap`);
- a candidacy is durable before any VoteRequest leaves (QuorumState persists first), and a
  pre-vote (KIP-996) changes nothing durable;
- a node names itself leader only while it leads, and names no leader it has lost
  (`leader_id`, `leader_hint`; tests/raft/test_no_storms.py): no self-named-leader storms;
- the voter set is the newest VotersRecord in the local log, committed or not (KIP-853,
  quorum.raft.voters): `voters_appended`, `log_truncated` and `snapshot_installed` keep it
  current, and every change goes through `apply_voters`, which also tells the leader role.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from quorum import codec
from quorum.raft.config import RaftConfig
from quorum.raft.effects import Effect, ElectionState, Send, VotersChanged
from quorum.raft.follower import Follower, fetch_request
from quorum.raft.leader import LeaderState
from quorum.raft.log import Entry, RaftLog
from quorum.raft.log_view import LogView
from quorum.raft.messages import EndQuorumEpochRequest, VoteRequest
from quorum.raft.snapshot import decode_snapshot, has_envelope
from quorum.raft.state import LeaderRole, Prospective, QuorumState, Resigned, Unattached
from quorum.raft.voters import VoterHistory, VotersRecord

_SCAN_BYTES = 1 << 20


def voters_record_of(entry: Entry) -> VotersRecord | None:
    """The VotersRecord an entry holds, if it is one (a control entry)."""
    if not entry.control:
        return None
    try:
        record: object = codec.decode(entry.data)
    except codec.DecodeError:
        return None
    return record if isinstance(record, VotersRecord) else None


def load_voter_history(log: RaftLog, bootstrap: VotersRecord) -> VoterHistory:
    """The voter set at every offset of `log`: the newest snapshot's voters (or `bootstrap`,
    `controller.quorum.voters`, when no snapshot records any), then every VotersRecord from the
    log start on."""
    base = bootstrap
    snapshot = log.latest_snapshot()
    if snapshot is not None:
        data = log.read_snapshot(snapshot, 0, log.snapshot_size(snapshot))
        if has_envelope(data):
            voters = decode_snapshot(data).voters  # the driver checked the file at open
            base = voters if voters is not None else base
    history = VoterHistory(base)
    offset = log.start_offset
    while offset < log.end_offset:
        entries = log.read(offset, _SCAN_BYTES)
        for entry in entries:
            record = voters_record_of(entry) if entry.offset >= offset else None
            if record is not None:
                history.add(entry.offset, record)
        offset = entries[-1].next_offset
    return history


class Member:
    def __init__(
        self,
        config: RaftConfig,
        node_id: int,
        bootstrap: VotersRecord,
        log: RaftLog,
        election: ElectionState,
        seed: int,
        now_ms: int,
    ) -> None:
        self.config = config
        self.node_id = node_id
        if config.dynamic_voters:
            self.history = load_voter_history(log, bootstrap)
        else:
            self.history = VoterHistory(bootstrap)
        self.voters_record = self.history.latest
        self.voters = self.voters_record.ids
        self.qs = QuorumState(config, node_id, self.voters, election, random.Random(seed))
        self.log = LogView(log, self.qs.log)
        self.now_ms = now_ms
        # Observer bootstrap: which voter to ask next, and not before when.
        self.bootstrap_index = 0
        self.bootstrap_next_ms = now_ms

    def begin(self, now_ms: int) -> None:
        """Start of a call: time never goes back; the log view catches up with the driver."""
        if now_ms > self.now_ms:
            self.now_ms = now_ms
        self.log.begin()

    # ------------------------------------------------------------------------------ queries

    @property
    def is_voter(self) -> bool:
        return self.qs.is_voter

    @property
    def epoch(self) -> int:
        return self.qs.epoch

    @property
    def leader_id(self) -> int | None:
        """The leader of the current epoch, if known. Never this node unless it leads now
        (KIP-595: a replica only names a leader it knows for the epoch): a former leader that
        resigned, restarted or fell back to a pre-vote keeps leader_id = itself in its persisted
        ElectionState, but naming itself would send every fetcher and client straight back here
        (the self-named-leader fetch storm the simulator found)."""
        role = self.qs.role
        if isinstance(role, LeaderRole):
            return self.node_id
        leader = self.qs.leader_id
        if isinstance(role, Resigned | Unattached) or leader == self.node_id:
            return None  # Unattached: an observer that lost its leader and bootstraps again
        return leader

    def may_vote(self, candidate_id: int) -> bool:
        """Whether we answer `candidate_id`'s (pre-)vote on its merits. Static voters: both of
        us must be voters. With voter changes (KIP-853) a candidate counts the votes of its own
        voter set, so we vote for any candidate, as Raft does (thesis 4.1), as long as we are a
        voter in our newest set or in our committed one: a voter whose newest record removes it
        but is not committed may still be needed to elect the leader that commits or
        truncates that record (the simulator found the deadlock without this)."""
        if not self.config.dynamic_voters:
            return self.is_voter and candidate_id in self.voters
        return self.is_voter or self.node_id in self.history.at(self.log.hw).ids

    def leader_hint(self) -> int | None:
        """Who we believe leads our epoch, for NOT_LEADER answers: never ourselves (we do not
        lead, or the answer would not be an error; see `leader_id`), and None while our
        leader seems gone (it resigned, refused our connection or timed out), so the fetcher
        backs off and asks another voter instead of being sent to a dead leader."""
        role = self.qs.role
        if isinstance(role, Follower | Prospective) and role.leader_lost:
            return None
        return self.leader_id

    def current_leader_reply(self, src: int, epoch: int) -> Follower | None:
        """Our Follower role, if `src` is the leader we follow in `epoch`."""
        role = self.qs.role
        if isinstance(role, Follower) and role.leader_id == src and role.epoch == epoch:
            return role
        return None

    # ------------------------------------------------------------- the voter set (KIP-853)

    def apply_voters(self, record: VotersRecord) -> list[Effect]:
        """Put `record` in force: our voter set, QuorumState's, and the leader role's."""
        if record == self.voters_record:
            return []
        self.voters_record = record
        self.voters = record.ids
        self.qs.set_voters(record.ids)
        leader = self.qs.leader
        if leader is not None:
            leader.set_voters(record.ids, self.now_ms)
        self.qs.log.info("quorum.voters_changed", voters=list(record.ids), epoch=self.epoch)
        return [VotersChanged(record)]

    def voters_appended(self, entries: Sequence[Entry]) -> list[Effect]:
        """Entries were appended to our log: a VotersRecord among them takes effect now."""
        if not self.config.dynamic_voters:
            return []
        effects: list[Effect] = []
        for entry in entries:
            record = voters_record_of(entry)
            if record is not None:
                self.history.add(entry.offset, record)
                effects += self.apply_voters(record)
        return effects

    def log_truncated(self, end_offset: int) -> list[Effect]:
        """A truncation removed entries at and above `end_offset`: so are their voter changes."""
        if self.history.truncate(end_offset):
            return self.apply_voters(self.history.latest)
        return []

    def snapshot_installed(self, voters: VotersRecord | None) -> list[Effect]:
        """A fetched snapshot replaced our log: its voters are in force (when it names them)."""
        if voters is None or not self.config.dynamic_voters:
            return []  # a leader without voter records: the set we know stays in force
        self.history.reset(voters)
        return self.apply_voters(voters)

    # ----------------------------------------------------- role changes with their first acts

    def observe(self, leader_id: int | None, epoch: int, now_ms: int) -> list[Effect]:
        """Learn from any epoch/leader hint: a higher epoch always wins (KIP-595)."""
        if epoch > self.epoch:
            if leader_id is not None and leader_id != self.node_id:
                return self.become_follower(epoch, leader_id, now_ms)
            effects = self.qs.to_unattached(epoch, now_ms)
            if not self.is_voter:
                effects += self.maybe_bootstrap(now_ms)
            return effects
        if epoch == self.epoch and leader_id is not None and leader_id != self.node_id:
            role = self.qs.role
            if isinstance(role, Follower) and role.leader_id == leader_id:
                return []
            if isinstance(role, Prospective) and role.leader_lost and role.leader_id == leader_id:
                return []  # it resigned or refused us: others still naming it is not news
            return self.become_follower(epoch, leader_id, now_ms)
        return []

    def become_follower(
        self, epoch: int, leader_id: int, now_ms: int, leader_lost: bool = False
    ) -> list[Effect]:
        """Follow `leader_id` and fetch from it at once. `leader_lost`: a prospective trying its
        old leader again keeps granting pre-votes until a fetch succeeds."""
        follower, effects = self.qs.to_follower(epoch, leader_id, now_ms)
        follower.leader_lost = leader_lost
        return effects + follower.send_fetch(self, now_ms)

    def start_prospective(self, now_ms: int, leader_lost: bool = False) -> list[Effect]:
        if not self.is_voter:
            # Removed from the voters (KIP-853): an observer finds the leader by asking.
            if isinstance(self.qs.role, Unattached):
                return []
            return self.qs.to_unattached(self.epoch, now_ms) + self.maybe_bootstrap(now_ms)
        if not self.config.pre_vote:
            return self.start_candidate(now_ms)
        effects = self.qs.to_prospective(now_ms, leader_lost)
        if len(self.voters) == 1:
            return effects + self.start_candidate(now_ms)
        log = self.log
        request = VoteRequest(self.epoch + 1, self.node_id, log.last_epoch, log.end, True)
        effects += [Send(v, request) for v in self.voters if v != self.node_id]
        return effects

    def start_candidate(self, now_ms: int, retries: int = 0) -> list[Effect]:
        # PersistElectionState(epoch+1, voted=self) comes first: fsynced before any VoteRequest.
        effects = self.qs.to_candidate(now_ms, retries)
        if len(self.voters) == 1:
            return effects + self.become_leader(now_ms)
        log = self.log
        request = VoteRequest(self.epoch, self.node_id, log.last_epoch, log.end, False)
        effects += [Send(v, request) for v in self.voters if v != self.node_id]
        return effects

    def become_leader(self, now_ms: int) -> list[Effect]:
        leader, effects = self.qs.to_leader(self.log, now_ms)
        return effects + leader.begin_epoch(now_ms)

    def resign(self, leader: LeaderState, now_ms: int, reason: str) -> list[Effect]:
        """Step down (graceful, or check-quorum), naming successors by log end offset so the
        first campaigns without waiting for a timeout (KIP-595 EndQuorumEpoch)."""
        successors = leader.successors_by_end_offset()
        effects = self.qs.to_resigned(now_ms, successors, reason)
        end = EndQuorumEpochRequest(leader.epoch, self.node_id, successors)
        effects += [Send(v, end) for v in successors]
        return effects

    def maybe_bootstrap(self, now_ms: int) -> list[Effect]:
        """An observer without a leader asks the voters in turn; any answer names the leader."""
        if now_ms < self.bootstrap_next_ms:
            return []
        voter = self.voters[self.bootstrap_index % len(self.voters)]
        self.bootstrap_index += 1
        self.bootstrap_next_ms = now_ms + self.config.fetch_retry_ms
        return [Send(voter, fetch_request(self, self.epoch, 0, max_wait_ms=0))]
