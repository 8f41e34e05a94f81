"""Voter changes in the Raft core (KIP-853, quorum/raft/membership.py): the refusals and their
error codes, the voter set following the log (truncation undoes an uncommitted change, a
restart reads it back, a snapshot carries it to a replica that installs it), and a removed
leader resigning after commit even when its request timed out."""

from __future__ import annotations

import dataclasses

from quorum import codec
from quorum.raft.config import RaftConfig
from quorum.raft.core import RaftCore
from quorum.raft.effects import VoterChangeCompleted, VotersChanged
from quorum.raft.log import Entry, OffsetAndEpoch
from quorum.raft.messages import ErrorCode, VoteRequest, VoteResponse
from quorum.raft.snapshot import decode_snapshot, encode_snapshot
from quorum.raft.voters import Voter, VotersRecord
from tests.raft.cluster import Cluster, Node
from tests.raft.memlog import MemLog

# request.timeout (300 ms) < check-quorum (1.5 x 400 ms): a cut-off leader times a change out
# while it still leads.
CONFIG = RaftConfig(
    election_timeout_ms=200, fetch_timeout_ms=400, request_timeout_ms=300, max_idle_interval_ms=0
)


def change(c: Cluster, node: Node, call: str, target: int, request_id: int) -> None:
    core = node.core
    if call == "add":
        effects = core.add_voter(request_id, Voter(target, f"h:{target}"), c.now)
    elif call == "update":
        effects = core.update_voter(request_id, Voter(target, f"moved:{target}"), c.now)
    else:
        effects = core.remove_voter(request_id, target, c.now)
    c.run(node, effects)


def answer(node: Node, request_id: int) -> VoterChangeCompleted | None:
    return next((a for a in node.voter_changes if a.request_id == request_id), None)


def settle(c: Cluster, node: Node, request_id: int, within_ms: int = 2_000) -> VoterChangeCompleted:
    deadline = c.now + within_ms
    while (done := answer(node, request_id)) is None:
        assert c.now < deadline, f"r{request_id} not answered"
        c.advance(5)
    return done


def test_refusals_name_the_rule_they_enforce() -> None:
    c = Cluster(voters=3, config=CONFIG)
    leader = c.wait_for_leader()
    follower = next(n for n in c.nodes.values() if n is not leader)
    change(c, follower, "add", 9, 1)
    assert answer(follower, 1) is not None
    assert answer(follower, 1).error == ErrorCode.NOT_LEADER_OR_FOLLOWER  # type: ignore[union-attr]
    c.commit(leader.node_id, b"x")
    change(c, leader, "add", follower.node_id, 2)
    change(c, leader, "remove", 9, 3)
    change(c, leader, "update", 9, 4)
    errors = [answer(leader, i).error for i in (2, 3, 4)]  # type: ignore[union-attr]
    assert errors == [ErrorCode.DUPLICATE_VOTER, ErrorCode.VOTER_NOT_FOUND, ErrorCode.VOTER_NOT_FOUND]
    single = Cluster(voters=1, config=CONFIG)
    only = single.wait_for_leader()
    single.commit(1, b"x")
    change(single, only, "remove", 1, 5)
    assert answer(only, 5).error == ErrorCode.INVALID_REQUEST  # type: ignore[union-attr]
    static = Cluster(voters=1, config=dataclasses.replace(CONFIG, dynamic_voters=False))
    static_leader = static.wait_for_leader()
    static.commit(1, b"x")
    change(static, static_leader, "add", 2, 6)
    assert answer(static_leader, 6).error == ErrorCode.UNSUPPORTED_VERSION  # type: ignore[union-attr]


def test_an_uncommitted_change_blocks_the_next_and_a_truncation_undoes_it() -> None:
    """The leader appends voters(1,2) (removing 3) but is cut off: the request times out, the
    record stays uncommitted in its log and blocks any other change; the next leader's log does
    not have it, so the old leader truncates it away and 3 is a voter again everywhere."""
    c = Cluster(voters=3, config=CONFIG)
    leader = c.wait_for_leader()
    c.commit(leader.node_id, b"x")
    c.isolate(leader.node_id)
    change(c, leader, "remove", 3 if leader.node_id != 3 else 2, 1)
    removed = 3 if leader.node_id != 3 else 2
    assert removed not in leader.core.voters  # in force on the leader from the append
    assert leader.core.voter_change_pending
    c.advance(CONFIG.request_timeout_ms + 10)
    assert leader.core.is_leader
    assert answer(leader, 1).error == ErrorCode.REQUEST_TIMED_OUT  # type: ignore[union-attr]
    change(c, leader, "add", 9, 2)
    done = answer(leader, 2)
    assert done is not None and done.error == ErrorCode.REQUEST_TIMED_OUT
    assert "not committed" in done.message
    c.heal()
    new = c.wait_for_leader()
    c.commit(new.node_id, b"y", within_ms=5_000)
    c.advance(2_000)
    for node in c.nodes.values():
        assert node.core.voters == (1, 2, 3), (node.node_id, node.core.voters)
    assert any(
        isinstance(e, VotersChanged) and e.voters.ids == (1, 2, 3)
        for nid, e in c.effect_log
        if nid == leader.node_id
    ), "the truncation of the uncommitted record must put the old set back in force"


def test_a_removed_leader_resigns_after_commit_and_a_restart_reads_the_set_from_the_log() -> None:
    c = Cluster(voters=3, config=CONFIG)
    leader = c.wait_for_leader()
    c.commit(leader.node_id, b"x")
    change(c, leader, "remove", leader.node_id, 1)
    assert settle(c, leader, 1).error == ErrorCode.NONE
    assert not leader.core.is_leader
    others = tuple(sorted(n for n in c.nodes if n != leader.node_id))
    new = c.wait_for_leader()
    assert new.node_id in others and new.core.voters == others
    c.commit(new.node_id, b"y")
    victim = others[0] if others[0] != new.node_id else others[1]
    c.stop(victim)
    restarted = c.restart(victim)
    assert restarted.core.voters == others  # from the VotersRecord in its log, not the bootstrap
    c.advance(1_000)
    assert leader.core.role_name == "follower" and leader.core.voters == others


def test_update_changes_an_endpoint_and_a_fetched_snapshot_carries_the_voter_set() -> None:
    """Voter 2 moves: UpdateRaftVoter writes its new endpoint. Then the leader snapshots and
    deletes its log: observer 4, which never saw the VotersRecord, installs the snapshot and
    gets the voter set with it (the FetchResponse names it; the file's envelope records it)."""
    config = dataclasses.replace(CONFIG, snapshot_retention_entries=0)
    c = Cluster(voters=3, observers=(4,), config=config)
    leader = c.wait_for_leader()
    c.commit(leader.node_id, b"x")
    change(c, leader, "update", 2, 1)
    assert settle(c, leader, 1).error == ErrorCode.NONE
    assert leader.core.voters_record.endpoint_of(2) == "moved:2"
    c.commit(leader.node_id, b"y")
    c.stop(4)
    c.commit(leader.node_id, b"z")
    hw = leader.core.high_watermark
    snap = OffsetAndEpoch(hw, leader.core.epoch)
    voters = leader.core.voters_at(hw)
    leader.log.write_snapshot(snap, encode_snapshot(voters, b"state"))
    c.run(leader, leader.core.snapshot_taken(snap, c.now))
    assert leader.log.start_offset == hw
    fresh = c.restart(4)
    fresh.log.__init__()  # type: ignore[misc]  # a wiped observer: empty log
    fresh = c.restart(4)
    assert fresh.core.voters_record.endpoint_of(2) == ""  # bootstrap: no endpoints
    c.advance(2_000)
    assert fresh.installed == [snap]
    assert fresh.core.voters_record == voters
    assert decode_snapshot(fresh.log.snapshots[snap]).voters == VotersRecord.of(
        [Voter(1), Voter(2, "moved:2"), Voter(3)]
    )


def test_a_voter_removed_only_by_an_uncommitted_record_still_votes() -> None:
    """The simulator's seed 191 (tests/sim/test_membership_run.py), without the seed: node 3's
    log ends with a VotersRecord removing it that is not committed (HW 0). It must still answer
    votes on their merits: the leader that settles that record may need its vote."""
    log = MemLog()
    record = VotersRecord.of([Voter(1), Voter(2)])
    log.append([Entry(0, 1, b"x"), Entry(1, 1, codec.encode(record), control=True)])
    core = RaftCore(CONFIG, 3, (1, 2, 3), log, None, 0, 0)
    assert core.voters == (1, 2) and core.high_watermark == 0
    effects = core.handle(2, VoteRequest(2, 2, 1, 2), 0)
    (answer_,) = [e.message for e in effects if isinstance(getattr(e, "message", None), VoteResponse)]
    assert answer_.vote_granted and answer_.error == ErrorCode.NONE
    observer = RaftCore(CONFIG, 101, (1, 2, 3), MemLog(), None, 0, 0)
    effects = observer.handle(2, VoteRequest(2, 2, 1, 2), 0)
    (refused,) = [e.message for e in effects if isinstance(getattr(e, "message", None), VoteResponse)]
    assert refused.error == ErrorCode.INCONSISTENT_VOTER_SET and not refused.vote_granted
