"""replication.mode=quorum: the same log and RPCs, but an offset commits on a majority of the
replicas (not the ISR), acks=all means a majority, min.insync.replicas does not apply; the
replica's part in the fencing election (report at the fenced epoch, take nothing more from the
old leader), the new leader's epoch marker, and the leader choice from (last epoch, LEO)."""

from __future__ import annotations

from partition.replica import (
    CompleteProduce,
    FetchRequest,
    MetadataUpdated,
    ProduceRequest,
    ReplicaConfig,
    ReplicaPosition,
    SendFetch,
    SendFetchResponse,
    choose_quorum_leader,
)
from quorum.metadata.errors import Errors
from tests.replica.router import TOPIC_ID, Cluster, answers, batch, wire


def _quorum(**kw: object) -> ReplicaConfig:
    return ReplicaConfig(replica_fetch_wait_max_ms=0, replication_mode="quorum", **kw)  # type: ignore[arg-type]


def test_majority_commits_where_isr_mode_waits_for_the_laggard() -> None:
    for mode, expected_hw in (("quorum", 1), ("isr", 0)):
        c = Cluster(
            replicas=(1, 2, 3),
            config=ReplicaConfig(replica_fetch_wait_max_ms=0, replication_mode=mode),
        )
        r = c.produce("a", acks=-1)
        c.fetch(2)
        c.fetch(2)  # 2 of 3 hold offset 0; 3 (in the ISR) never fetched
        assert c.nodes[1].core.high_watermark == expected_hw, mode
        assert (r in c.responses) == (mode == "quorum")


def test_quorum_acks_all_ignores_min_insync_and_needs_a_majority() -> None:
    c = Cluster(replicas=(1, 2, 3, 4, 5), isr=(1,), config=_quorum(min_insync_replicas=3))
    r = c.produce("a", acks=-1)
    assert r not in c.responses  # no NOT_ENOUGH_REPLICAS: the ISR does not decide here
    c.fetch(2)
    c.fetch(2)
    assert r not in c.responses and c.nodes[1].core.high_watermark == 0  # 2 of 5
    c.fetch(3)
    c.fetch(3)
    assert c.responses[r].error is Errors.NONE and c.nodes[1].core.high_watermark == 1  # 3 of 5


def test_position_reports_last_epoch_and_leo() -> None:
    c = Cluster(replicas=(1, 2, 3), config=_quorum())
    c.produce("a", "b", acks=1)
    c.elect(1)  # re-elected with an uncommitted tail: the epoch marker goes to offset 2
    c.produce("c", acks=1)
    assert c.nodes[1].core.position() == ReplicaPosition(1, 1, 4)
    c.fetch(2)
    assert c.nodes[2].core.position() == ReplicaPosition(2, 1, 4)
    assert c.nodes[3].core.position() == ReplicaPosition(3, -1, 0)


def test_fenced_replica_reports_at_the_fenced_epoch_and_rejects_the_old_leader() -> None:
    """Quorum mode's fencing round on the replica side (partition/replica/quorum_mode.py): a
    replica that saw the fenced epoch reports (last epoch, LEO) tagged with it, and nothing the
    old leader still sends changes its log; the old leader, cut from the controller, can then
    no longer commit anything."""
    c = Cluster(replicas=(1, 2, 3), config=_quorum())
    c.produce("a", "b", acks=-1)
    c.fetch(2)
    c.fetch(2)
    assert c.nodes[1].core.high_watermark == 2
    in_flight = c.nodes[2].outbox.pop(0)  # 2's next fetch (offset 2) reaches 1 ...
    late = c.produce("c", acks=-1)
    answer = [e.response for e in c.nodes[1].core.handle(in_flight, c.now_ms)
              if isinstance(e, SendFetchResponse)]  # fmt: skip
    assert answer and answer[0].records  # ... and would bring "c" (offset 2, epoch 0)
    c.fence(nodes=(2, 3))  # epoch 1, no leader; 1 never hears of it (cut from the controller)
    assert [(r.broker_id, r.leader_epoch, r.last_epoch, r.log_end_offset)
            for r in c.position_reports] == [(2, 1, 0, 2), (3, 1, -1, 0)]  # fmt: skip
    assert c.nodes[2].core.status().role == "offline"
    before = len(c.effects[2])
    c.step(2, wire(answer[0]))  # the old leader's answer arrives after the fence: dropped
    assert c.nodes[2].log.log_end_offset == 2 and len(c.effects[2]) == before
    produce = c.step(2, wire(ProduceRequest(TOPIC_ID, 0, 99, batch("x"), -1)))
    assert [e.response.error for e in produce if isinstance(e, CompleteProduce)] == [
        Errors.NOT_LEADER_OR_FOLLOWER]
    old_epoch_fetch = FetchRequest(TOPIC_ID, 0, 3, 0, current_leader_epoch=0)
    assert answers(c.nodes[2].core.handle(old_epoch_fetch, c.now_ms))[0].error is (
        Errors.NOT_LEADER_OR_FOLLOWER)
    c.advance(500)  # position.report.interval.ms: re-sent (a new controller needs it); no fetch
    assert [(r.broker_id, r.leader_epoch, r.log_end_offset) for r in c.position_reports[2:]] == [
        (2, 1, 2), (3, 1, 0)]
    assert not any(isinstance(e, SendFetch) for e in c.effects[2][before:])
    # The old leader still counts only itself for "c": it never commits it, and "c" is not
    # acknowledged (so the controller electing 2 loses nothing acknowledged).
    c.advance(1_000)
    assert c.nodes[1].core.high_watermark == 2 and late not in c.responses


def test_new_quorum_leader_appends_a_marker_only_over_an_uncommitted_tail() -> None:
    c = Cluster(replicas=(1, 2, 3), config=_quorum())
    c.produce("a", acks=-1)
    c.fetch(2)
    c.fetch(2)  # committed: HW 1 on 1, and 2 learns it on its next fetch
    c.fetch(2)
    c.elect(2)  # 2's HW == LEO: nothing to cover, no marker
    assert c.nodes[2].log.log_end_offset == 1
    c.produce("b", acks=1)  # uncommitted tail at 2
    c.fence()
    c.elect(2)
    headers = c.nodes[2].log.batch_headers(0)
    assert [(h.base_offset, h.partition_leader_epoch, h.is_control) for h in headers] == [
        (0, 0, False), (1, 1, False), (2, 3, True)]


def test_choose_quorum_leader() -> None:
    replicas = (1, 2, 3)
    p = {r: ReplicaPosition(r, e, leo) for r, e, leo in ((1, 2, 10), (2, 3, 5), (3, 3, 7))}
    assert choose_quorum_leader(replicas, p.values()) == 3  # highest (last epoch, LEO)
    assert choose_quorum_leader(replicas, [p[1], p[2]]) == 2  # epoch beats length
    assert choose_quorum_leader(replicas, [p[1]]) is None  # no live majority: no leader
    tie = [ReplicaPosition(3, 1, 4), ReplicaPosition(2, 1, 4)]
    assert choose_quorum_leader((2, 3, 1), tie) == 2  # ties go to assignment order
    assert (
        choose_quorum_leader(replicas, [p[1], ReplicaPosition(9, 9, 99)]) is None
    )  # 9 is no replica


def test_quorum_mode_counts_only_flushed_data_so_two_power_faults_lose_no_ack() -> None:
    """Follower power loss + leader power loss (2 faults of 3) after an acknowledged acks=all
    write: quorum mode flushes before a follower's next fetch reports its LEO and before the
    leader counts its own, so the majority that acknowledged holds it on disk (a Raft vote
    means durable). ISR mode keeps Kafka's no-fsync appends (flush.ms) and loses it."""
    for mode, survives in (("quorum", True), ("isr", False)):
        c = Cluster(replicas=(1, 2, 3),
                    config=ReplicaConfig(replica_fetch_wait_max_ms=0, replication_mode=mode))  # fmt: skip
        if mode == "isr":
            c.elect(1, isr=(1, 2))  # 3 out of the ISR so the same two replicas commit
        r = c.produce("a", acks=-1)
        c.fetch(2)
        c.fetch(2)
        assert c.responses[r].error is Errors.NONE and c.nodes[1].core.high_watermark == 1
        c.crash(2)  # power loss of the follower that made the majority
        c.restart(2, high_watermark=0, publish=False)
        c.crash(1)  # power loss of the leader
        c.restart(1, high_watermark=0, publish=False)
        assert (c.nodes[1].log.log_end_offset, c.nodes[2].log.log_end_offset) == (
            (1, 1) if survives else (0, 0)), mode
    # Quorum mode: the election (reports of 2 and 3) now picks 2, which holds "a".
    c = Cluster(replicas=(1, 2, 3), config=_quorum())
    c.produce("a", acks=-1)
    c.fetch(2)
    c.fetch(2)
    c.crash(2)
    c.restart(2, high_watermark=0, publish=False)
    c.crash(1)
    c.fence(nodes=(2, 3))
    latest = {r.broker_id: ReplicaPosition(r.broker_id, r.last_epoch, r.log_end_offset)
              for r in c.position_reports}  # fmt: skip
    assert choose_quorum_leader((1, 2, 3), latest.values()) == 2 and latest[2].log_end_offset == 1
    c.elect(2)
    c.fetch_until_idle(3)
    assert c.nodes[2].values()[0] == "a" and c.nodes[3].values()[0] == "a"


def test_a_restarted_replica_never_follows_a_leader_older_than_its_fenced_epoch() -> None:
    """Defence in depth behind the broker's initial metadata catch-up: 3 reported at the fenced
    epoch 1, restarts and is handed the stale state of epoch 0 (zombie leader 1, cut off from
    the controller). The fenced epoch it persisted with its report makes it ignore that state,
    so 1 cannot count it for a majority and never acknowledges "b", which the leader elected
    at epoch 2 does not hold."""
    c = Cluster(replicas=(1, 2, 3), config=_quorum())
    c.produce("a", acks=-1)
    for f in (2, 3):
        c.fetch_until_idle(f)
    stale = c.partition
    c.fence(nodes=(2, 3))  # 1 is a zombie: it never hears of epoch 1
    assert {(r.broker_id, r.leader_epoch) for r in c.position_reports} == {(2, 1), (3, 1)}
    c.elect(2, publish=False)
    c.publish((2,))
    c.clean_restart(3, publish=False)
    assert c.nodes[3].core.fenced_epoch == 1  # read back from its partition directory
    c.step(3, wire(MetadataUpdated(stale, c.metadata().eligible_brokers)))
    assert c.nodes[3].core.status().role == "offline" and c.nodes[3].outbox == []
    r = c.produce("b", acks=-1, to=1)
    c.tick(3)
    assert c.nodes[3].outbox == []  # 3 sends no fetch to the zombie
    assert r not in c.responses and c.nodes[1].core.high_watermark == 1
    c.publish((3,))  # caught up: follows 2 at epoch 2
    c.fetch_until_idle(3)
    assert c.nodes[3].values() == c.nodes[2].values() == ["a", ""]


def test_a_restarted_replica_ignores_a_partition_state_older_than_its_own_log() -> None:
    """The zombie 1 never heard of the fence, later followed the new leader 2 (epoch 2) and holds
    an entry of epoch 2. Restarted with the stale state in which it leads at epoch 0, it must not
    lead: its log's last epoch (2) is newer than that state."""
    c = Cluster(replicas=(1, 2, 3), config=_quorum())
    c.produce("a", acks=1)
    stale = c.partition
    c.fence(nodes=(2, 3))
    c.elect(2)
    c.produce("b", acks=1)  # to 2, at epoch 2 ("a" was never replicated: 1 truncates it)
    c.fetch_until_idle(1)
    assert c.nodes[1].core.position() == ReplicaPosition(1, 2, 1)
    assert c.nodes[1].core.fenced_epoch == -1  # it never reported: only its log says "2"
    c.clean_restart(1, publish=False)
    c.step(1, wire(MetadataUpdated(stale, c.metadata().eligible_brokers)))
    assert not c.nodes[1].core.is_leader and c.nodes[1].core.status().role == "offline"
    c.publish((1,))
    c.fetch_until_idle(1)
    assert c.nodes[1].core.status().role == "follower"
