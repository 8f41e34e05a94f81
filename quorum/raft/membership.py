"""Dynamic quorum membership (KIP-853): AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter on the
leader, as functions over quorum.raft.member.Member (after Kafka's AddVoterHandler,
RemoveVoterHandler and UpdateVoterHandler).

A change is one voter at a time (Raft thesis 4.1: any two consecutive voter sets then share a
majority, so two leaders can never be elected by disjoint majorities), carried out by the leader:

1. refused at once (VoterChangeCompleted with an error) when this node does not lead
   (NOT_LEADER_OR_FOLLOWER), when another change is in flight or the newest VotersRecord is not
   committed yet, or when the leader has not committed an entry of its own epoch (all
   REQUEST_TIMED_OUT, as Kafka; the last rule is the fix of the single-server change bug found
   after the Raft thesis: a leader must commit in its epoch before it changes the set), when
   the voter is already one (DUPLICATE_VOTER) or is not one (VOTER_NOT_FOUND), or when it would
   remove the last voter (INVALID_REQUEST);
2. an added voter must first catch up as an observer: the change waits until its fetches have
   acknowledged the leader's log end offset at the time of the request;
3. the new VotersRecord is appended; it is in force on every replica from the moment it is in
   that replica's log (quorum.raft.voters), on the leader too: the leader counts the new set for
   the high watermark at once;
4. once the high watermark passes the record the change is answered NONE; a leader that
   removed itself then resigns (EndQuorumEpoch to the remaining voters) and goes on as an
   observer. Past `request_timeout_ms` without that, the answer is REQUEST_TIMED_OUT (the record
   may still commit later; the next change waits for it).
"""

from __future__ import annotations

from quorum import codec
from quorum.raft.effects import Effect, VoterChangeCompleted
from quorum.raft.leader import LeaderState, VoterChange
from quorum.raft.log import Entry
from quorum.raft.member import Member
from quorum.raft.messages import ErrorCode
from quorum.raft.voters import Voter, VotersRecord

__all__ = ["add_voter", "remove_voter", "step", "update_voter"]


def _refuse(request_id: int, error: ErrorCode, message: str) -> list[Effect]:
    return [VoterChangeCompleted(request_id, error, message)]


def _check_leader(m: Member, request_id: int) -> tuple[LeaderState | None, list[Effect]]:
    """The leader state if a change may start now; otherwise the refusal (step 1)."""
    ls = m.qs.leader
    if ls is None:
        hint = f"not the leader (leader {m.leader_id}, epoch {m.epoch})"
        return None, _refuse(request_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, hint)
    if not m.config.dynamic_voters:
        return None, _refuse(request_id, ErrorCode.UNSUPPORTED_VERSION, "static voters")
    if ls.voter_change is not None:
        why = f"a voter change is in progress ({ls.voter_change.kind} {ls.voter_change.node_id})"
        return None, _refuse(request_id, ErrorCode.REQUEST_TIMED_OUT, why)
    if m.log.hw <= ls.epoch_start_offset:
        why = f"the leader has not committed an entry of epoch {ls.epoch} yet"
        return None, _refuse(request_id, ErrorCode.REQUEST_TIMED_OUT, why)
    latest = m.history.latest_offset
    if latest >= m.log.hw:
        why = f"the voter change at offset {latest} is not committed (HW {m.log.hw})"
        return None, _refuse(request_id, ErrorCode.REQUEST_TIMED_OUT, why)
    return ls, []


def add_voter(m: Member, request_id: int, voter: Voter, now_ms: int) -> list[Effect]:
    """AddRaftVoter: `voter` joins once it has caught up as an observer."""
    ls, refused = _check_leader(m, request_id)
    if ls is None:
        return refused
    if voter.node_id in m.voters:
        return _refuse(request_id, ErrorCode.DUPLICATE_VOTER, f"{voter.node_id} is a voter")
    record = VotersRecord.of([*m.voters_record.voters, voter])
    deadline = now_ms + m.config.request_timeout_ms
    ls.voter_change = VoterChange(
        request_id, "add", voter.node_id, record, deadline, catch_up_to=m.log.end
    )
    m.qs.log.info("quorum.voter_change_started", kind="add", node=voter.node_id, now_ms=now_ms)
    return step(m, now_ms)


def remove_voter(m: Member, request_id: int, node_id: int, now_ms: int) -> list[Effect]:
    """RemoveRaftVoter: `node_id` leaves (the leader itself too: it resigns after commit)."""
    ls, refused = _check_leader(m, request_id)
    if ls is None:
        return refused
    if node_id not in m.voters:
        return _refuse(request_id, ErrorCode.VOTER_NOT_FOUND, f"{node_id} is not a voter")
    if m.voters == (node_id,):
        return _refuse(request_id, ErrorCode.INVALID_REQUEST, "cannot remove the last voter")
    record = VotersRecord.of([v for v in m.voters_record.voters if v.node_id != node_id])
    deadline = now_ms + m.config.request_timeout_ms
    ls.voter_change = VoterChange(request_id, "remove", node_id, record, deadline)
    m.qs.log.info("quorum.voter_change_started", kind="remove", node=node_id, now_ms=now_ms)
    return step(m, now_ms)


def update_voter(m: Member, request_id: int, voter: Voter, now_ms: int) -> list[Effect]:
    """UpdateRaftVoter: a voter's endpoint changed (it restarted on another address)."""
    ls, refused = _check_leader(m, request_id)
    if ls is None:
        return refused
    if voter.node_id not in m.voters:
        return _refuse(request_id, ErrorCode.VOTER_NOT_FOUND, f"{voter.node_id} is not a voter")
    if m.voters_record.endpoint_of(voter.node_id) == voter.endpoint:
        return _refuse(request_id, ErrorCode.NONE, "unchanged")
    others = [v for v in m.voters_record.voters if v.node_id != voter.node_id]
    record = VotersRecord.of([*others, voter])
    deadline = now_ms + m.config.request_timeout_ms
    ls.voter_change = VoterChange(request_id, "update", voter.node_id, record, deadline)
    return step(m, now_ms)


def step(m: Member, now_ms: int) -> list[Effect]:
    """Move the leader's voter change on after any input: append once the new voter caught up,
    answer once committed (and resign if this leader removed itself), or time out."""
    ls = m.qs.leader
    if ls is None:
        return []
    change = ls.voter_change
    if change is None:
        if ls.node_id in ls.voters:  # counts_self: nothing to do (after nearly every input)
            return []
        return _maybe_resign(m, ls, now_ms)
    if change.appended_offset is None:
        if change.catch_up_to is not None:
            progress = ls.observer_progress.get(change.node_id)
            if progress is None or progress.end_offset < change.catch_up_to:
                return _maybe_expire(ls, change, now_ms, "the new voter has not caught up")
        return _append(m, ls, change, now_ms)
    if m.log.hw > change.appended_offset:
        ls.voter_change = None
        m.qs.log.info("quorum.voter_change_committed", kind=change.kind, node=change.node_id,
                      offset=change.appended_offset, now_ms=now_ms)  # fmt: skip
        effects: list[Effect] = [VoterChangeCompleted(change.request_id, ErrorCode.NONE)]
        return effects + _maybe_resign(m, ls, now_ms)
    return _maybe_expire(ls, change, now_ms, "the voter change was not committed in time")


def _append(m: Member, ls: LeaderState, change: VoterChange, now_ms: int) -> list[Effect]:
    effects = ls.flush_batch(now_ms) if ls.batch else []
    entry = Entry(m.log.end, ls.epoch, codec.encode(change.record), control=True)
    change.appended_offset = entry.offset
    m.history.add(entry.offset, change.record)
    effects += m.apply_voters(change.record)  # in force from the append, before the HW moves
    effects += ls.append([entry], now_ms)
    m.qs.log.info("quorum.voter_change_appended", kind=change.kind, node=change.node_id,
                  offset=entry.offset, voters=list(change.record.ids), now_ms=now_ms)  # fmt: skip
    return effects + step(m, now_ms)


def _maybe_resign(m: Member, ls: LeaderState, now_ms: int) -> list[Effect]:
    """A leader whose removal is committed steps down (KIP-853), even after its request timed
    out: the remaining voters elect one of their own."""
    if ls.counts_self or m.history.latest_offset >= m.log.hw:
        return []
    return m.resign(ls, now_ms, "removed from the voters")


def _maybe_expire(ls: LeaderState, change: VoterChange, now_ms: int, why: str) -> list[Effect]:
    if now_ms < change.deadline_ms:
        return []
    ls.voter_change = None
    return [VoterChangeCompleted(change.request_id, ErrorCode.REQUEST_TIMED_OUT, why)]
