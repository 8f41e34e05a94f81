"""Election messages (functions over quorum.raft.member.Member): pre-vote (KIP-996), votes
(KIP-595), BeginQuorumEpoch / EndQuorumEpoch. The role changes they cause go through Member and
QuorumState; the vote rules live with the state they read (QuorumState.can_grant_vote,
QuorumState.has_live_leader).

Invariants: a vote is granted only to a candidate whose log (last epoch, end offset) is at least
as up to date as ours (Raft 5.4.1), at most once per epoch, and only after it is persisted
(QuorumState returns PersistElectionState before the response is sent); a candidacy is durable
before any VoteRequest leaves; a pre-vote changes no durable state on either side.
"""

from __future__ import annotations

from quorum.raft.effects import Effect, Send
from quorum.raft.member import Member
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.state import Candidate, Follower, Prospective


def _vote_response(
    m: Member, req: VoteRequest, granted: bool, error: ErrorCode = ErrorCode.NONE
) -> VoteResponse:
    return VoteResponse(error, m.leader_id, m.epoch, granted, req.candidate_epoch, req.pre_vote)


def on_vote_request(m: Member, src: int, req: VoteRequest, now_ms: int) -> list[Effect]:
    effects: list[Effect] = []
    qs = m.qs
    if not m.may_vote(req.candidate_id):
        return [Send(src, _vote_response(m, req, False, ErrorCode.INCONSISTENT_VOTER_SET))]
    if req.candidate_epoch < m.epoch:
        return [Send(src, _vote_response(m, req, False, ErrorCode.FENCED_LEADER_EPOCH))]
    if req.pre_vote and req.candidate_epoch - 1 > m.epoch:
        # The prospective already holds a higher durable epoch (it won a pre-vote round once
        # and lost the vote). It can never go back, so the quorum must move up to it, or it
        # could never rejoin (etcd-io/raft answers a lower-term leader for the same reason).
        effects += qs.to_unattached(req.candidate_epoch - 1, now_ms)
    log_ok = m.log.is_up_to_date(req.last_offset_epoch, req.last_offset)
    if req.pre_vote:
        # KIP-996: no state changes; refuse while we lead or recently fetched from a leader.
        live = qs.has_live_leader(m.now_ms)
        granted = req.candidate_epoch > m.epoch and log_ok and not live
        return effects + [Send(src, _vote_response(m, req, granted))]
    if req.candidate_epoch > m.epoch:
        effects += qs.to_unattached(req.candidate_epoch, now_ms)
    granted = qs.can_grant_vote(req.candidate_id, log_ok)
    role = qs.role
    if isinstance(role, Candidate) and req.candidate_epoch == role.epoch:
        # Split vote: another candidate in our epoch. Retry after a short random backoff
        # instead of a full election timeout; the randomness breaks the tie.
        backoff = qs.backoff_ms(role.retries + 1)
        role.election_deadline_ms = min(role.election_deadline_ms, now_ms + backoff)
    if granted and qs.election.voted_id is None:
        effects += qs.to_voted(req.candidate_id, now_ms)  # persisted before the Send
    effects.append(Send(src, _vote_response(m, req, granted)))
    return effects


def on_vote_response(m: Member, src: int, resp: VoteResponse, now_ms: int) -> list[Effect]:
    effects: list[Effect] = []
    # A grant's leader hint at our epoch is stale news (the voter let the leader go).
    if resp.leader_epoch > m.epoch or not resp.vote_granted:
        effects = m.observe(resp.leader_id, resp.leader_epoch, now_ms)
    role = m.qs.role
    if src not in m.voters:
        return effects
    majority = m.qs.majority
    if isinstance(role, Prospective) and resp.pre_vote and resp.candidate_epoch == role.epoch + 1:
        (role.granted if resp.vote_granted else role.rejected).add(src)
        if len(role.granted) >= majority:
            effects += m.start_candidate(now_ms)
    elif isinstance(role, Candidate) and not resp.pre_vote and resp.candidate_epoch == role.epoch:
        if resp.vote_granted:
            role.granted.add(src)
            if len(role.granted) >= majority:
                effects += m.become_leader(now_ms)
        else:
            role.rejected.add(src)
            if len(role.rejected) >= len(m.voters) - majority + 1:
                # Lost: back off (randomised, exponential) before the next pre-vote round.
                backoff = m.qs.backoff_ms(role.retries + 1)
                role.election_deadline_ms = min(role.election_deadline_ms, now_ms + backoff)
    return effects


def on_begin_quorum_epoch(
    m: Member, src: int, req: BeginQuorumEpochRequest, now_ms: int
) -> list[Effect]:
    if req.leader_epoch < m.epoch:
        error = ErrorCode.FENCED_LEADER_EPOCH
        return [Send(src, BeginQuorumEpochResponse(error, m.leader_id, m.epoch))]
    effects = m.observe(req.leader_id, req.leader_epoch, now_ms)
    effects.append(Send(src, BeginQuorumEpochResponse(ErrorCode.NONE, m.leader_id, m.epoch)))
    return effects


def on_begin_quorum_epoch_response(
    m: Member, src: int, resp: BeginQuorumEpochResponse, now_ms: int
) -> list[Effect]:
    effects = m.observe(resp.leader_id, resp.leader_epoch, now_ms)
    leader = m.qs.leader
    if leader is not None and resp.leader_epoch == leader.epoch and resp.error == ErrorCode.NONE:
        leader.unacked_begin.discard(src)
    return effects


def on_end_quorum_epoch(
    m: Member, src: int, req: EndQuorumEpochRequest, now_ms: int
) -> list[Effect]:
    if req.leader_epoch < m.epoch:
        error = ErrorCode.FENCED_LEADER_EPOCH
        return [Send(src, EndQuorumEpochResponse(error, m.leader_id, m.epoch))]
    effects = m.observe(req.leader_id, req.leader_epoch, now_ms)
    role = m.qs.role
    response = Send(src, EndQuorumEpochResponse(ErrorCode.NONE, None, m.epoch))
    if not (isinstance(role, Follower) and role.leader_id == req.leader_id):
        return effects + [response]
    role.leader_lost = True
    if m.node_id in req.preferred_successors:
        rank = req.preferred_successors.index(m.node_id)
        if rank == 0:
            # The most up-to-date successor campaigns at once (KIP-595 EndQuorumEpoch).
            return effects + [response] + m.start_prospective(now_ms, leader_lost=True)
        n = len(req.preferred_successors)
        delay = (m.config.election_backoff_max_ms >> (n - 1)) << (rank - 1)
        role.fetch_deadline_ms = min(role.fetch_deadline_ms, now_ms + delay)
    return effects + [response]
