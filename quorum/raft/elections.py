"""Elections for RaftCore (a mixin: same object, split by concern): pre-vote (KIP-996), votes
(KIP-595), becoming leader, graceful resign, BeginQuorumEpoch / EndQuorumEpoch.

Invariants: a vote is granted only to a candidate whose log (last epoch, end offset) is at least
as up to date as ours (Raft 5.4.1), at most once per epoch, and only after it is persisted
(QuorumState returns PersistElectionState before the response is sent); a candidacy is durable
before any VoteRequest leaves; a pre-vote changes no durable state on either side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from quorum.raft.config import RaftConfig
from quorum.raft.effects import Effect, Send
from quorum.raft.leader import LeaderState
from quorum.raft.log import Entry, RaftLog
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.state import Candidate, Follower, LeaderRole, Prospective, QuorumState


class ElectionMixin:
    # Provided by RaftCore / ReplicationMixin.
    _config: RaftConfig
    _node_id: int
    _voters: tuple[int, ...]
    _log: RaftLog
    _qs: QuorumState
    _now_ms: int
    _end: int
    _last_epoch: int

    @property
    def epoch(self) -> int:
        return self._qs.epoch

    if TYPE_CHECKING:  # defined by RaftCore and ReplicationMixin; stubs only for the type checker

        @property
        def leader_id(self) -> int | None: ...

        def _observe(self, leader_id: int | None, epoch: int, now_ms: int) -> list[Effect]: ...

        def _leader_state(self) -> LeaderState | None: ...

        def _abandon_leadership(self) -> list[Effect]: ...

        def _log_is_ok(self, last_epoch: int, end_offset: int) -> bool: ...

        def _leader_append(self, entries: list[Entry], now_ms: int) -> list[Effect]: ...

        def _leader_change_entry(self, ls: LeaderState) -> Entry: ...

    def _start_prospective(self, now_ms: int, leader_lost: bool = False) -> list[Effect]:
        if not self._qs.is_voter:
            return []
        effects = self._abandon_leadership()
        if not self._config.pre_vote:
            return effects + self._start_candidate(now_ms)
        effects += self._qs.to_prospective(now_ms, leader_lost)
        if len(self._voters) == 1:
            return effects + self._start_candidate(now_ms)
        request = VoteRequest(self.epoch + 1, self._node_id, self._last_epoch, self._end, True)
        effects += [Send(v, request) for v in self._voters if v != self._node_id]
        return effects

    def _start_candidate(self, now_ms: int, retries: int = 0) -> list[Effect]:
        # PersistElectionState(epoch+1, voted=self) comes first: fsynced before any VoteRequest.
        effects = self._qs.to_candidate(now_ms, retries)
        if len(self._voters) == 1:
            return effects + self._become_leader(now_ms)
        request = VoteRequest(self.epoch, self._node_id, self._last_epoch, self._end, False)
        effects += [Send(v, request) for v in self._voters if v != self._node_id]
        return effects

    def _on_vote_request(self, src: int, req: VoteRequest, now_ms: int) -> list[Effect]:
        effects: list[Effect] = []
        if not self._qs.is_voter or req.candidate_id not in self._voters:
            return [Send(src, self._vote_response(req, False, ErrorCode.INCONSISTENT_VOTER_SET))]
        if req.candidate_epoch < self.epoch:
            return [Send(src, self._vote_response(req, False, ErrorCode.FENCED_LEADER_EPOCH))]
        if req.pre_vote and req.candidate_epoch - 1 > self.epoch:
            # The prospective already holds a higher durable epoch (it won a pre-vote round once
            # and lost the vote). It can never go back, so the quorum must move up to it, or it
            # could never rejoin (etcd-io/raft answers a lower-term leader for the same reason).
            effects += self._abandon_leadership()
            effects += self._qs.to_unattached(req.candidate_epoch - 1, now_ms)
        log_ok = self._log_is_ok(req.last_offset_epoch, req.last_offset)
        if req.pre_vote:
            # KIP-996: no state changes; refuse while we lead or recently fetched from a leader.
            granted = req.candidate_epoch > self.epoch and log_ok and not self._has_live_leader()
            return effects + [Send(src, self._vote_response(req, granted))]
        if req.candidate_epoch > self.epoch:
            effects += self._abandon_leadership()
            effects += self._qs.to_unattached(req.candidate_epoch, now_ms)
        e = self._qs.election
        granted = e.leader_id is None and e.voted_id in (None, req.candidate_id) and log_ok
        role = self._qs.role
        if isinstance(role, Candidate) and req.candidate_epoch == role.epoch:
            # Split vote: another candidate in our epoch. Retry after a short random backoff
            # instead of a full election timeout; the randomness breaks the tie.
            backoff = self._qs.backoff_ms(role.retries + 1)
            role.election_deadline_ms = min(role.election_deadline_ms, now_ms + backoff)
        if granted and e.voted_id is None:
            effects += self._qs.to_voted(req.candidate_id, now_ms)  # persisted before the Send
        effects.append(Send(src, self._vote_response(req, granted)))
        return effects

    def _has_live_leader(self) -> bool:
        role = self._qs.role
        if isinstance(role, LeaderRole):
            return True
        if isinstance(role, Follower) and not role.leader_lost:
            last = role.last_fetch_ok_ms
            # Never fetched yet, or fetched within the fetch timeout: the leader counts as live.
            return last is None or self._now_ms - last < self._config.fetch_timeout_ms
        return False

    def _vote_response(
        self, req: VoteRequest, granted: bool, error: ErrorCode = ErrorCode.NONE
    ) -> VoteResponse:
        return VoteResponse(
            error, self.leader_id, self.epoch, granted, req.candidate_epoch, req.pre_vote
        )

    def _on_vote_response(self, src: int, resp: VoteResponse, now_ms: int) -> list[Effect]:
        effects: list[Effect] = []
        # A grant's leader hint at our epoch is stale news (the voter let the leader go).
        if resp.leader_epoch > self.epoch or not resp.vote_granted:
            effects = self._observe(resp.leader_id, resp.leader_epoch, now_ms)
        role = self._qs.role
        if src not in self._voters:
            return effects
        if (
            isinstance(role, Prospective)
            and resp.pre_vote
            and resp.candidate_epoch == role.epoch + 1
        ):
            (role.granted if resp.vote_granted else role.rejected).add(src)
            if len(role.granted) >= self._qs.majority:
                effects += self._start_candidate(now_ms)
        elif (
            isinstance(role, Candidate) and not resp.pre_vote and resp.candidate_epoch == role.epoch
        ):
            if resp.vote_granted:
                role.granted.add(src)
                if len(role.granted) >= self._qs.majority:
                    effects += self._become_leader(now_ms)
            else:
                role.rejected.add(src)
                if len(role.rejected) >= len(self._voters) - self._qs.majority + 1:
                    # Lost: back off (randomised, exponential) before the next pre-vote round.
                    backoff = self._qs.backoff_ms(role.retries + 1)
                    role.election_deadline_ms = min(role.election_deadline_ms, now_ms + backoff)
        return effects

    def _become_leader(self, now_ms: int) -> list[Effect]:
        role = self._qs.role
        assert isinstance(role, Candidate)
        ls = LeaderState(
            role.epoch,
            self._node_id,
            self._voters,
            self._end,
            now_ms,
            granting_voters=tuple(sorted(role.granted)),
        )
        effects = self._qs.to_leader(ls, now_ms)
        # KIP-595: the LeaderChange control record opens the epoch; committing it lets the HW move.
        effects += self._leader_append([self._leader_change_entry(ls)], now_ms)
        begin = BeginQuorumEpochRequest(ls.epoch, self._node_id)
        effects += [Send(v, begin) for v in sorted(ls.unacked_begin)]
        ls.begin_resend_ms = now_ms + self._config.begin_quorum_resend_ms
        return effects

    def _resign(self, now_ms: int, reason: str) -> list[Effect]:
        ls = self._leader_state()
        assert ls is not None
        successors = ls.successors_by_end_offset()
        effects = self._abandon_leadership()
        effects += self._qs.to_resigned(now_ms, successors, reason)
        end = EndQuorumEpochRequest(ls.epoch, self._node_id, successors)
        effects += [Send(v, end) for v in successors]
        return effects

    def _on_begin_quorum_epoch(
        self, src: int, req: BeginQuorumEpochRequest, now_ms: int
    ) -> list[Effect]:
        if req.leader_epoch < self.epoch:
            error = ErrorCode.FENCED_LEADER_EPOCH
            return [Send(src, BeginQuorumEpochResponse(error, self.leader_id, self.epoch))]
        effects = self._observe(req.leader_id, req.leader_epoch, now_ms)
        effects.append(
            Send(src, BeginQuorumEpochResponse(ErrorCode.NONE, self.leader_id, self.epoch))
        )
        return effects

    def _on_begin_quorum_epoch_response(
        self, src: int, resp: BeginQuorumEpochResponse, now_ms: int
    ) -> list[Effect]:
        effects = self._observe(resp.leader_id, resp.leader_epoch, now_ms)
        ls = self._leader_state()
        if ls is not None and resp.leader_epoch == ls.epoch and resp.error == ErrorCode.NONE:
            ls.unacked_begin.discard(src)
        return effects

    def _on_end_quorum_epoch(
        self, src: int, req: EndQuorumEpochRequest, now_ms: int
    ) -> list[Effect]:
        if req.leader_epoch < self.epoch:
            error = ErrorCode.FENCED_LEADER_EPOCH
            return [Send(src, EndQuorumEpochResponse(error, self.leader_id, self.epoch))]
        effects = self._observe(req.leader_id, req.leader_epoch, now_ms)
        role = self._qs.role
        response = Send(src, EndQuorumEpochResponse(ErrorCode.NONE, None, self.epoch))
        if not (isinstance(role, Follower) and role.leader_id == req.leader_id):
            return effects + [response]
        role.leader_lost = True
        if self._node_id in req.preferred_successors:
            rank = req.preferred_successors.index(self._node_id)
            if rank == 0:
                # The most up-to-date successor campaigns at once (KIP-595 EndQuorumEpoch).
                return effects + [response] + self._start_prospective(now_ms, leader_lost=True)
            n = len(req.preferred_successors)
            delay = (self._config.election_backoff_max_ms >> (n - 1)) << (rank - 1)
            role.fetch_deadline_ms = min(role.fetch_deadline_ms, now_ms + delay)
        return effects + [response]
