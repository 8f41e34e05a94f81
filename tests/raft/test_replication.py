"""Pull replication: HW rules (majority, figure 8, follower min), divergence truncation, long
poll, batching, idle no-ops, observers, snapshots + FetchSnapshot."""

from __future__ import annotations

import pytest

from quorum import codec
from quorum.raft.config import RaftConfig
from quorum.raft.core import Accepted, RaftCore
from quorum.raft.effects import (
    AppendToLog,
    CommitAdvanced,
    DeleteLogPrefix,
    ElectionState,
    FlushLog,
    InstallSnapshot,
    Send,
    TruncateLog,
)
from quorum.raft.errors import InvariantViolation, RaftUsageError
from quorum.raft.log import Entry, OffsetAndEpoch
from quorum.raft.messages import (
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    NoOpRecord,
    VoteResponse,
)
from tests.raft.cluster import Cluster
from tests.raft.memlog import MemLog


def log_with(*epochs: int) -> MemLog:
    log = MemLog()
    log.append([Entry(i, e, b"r%d" % i) for i, e in enumerate(epochs)])
    log.flush()
    return log


def sent(effects: list, kind: type) -> list:
    return [e.message for e in effects if isinstance(e, Send) and isinstance(e.message, kind)]


def elect(core: RaftCore, now: int = 0) -> list:
    """Drive a 3-voter core through pre-vote and vote with node 2's grants."""
    effects = core.tick(core.next_deadline_ms())
    epoch = core.epoch
    effects += core.handle(2, VoteResponse(ErrorCode.NONE, None, epoch, True, epoch + 1, True), now)
    effects += core.handle(
        2, VoteResponse(ErrorCode.NONE, None, epoch + 1, True, epoch + 1, False), now
    )
    assert core.is_leader
    return effects


def test_commit_reaches_every_replica_with_exact_offsets() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    result = c.commit(leader.node_id, b"a", b"b", b"c")
    assert result == Accepted(1, 3, 1)
    c.advance(50)
    for n in c.nodes.values():
        assert [n.committed[o][1] for o in (1, 2, 3)] == [b"a", b"b", b"c"]
        assert n.core.high_watermark == leader.core.high_watermark
        assert n.core.high_watermark <= n.log.end_offset


def test_commit_latency_is_a_round_trip_not_a_poll_interval() -> None:
    c = Cluster(config=RaftConfig(max_idle_interval_ms=0))
    leader = c.wait_for_leader()
    c.advance(2000)  # followers' fetches are parked now
    start = c.now
    c.commit(leader.node_id, b"x")
    assert c.now - start <= 5  # 1 ms links: append, parked fetch answered, ack


def test_long_poll_keeps_an_idle_quorum_quiet() -> None:
    c = Cluster(config=RaftConfig(max_idle_interval_ms=0))
    c.wait_for_leader()
    c.advance(1000)
    before = len(c.effect_log)
    c.advance(5000)
    fetches = [
        e
        for _, e in c.effect_log[before:]
        if isinstance(e, Send) and isinstance(e.message, FetchRequest)
    ]
    # Two followers, one fetch per 500 ms long poll each: about 20, never thousands.
    assert 16 <= len(fetches) <= 24


def test_figure_8_hw_waits_for_an_entry_of_the_leaders_epoch() -> None:
    # Node 1 holds three uncommitted epoch-1 entries and becomes leader of epoch 2.
    core = RaftCore(RaftConfig(), 1, (1, 2, 3), log_with(1, 1, 1), ElectionState(1), 0, 0)
    effects = elect(core)
    appends = [e for e in effects if isinstance(e, AppendToLog)]
    assert [(x.offset, x.epoch, x.control) for x in appends[0].entries] == [(3, 2, True)]
    assert effects.index(FlushLog()) > effects.index(appends[0])  # durable before it counts
    core._log.append(appends[0].entries)  # what the driver does
    # Node 2 holds the three old entries, but not the LeaderChange: the majority offset is 3.
    effects = core.handle(2, FetchRequest(2, 2, 3, 1), 10)
    assert core.high_watermark == 0
    assert not [e for e in effects if isinstance(e, CommitAdvanced)]
    # Once node 2 holds offset 3 (epoch 2), everything below 4 commits at once.
    effects = core.handle(2, FetchRequest(2, 2, 4, 2), 11)
    assert core.high_watermark == 4
    assert CommitAdvanced(4) in effects


def test_leader_answers_diverging_epoch_and_follower_truncates_there() -> None:
    # Leader: epochs [1, 1, 3, 3]; it never saw epoch 2.
    leader = RaftCore(RaftConfig(), 1, (1, 2, 3), log_with(1, 1, 3, 3), ElectionState(3), 0, 0)
    effects = elect(leader)
    for e in effects:
        if isinstance(e, AppendToLog):
            leader._log.append(e.entries)
    (resp,) = sent(leader.handle(2, FetchRequest(2, 4, 5, 2), 5), FetchResponse)
    assert resp.diverging_epoch == OffsetAndEpoch(2, 1) and not resp.records
    # Follower: epochs [1, 1, 1, 2, 2] at epoch 4 following node 1.
    flog = log_with(1, 1, 1, 2, 2)
    follower = RaftCore(RaftConfig(), 2, (1, 2, 3), flog, ElectionState(4, leader_id=1), 0, 0)
    (fetch,) = sent(follower.tick(0), FetchRequest)
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (5, 2)
    effects = follower.handle(1, resp, 6)
    assert [e for e in effects if isinstance(e, TruncateLog)] == [TruncateLog(2)]
    (fetch,) = sent(effects, FetchRequest)
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (2, 1)
    flog.truncate_to(2)
    (resp,) = sent(leader.handle(2, fetch, 7), FetchResponse)
    assert resp.diverging_epoch is None
    assert [(r.offset, r.epoch) for r in resp.records] == [(2, 3), (3, 3), (4, 4)]


def test_truncation_below_the_high_watermark_is_an_invariant_violation() -> None:
    flog = log_with(1, 1, 1)
    follower = RaftCore(RaftConfig(), 2, (1, 2, 3), flog, ElectionState(2, leader_id=1), 0, 0)
    follower.tick(0)
    follower.handle(1, FetchResponse(ErrorCode.NONE, 1, 2, 3, 3, 0, (), last_fetched_epoch=1), 1)
    assert follower.high_watermark == 3
    bad = FetchResponse(
        ErrorCode.NONE, 1, 2, 3, 3, 0, diverging_epoch=OffsetAndEpoch(1, 1), last_fetched_epoch=1
    )
    with pytest.raises(InvariantViolation, match="below high watermark 3"):
        follower.handle(1, bad, 2)


def test_divergent_uncommitted_tail_is_replaced_in_a_cluster() -> None:
    # Kafka pitfall 2: node 1 (old leader, epoch 2) wrote offset 2 alone; nodes 2 and 3 moved on
    # to epoch 3 with two other entries. Node 1 must converge on their history.
    logs = {1: log_with(1, 1, 2), 2: log_with(1, 1, 3, 3), 3: log_with(1, 1, 3, 3)}
    c = Cluster()
    for nid, log in logs.items():
        c.nodes[nid].log = log
        c.nodes[nid].persisted = ElectionState(3, leader_id=2) if nid != 1 else ElectionState(2)
        c.restart(nid)
    leader = c.wait_for_leader()
    assert leader.node_id != 1  # its last epoch (2) is behind
    c.commit(leader.node_id, b"z")
    c.advance(100)
    expected = [(e.offset, e.epoch, e.data) for e in leader.log.entries]
    for n in c.nodes.values():
        assert [(e.offset, e.epoch, e.data) for e in n.log.entries] == expected
    assert (1, TruncateLog(2)) in c.effect_log


def test_follower_hw_is_min_of_leader_hw_and_own_log_end() -> None:
    flog = log_with(1)
    follower = RaftCore(RaftConfig(), 2, (1, 2, 3), flog, ElectionState(1, leader_id=1), 0, 0)
    follower.tick(0)
    records = (Entry(1, 1, b"a"), Entry(2, 1, b"b"))
    resp = FetchResponse(ErrorCode.NONE, 1, 1, 1, 10, 0, records, last_fetched_epoch=1)
    effects = follower.handle(1, resp, 1)
    assert AppendToLog(records, flush=True) in effects
    assert follower.high_watermark == 3  # leader says 10, we hold 3
    assert effects.index(AppendToLog(records, flush=True)) < effects.index(CommitAdvanced(3))


def test_linger_batches_proposals_into_one_flushed_append() -> None:
    c = Cluster(config=RaftConfig(append_linger_ms=5))
    leader = c.wait_for_leader()
    c.advance(10)
    mark = len(c.effect_log)
    results = [c.propose(leader.node_id, b"p%d" % i) for i in range(3)]
    assert [r.first_offset for r in results] == [1, 2, 3]
    c.advance(20)
    appends = [
        e for nid, e in c.effect_log[mark:] if nid == leader.node_id and isinstance(e, AppendToLog)
    ]
    assert [len(a.entries) for a in appends] == [3]
    flushes = [e for nid, e in c.effect_log[mark:] if nid == leader.node_id and e == FlushLog()]
    assert len(flushes) == 1
    assert leader.core.high_watermark == 4


def test_idle_leader_appends_noops() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    hw = leader.core.high_watermark
    c.advance(1100)
    noops = [e for e in leader.log.entries if e.control and codec.decode(e.data) == NoOpRecord()]
    assert len(noops) == 2
    assert leader.core.high_watermark == hw + 2


def test_observer_learns_leader_replicates_and_never_counts() -> None:
    c = Cluster(observers=(101,))
    leader = c.wait_for_leader()
    c.commit(leader.node_id, b"a")
    c.advance(100)
    observer = c.nodes[101]
    assert observer.core.leader_id == leader.node_id and observer.core.role_name == "follower"
    assert observer.committed[1] == (1, b"a", False)
    for nid in c.voters:
        if nid != leader.node_id:
            c.stop(nid)
    result = c.propose(leader.node_id, b"b")
    c.advance(500)
    assert observer.log.end_offset > result.last_offset  # replicated to the observer...
    assert leader.core.high_watermark <= result.last_offset  # ...but not committed by it


def test_snapshot_fetch_brings_back_a_replica_behind_the_log_start() -> None:
    c = Cluster(
        config=RaftConfig(
            snapshot_chunk_bytes=7, max_idle_interval_ms=0, snapshot_retention_entries=0
        )
    )
    leader = c.wait_for_leader()
    lagging = next(n for n in c.nodes.values() if n is not leader)
    c.stop(lagging.node_id)
    for i in range(10):
        c.commit(leader.node_id, b"v%d" % i)
    snap = OffsetAndEpoch(leader.core.high_watermark, leader.core.epoch)
    image = b"state-machine-image-" * 3
    for n in c.nodes.values():
        if n.up:
            n.log.write_snapshot(snap, image)
            c.run(n, n.core.snapshot_taken(snap, c.now))
    assert leader.log.start_offset == snap.offset
    assert (leader.node_id, DeleteLogPrefix(snap.offset)) in c.effect_log
    back = c.restart(lagging.node_id)
    mark = len(c.effect_log)
    c.advance(200)
    assert back.installed == [snap]
    assert back.log.snapshots[snap] == image
    assert back.log.start_offset == snap.offset and back.log.end_offset == leader.log.end_offset
    chunks = [
        e
        for nid, e in c.effect_log[mark:]
        if isinstance(e, Send) and isinstance(e.message, FetchSnapshotRequest)
    ]
    assert len(chunks) == -(-len(image) // 7)
    assert (back.node_id, InstallSnapshot(snap)) in c.effect_log[mark:]
    c.commit(leader.node_id, b"after")
    c.advance(50)
    assert back.committed[leader.log.end_offset - 1][1] == b"after"


def test_snapshot_retention_deletes_only_up_to_an_older_snapshot() -> None:
    # The log start must stay at a snapshot's end offset: below it only a snapshot id tells the
    # epoch of an offset (found by the simulator: a fetch at the log start was misjudged).
    c = Cluster(voters=1, config=RaftConfig(snapshot_retention_entries=3, max_idle_interval_ms=0))
    c.advance(1)
    node = c.nodes[1]

    def snapshot_now() -> OffsetAndEpoch:
        snap = OffsetAndEpoch(node.core.high_watermark, node.core.epoch)
        node.log.write_snapshot(snap, b"img")
        return snap

    c.commit(1, b"a", b"b")
    first = snapshot_now()  # offset 3
    assert node.core.snapshot_taken(first, c.now) == []  # nothing 3 entries older yet
    c.commit(1, b"c")
    second = snapshot_now()  # offset 4: the first snapshot is only 1 entry behind
    assert node.core.snapshot_taken(second, c.now) == []
    c.commit(1, b"d", b"e", b"f")
    third = snapshot_now()  # offset 7: the second one (4) is 3 behind
    assert node.core.snapshot_taken(third, c.now) == [DeleteLogPrefix(second.offset)]


def test_snapshot_beyond_high_watermark_is_refused() -> None:
    core = RaftCore(RaftConfig(), 1, (1, 2, 3), log_with(1, 1), ElectionState(1), 0, 0)
    with pytest.raises(RaftUsageError, match="beyond the high watermark"):
        core.snapshot_taken(OffsetAndEpoch(2, 1), 0)


def test_lingering_batch_does_not_spin_the_timer() -> None:
    c = Cluster(config=RaftConfig(append_linger_ms=25))
    leader = c.wait_for_leader()
    ls = leader.core._leader_state()
    assert ls is not None
    idle_at = ls.last_append_ms + 500
    c.advance(idle_at - 10 - c.now)
    c.propose(leader.node_id, b"x")  # lingers until idle_at + 15
    c.run(leader, leader.core.tick(idle_at))  # the idle time passes while the batch lingers
    # The next deadline is the linger deadline, not an idle no-op time already in the past.
    assert leader.core.next_deadline_ms() > idle_at


def test_follower_with_only_newer_unknown_epochs_truncates_to_its_log_start() -> None:
    flog = log_with(5, 5)  # an uncommitted epoch-5 tail; the leader knows epochs up to 3 only
    follower = RaftCore(RaftConfig(), 2, (1, 2, 3), flog, ElectionState(6, leader_id=1), 0, 0)
    follower.tick(0)
    resp = FetchResponse(
        ErrorCode.NONE, 1, 6, 2, 0, 0, diverging_epoch=OffsetAndEpoch(1, 3), last_fetched_epoch=5
    )
    effects = follower.handle(1, resp, 1)
    assert [e for e in effects if isinstance(e, TruncateLog)] == [TruncateLog(0)]
    (fetch,) = sent(effects, FetchRequest)
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (0, 0)


def test_stale_response_judged_on_another_prefix_is_dropped() -> None:
    # A late answer to an older fetch at the same offset but after another last epoch must not
    # be applied (found by the simulator: it truncated below the HW / broke log matching).
    flog = log_with(1, 1, 2)
    follower = RaftCore(RaftConfig(), 2, (1, 2, 3), flog, ElectionState(3, leader_id=1), 0, 0)
    follower.tick(0)
    stale = FetchResponse(ErrorCode.NONE, 1, 3, 3, 0, 0, (Entry(3, 3, b"x"),), last_fetched_epoch=1)
    effects = follower.handle(1, stale, 1)
    assert not [e for e in effects if isinstance(e, AppendToLog | TruncateLog)]
    assert follower.status().log_end_offset == 3
    fresh = FetchResponse(ErrorCode.NONE, 1, 3, 3, 0, 0, (Entry(3, 3, b"x"),), last_fetched_epoch=2)
    assert AppendToLog((Entry(3, 3, b"x"),), flush=True) in follower.handle(1, fresh, 2)


def test_leader_sends_new_records_before_its_own_fsync_and_commits_after_it() -> None:
    c = Cluster(config=RaftConfig(max_idle_interval_ms=0))
    leader = c.wait_for_leader()
    c.advance(100)  # both followers' fetches are parked
    result, effects = leader.core.propose([b"x"], c.now)
    kinds = [type(e).__name__ for e in effects]
    # Append (no fsync), answer both parked fetches with the record, then fsync.
    assert kinds[:4] == ["AppendToLog", "Send", "Send", "FlushLog"]
    assert not any(isinstance(e, CommitAdvanced) for e in effects)  # needs a follower's ack


def test_status_lists_voters_and_live_observers_on_the_leader() -> None:
    c = Cluster(observers=(101,))
    leader = c.wait_for_leader()
    c.commit(leader.node_id, b"a")
    c.advance(100)
    status = leader.core.status()
    assert (status.role, status.leader_id, status.epoch) == ("leader", leader.node_id, 1)
    rows = {r.node_id: r for r in status.replicas}
    assert set(rows) == {1, 2, 3, 101}
    assert rows[101].is_voter is False and rows[101].log_end_offset == leader.log.end_offset
    c.stop(101)
    c.advance(301_000)
    assert {r.node_id for r in leader.core.status().replicas} == {1, 2, 3}
    follower = next(n for n in c.nodes.values() if n.up and n is not leader)
    assert follower.core.status().replicas == () and follower.core.status().role == "follower"
