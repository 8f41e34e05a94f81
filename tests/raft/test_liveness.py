"""Leadership under faults: check-quorum, pre-vote on rejoin (KIP-996), graceful resign with
EndQuorumEpoch, fast pre-vote on a refused connection, linearizable read barriers."""

from __future__ import annotations

from structlog.testing import capture_logs

from quorum.raft.config import RaftConfig
from quorum.raft.core import NotLeader
from quorum.raft.effects import ReadBarrierCompleted, ReadBarrierFailed, Send
from quorum.raft.messages import EndQuorumEpochRequest, VoteRequest
from tests.raft.cluster import Cluster


def test_leader_cut_off_from_both_followers_resigns_by_check_quorum() -> None:
    c = Cluster()
    old = c.wait_for_leader()
    epoch = old.core.epoch
    c.isolate(old.node_id)
    cut_at = c.now
    with capture_logs() as logs:
        while old.core.is_leader:
            c.advance(10)
            assert c.now - cut_at < 4000
    # 1.5 x controller.quorum.fetch.timeout.ms = 3000 ms after the last fetch.
    assert 2900 <= c.now - cut_at <= 3100
    assert any(e["event"] == "quorum.check_quorum_failed" for e in logs)
    assert any(e["event"] == "quorum.resigned" and e["reason"] == "check-quorum" for e in logs)
    result, _ = old.core.propose([b"x"], c.now)
    assert result == NotLeader(None, epoch)
    new = next(n for n in c.leaders() if n is not old)
    assert new.core.epoch > epoch
    c.heal()
    c.advance(3000)
    assert c.leader() is new and old.core.leader_id == new.node_id


def test_voter_cut_off_for_ten_election_timeouts_rejoins_without_raising_the_epoch() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    epoch = leader.core.epoch
    loner = next(n for n in c.nodes.values() if n is not leader)
    c.isolate(loner.node_id)
    c.advance(10 * c.config.election_timeout_ms)
    assert loner.core.epoch == epoch  # pre-votes went nowhere: no epoch bump while cut off
    c.heal()
    c.advance(3000)
    assert c.leader() is leader and leader.core.epoch == epoch
    assert loner.core.leader_id == leader.node_id and loner.core.epoch == epoch
    c.commit(leader.node_id, b"after")
    c.advance(20)
    assert loner.core.high_watermark == leader.core.high_watermark


def test_without_pre_vote_the_same_rejoin_deposes_the_leader() -> None:
    c = Cluster(config=RaftConfig(pre_vote=False))
    leader = c.wait_for_leader()
    epoch = leader.core.epoch
    loner = next(n for n in c.nodes.values() if n is not leader)
    c.isolate(loner.node_id)
    c.advance(10 * c.config.election_timeout_ms)
    assert loner.core.epoch > epoch + 3  # it kept bumping the epoch
    c.heal()
    c.advance(3000)
    assert c.leader().core.epoch > epoch  # the healthy leader was disturbed


def test_graceful_resign_elects_the_top_successor_without_a_timeout() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    c.commit(leader.node_id, b"a")
    epoch = leader.core.epoch
    start = c.now
    effects = leader.core.resign(c.now)
    ends = [
        e.message
        for e in effects
        if isinstance(e, Send) and isinstance(e.message, EndQuorumEpochRequest)
    ]
    assert len(ends) == 2 and len(set(ends[0].preferred_successors)) == 2
    c.run(leader, effects)
    successor = c.nodes[ends[0].preferred_successors[0]]
    while not successor.core.is_leader:
        c.advance(1)
        assert c.now - start < 100, "successor not elected within 100 ms"
    assert successor.core.epoch == epoch + 1
    c.advance(50)
    assert leader.core.leader_id == successor.node_id


def test_refused_connection_to_a_dead_leader_fails_over_fast() -> None:
    c = Cluster()
    c.refuse_down = True
    old = c.wait_for_leader()
    c.commit(old.node_id, b"a")
    c.advance(300)
    c.stop(old.node_id)
    start = c.now
    new = None
    while new is None:
        c.advance(5)
        assert c.now - start < 1000, "no new leader within 1 s of the crash"
        new = next((n for n in c.leaders() if n is not old), None)
    # Discovery waits for the fetch retry (long poll + 50 ms), then pre-vote + vote.
    assert c.now - start <= 600
    c.commit(new.node_id, b"b")


def test_read_barrier_needs_a_fresh_majority_round() -> None:
    c = Cluster(config=RaftConfig(max_idle_interval_ms=0))
    leader = c.wait_for_leader()
    c.advance(1000)  # fetches parked
    c.run(leader, leader.core.read_barrier(7, c.now))
    assert leader.barriers == []  # not confirmed by the fetches that came before the barrier
    c.advance(5)
    assert leader.barriers == [ReadBarrierCompleted(7, leader.core.high_watermark)]


def test_read_barrier_on_a_follower_fails_with_a_leader_hint() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    follower = next(n for n in c.nodes.values() if n is not leader)
    c.run(follower, follower.core.read_barrier(1, c.now))
    assert follower.barriers == [ReadBarrierFailed(1, leader.node_id, leader.core.epoch)]


def test_isolated_leader_never_confirms_a_read_barrier() -> None:
    c = Cluster()
    old = c.wait_for_leader()
    c.isolate(old.node_id)
    c.run(old, old.core.read_barrier(9, c.now))
    new = None
    while new is None:
        c.advance(50)
        new = next((n for n in c.leaders() if n is not old), None)
    c.commit(new.node_id, b"newer")  # a write the old leader cannot see
    c.advance(4000)
    assert old.barriers == [ReadBarrierFailed(9, None, old.core.epoch)]


def test_single_voter_read_barrier_completes_at_once() -> None:
    c = Cluster(voters=1)
    c.advance(1)
    node = c.nodes[1]
    c.run(node, node.core.read_barrier(3, c.now))
    assert node.barriers == [ReadBarrierCompleted(3, node.core.high_watermark)]


def test_split_vote_resolves_within_backoff_not_a_full_timeout() -> None:
    c = Cluster(voters=3)
    c.stop(3)
    for nid in (1, 2):
        core = c.nodes[nid].core
        c.run(c.nodes[nid], core.tick(core.next_deadline_ms()))
    # Both are prospective at once; both pre-votes pass, both become candidates in epoch 1.
    c.advance(3)
    assert {c.nodes[n].core.role_name for n in (1, 2)} == {"candidate"}
    assert [
        v
        for _, e in c.effect_log
        if isinstance(e, Send) and isinstance(v := e.message, VoteRequest) and not v.pre_vote
    ]
    start = c.now
    leader = c.wait_for_leader(within_ms=1000)
    assert leader.core.epoch == 2 and c.now - start <= 1000


def test_observer_follows_the_new_leader_after_check_quorum() -> None:
    # Kafka pitfall 10a: a leader cut off from the voters but not from an observer must not
    # keep feeding it stale metadata.
    c = Cluster(observers=(101,))
    old = c.wait_for_leader()
    c.advance(200)
    observer = c.nodes[101]
    assert observer.core.leader_id == old.node_id
    for v in c.voters:
        if v != old.node_id:
            c.cut |= {(old.node_id, v), (v, old.node_id)}
    c.advance(4000)
    new = next(n for n in c.leaders() if n is not old)
    assert not old.core.is_leader
    c.advance(3000)
    assert observer.core.leader_id == new.node_id and observer.core.epoch == new.core.epoch
    result = c.commit(new.node_id, b"fresh")
    c.advance(50)
    assert observer.committed[result.last_offset][1] == b"fresh"


def test_begin_quorum_epoch_is_resent_until_acked_or_fetched() -> None:
    from quorum.raft.messages import BeginQuorumEpochRequest, ErrorCode, FetchRequest, VoteResponse

    c = Cluster()
    core = c.nodes[1].core
    effects = core.tick(core.next_deadline_ms())
    now = c.now = core.next_deadline_ms()
    effects = core.handle(2, VoteResponse(ErrorCode.NONE, None, 0, True, 1, True), now)
    effects += core.handle(2, VoteResponse(ErrorCode.NONE, None, 1, True, 1, False), now)
    begins = [
        e.to
        for e in effects
        if isinstance(e, Send) and isinstance(e.message, BeginQuorumEpochRequest)
    ]
    assert begins == [2, 3]
    core.handle(2, FetchRequest(2, 1, 0, 0), now + 10)  # node 2 fetched: that is an ack
    resent = core.tick(now + c.config.fetch_timeout_ms // 2)
    again = [
        e.to
        for e in resent
        if isinstance(e, Send) and isinstance(e.message, BeginQuorumEpochRequest)
    ]
    assert again == [3]


def test_voter_stuck_at_a_higher_epoch_with_a_stale_log_rejoins() -> None:
    # Node 3 once won a pre-vote round, became candidate in a higher epoch and lost (its log
    # is behind). The others never heard of that epoch. Pre-votes alone would leave it out
    # forever (found by the simulator, seed 589); the quorum must move up to its epoch.
    from quorum.raft.effects import ElectionState

    c = Cluster()
    leader = c.wait_for_leader()
    behind = next(n for n in c.nodes.values() if n is not leader)
    c.stop(behind.node_id)
    for i in range(5):
        c.commit(leader.node_id, b"w%d" % i)
    stuck_epoch = leader.core.epoch + 3
    behind.persisted = ElectionState(stuck_epoch, voted_id=behind.node_id)
    back = c.restart(behind.node_id)
    c.advance(8000)
    new = c.leader()
    assert new.core.epoch > stuck_epoch
    assert back.core.leader_id == new.node_id and back.core.epoch == new.core.epoch
    assert back.core.high_watermark == new.core.high_watermark


def test_observer_finds_the_successor_soon_after_a_graceful_resign() -> None:
    c = Cluster(observers=(101,))
    old = c.wait_for_leader()
    c.advance(300)
    observer = c.nodes[101]
    assert observer.core.leader_id == old.node_id
    c.run(old, old.core.resign(c.now))
    start = c.now
    while observer.core.leader_id in (None, old.node_id):
        c.advance(10)
        assert c.now - start < 500, "observer still without the successor"
    new = c.leader()
    assert observer.core.leader_id == new.node_id and new is not old
