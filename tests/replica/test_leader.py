"""Leader rules: caught-up tracking (Replica.updateFetchStateOrThrow), the HW over the maximal
ISR (KIP-497), ISR shrink/expand through AlterPartition only (one in flight, KIP-903 broker
epochs, KIP-841 eligibility), the new-leader HW rules per mode (ISR: Kafka's; quorum: figure 8
and the epoch marker), and fetch fencing (KIP-320)."""

from __future__ import annotations

import dataclasses

from partition.replica import FetchRequest, ReplicaConfig, SendAlterPartition, UpdateHighWatermark
from partition.replica.state import FollowerReplica
from quorum.controller.messages import AlterPartitionResponse
from quorum.metadata.errors import Errors
from tests.replica.router import TOPIC_ID, Cluster, answers, batch, wire


def _response(error: Errors) -> AlterPartitionResponse:
    return wire(AlterPartitionResponse(error, TOPIC_ID, 0))  # type: ignore[no-any-return]


def test_caught_up_now_or_as_of_previous_fetch() -> None:
    g = FollowerReplica(3)
    g.update_fetch_state(0, -1, leader_log_end_offset=4, now_ms=100, broker_epoch=1)
    assert (
        g.last_caught_up_time_ms == 0
    )  # caught up with the previous fetch's LEO (unknown) as of then
    g.update_fetch_state(4, 0, leader_log_end_offset=6, now_ms=200, broker_epoch=1)
    assert (
        g.last_caught_up_time_ms == 100
    )  # reached the LEO of the previous fetch: as of that fetch
    g.update_fetch_state(6, 0, leader_log_end_offset=6, now_ms=300, broker_epoch=1)
    assert g.last_caught_up_time_ms == 300  # at the leader's LEO now
    g.update_fetch_state(6, 0, leader_log_end_offset=9, now_ms=400, broker_epoch=1)
    assert g.last_caught_up_time_ms == 300  # reached the previous LEO (6): as of that fetch (300)
    g.update_fetch_state(7, 0, leader_log_end_offset=12, now_ms=500, broker_epoch=1)
    assert g.last_caught_up_time_ms == 300  # 7 < 9 and < 12: not refreshed
    assert (g.log_end_offset, g.last_fetch_time_ms, g.broker_epoch) == (7, 500, 1)
    assert g.is_caught_up(leader_log_end_offset=12, now_ms=300 + 30_000, lag_time_max_ms=30_000)
    assert not g.is_caught_up(leader_log_end_offset=12, now_ms=300 + 30_001, lag_time_max_ms=30_000)
    assert g.is_caught_up(
        leader_log_end_offset=7, now_ms=10**9, lag_time_max_ms=30_000
    )  # LEO == leader's


def test_in_flight_expansion_counts_in_hw_and_leader_waits_for_controller() -> None:
    c = Cluster(replicas=(1, 2, 3), isr=(1, 2), auto_alter=False)
    c.produce("a", acks=1)
    c.fetch(2)
    c.fetch(2)  # HW 1 (ISR {1,2})
    leader = c.nodes[1].core
    assert leader.high_watermark == 1
    c.fetch(3)  # @0 < HW: not in sync; gets "a"
    assert not c.alter_inbox
    c.produce("b", acks=1)
    c.fetch(3)  # @1 >= HW 1: proposed in; the proposal waits in the controller's inbox
    assert len(c.alter_inbox) == 1
    req = c.alter_inbox[0]
    assert [(m.broker_id, m.broker_epoch) for m in req.new_isr_with_epochs] == [
        (1, 101),
        (2, 102),
        (3, 103),
    ]
    assert (req.leader_epoch, req.partition_epoch, req.broker_id, req.broker_epoch) == (
        0,
        0,
        1,
        101,
    )
    assert leader.isr == (1, 2) and leader.status().maximal_isr == (1, 2, 3)  # never by itself
    c.fetch(2)
    c.fetch(2)  # 2 at LEO 2, but 3 (maximal ISR) is known at 1: the HW waits for it
    assert leader.high_watermark == 1
    c.produce("c", acks=1)
    c.fetch(3)  # one request in flight: no second proposal
    assert len(c.alter_inbox) == 1
    c.process_alter_partition()
    assert leader.isr == (1, 2, 3) and c.nodes[2].core.isr == (1, 2, 3)
    assert leader.status().alter_partition_in_flight is False


def test_in_flight_shrink_still_counts_the_leaving_member() -> None:
    c = Cluster(replicas=(1, 2, 3), auto_alter=False)
    c.produce("a", acks=1)
    c.fetch(2)
    c.fetch(2)
    c.advance(45_000)  # 3 never fetched: proposed out (in flight)
    assert len(c.alter_inbox) == 1 and c.nodes[1].core.high_watermark == 0  # still counted
    c.process_alter_partition()
    assert c.nodes[1].core.isr == (1, 2) and c.nodes[1].core.high_watermark == 1


def test_isr_check_runs_every_half_lag() -> None:
    cfg = ReplicaConfig(replica_fetch_wait_max_ms=0, replica_lag_time_max_ms=10_000)
    c = Cluster(replicas=(1, 2), config=cfg)
    assert c.nodes[1].core.next_deadline_ms() == c.now_ms + 5_000
    c.produce("a", acks=1)
    c.advance(5_000)
    c.advance(5_000)
    assert c.partition.isr == (1, 2)  # 10 s without catching up is not yet "more than" 10 s
    c.advance(4_999)
    assert c.partition.isr == (1, 2)  # the check only runs every 5 s
    c.advance(1)
    assert c.partition.isr == (1,)


def test_follower_at_leader_leo_is_never_shrunk() -> None:
    c = Cluster(replicas=(1, 2))
    c.produce("a", acks=1)
    c.fetch(2)
    c.fetch(2)
    for _ in range(10):
        c.advance(15_000)  # no fetch for 150 s, but nothing to catch up with
    assert c.partition.isr == (1, 2)


def test_expand_needs_eligible_broker_with_the_fetched_epoch() -> None:
    c = Cluster(replicas=(1, 2, 3), isr=(1, 2))
    c.unfenced.discard(3)
    c.publish()
    c.produce("a", acks=1)
    c.fetch(3)
    c.fetch(3)  # at the HW, but fenced: never proposed (KIP-841)
    assert c.partition.isr == (1, 2) and not c.alter_inbox
    c.unfenced.add(3)
    c.broker_epochs[3] = 999  # re-registered since its fetches (KIP-903): still not eligible
    c.publish()
    c.fetch(3)
    assert c.partition.isr == (1, 2)
    c.nodes[3].core.broker_epoch = 999  # it fetches with its new epoch
    c.nodes[3].outbox.clear()
    c.advance(30_000)  # its fetch was lost: resent after replica.socket.timeout.ms
    c.fetch(3)
    assert c.partition.isr == (1, 2, 3)


def test_expand_needs_the_epoch_start_offset() -> None:
    c = Cluster(replicas=(1, 2, 3), isr=(1, 2))
    c.produce("a", acks=1)
    c.fetch(2)
    c.fetch(2)  # HW 1
    c.produce("b", acks=1)
    c.nodes[3].log.append_as_follower(c.nodes[1].log.read(0, 1))  # 3 holds offset 0 only
    c.elect(1, isr=(1, 2))  # epoch 1 starts at offset 2; the HW is 1
    leader = c.nodes[1].core
    assert leader.high_watermark == 1
    c.fetch(3)  # @1: LEO 1 reaches the HW but not the epoch start: not proposed
    assert leader.isr == (1, 2) and not any(isinstance(e, SendAlterPartition) for e in c.effects[1])
    c.fetch(3)  # @2
    assert leader.isr == (1, 2, 3)


def test_alter_partition_errors() -> None:
    c = Cluster(replicas=(1, 2, 3), isr=(1, 2), auto_alter=False)
    c.produce("a", acks=1)
    c.fetch(3)
    c.fetch(3)
    req = c.alter_inbox.pop()
    leader = c.nodes[1].core
    c.step(1, _response(Errors.INELIGIBLE_REPLICA))
    assert leader.status().alter_partition_in_flight is False
    c.fetch(3)  # within the retry backoff (100 ms): not proposed again
    assert not c.alter_inbox
    c.now_ms += 100
    c.fetch(3)
    assert len(c.alter_inbox) == 1
    c.alter_inbox.clear()
    c.step(1, _response(Errors.INVALID_UPDATE_VERSION))
    c.now_ms += 10_000
    c.fetch(3)
    assert not c.alter_inbox  # stale view: wait for the metadata instead of retrying
    c.partition = dataclasses.replace(c.partition, partition_epoch=c.partition.partition_epoch + 1)
    c.publish()
    c.fetch(3)
    assert len(c.alter_inbox) == 1 and c.alter_inbox[0].partition_epoch == 1
    assert req.partition_epoch == 0


def test_lost_alter_partition_is_proposed_again_after_timeout() -> None:
    c = Cluster(replicas=(1, 2, 3), isr=(1, 2), auto_alter=False)
    c.produce("a", acks=1)
    c.fetch(3)
    c.fetch(3)
    c.alter_inbox.clear()  # lost
    sends = sum(isinstance(e, SendAlterPartition) for e in c.effects[1])
    c.advance(30_000)
    c.fetch(3)
    assert sum(isinstance(e, SendAlterPartition) for e in c.effects[1]) == sends + 1


def test_quorum_leader_exposes_old_epoch_tail_only_with_its_own_marker() -> None:
    c = Cluster(
        replicas=(1, 2, 3),
        config=ReplicaConfig(replica_fetch_wait_max_ms=0, replication_mode="quorum"),
    )
    c.produce("a", "b", acks=1)
    c.fetch(2)
    c.fetch(3)  # 2 and 3 hold offsets 0-1 (epoch 0); no HW has moved yet
    assert c.nodes[2].core.high_watermark == 0
    c.crash(1)
    c.elect(2, isr=(2, 3))  # epoch 1: 2 appends its epoch marker at offset 2 at once
    assert [(h.base_offset, h.partition_leader_epoch, h.is_control)
            for h in c.nodes[2].log.batch_headers(0)] == [(0, 0, False), (2, 1, True)]
    c.fetch(3, deliver_response=False)  # 3 at offset 2: a majority holds 0-1, all of epoch 0
    assert c.nodes[2].core.high_watermark == 0  # Raft figure 8: not exposed yet
    c.advance(30_000)  # replica.socket.timeout.ms: 3 gives the lost answer up and fetches again
    assert c.nodes[2].core.high_watermark == 0
    c.fetch(3)  # now 3 gets the marker
    c.fetch(3)  # ... and reports it: a majority holds an entry of epoch 1
    assert c.nodes[2].core.high_watermark == 3  # no client write was needed (no deadlock)
    hws = [e.high_watermark for e in c.effects[2] if isinstance(e, UpdateHighWatermark)]
    assert hws == [3]  # straight past the marker, never to 1 or 2 first


def test_isr_leader_commits_old_epoch_tail_once_the_isr_fetched_at_its_epoch() -> None:
    """Kafka (Partition.makeLeader + Replica.resetReplicaState): no epoch marker, no figure-8
    rule; the new leader's follower LEOs start unknown, so the HW waits for every ISR member to
    fetch at the new epoch, then covers the old tail they all hold."""
    c = Cluster(replicas=(1, 2, 3))
    c.produce("a", "b", acks=1)
    c.fetch(2)
    c.fetch(3)
    c.crash(1)
    c.elect(2, isr=(2, 3))
    assert c.nodes[2].log.log_end_offset == 2  # nothing appended by the election
    assert c.nodes[2].core.high_watermark == 0  # 3's LEO at epoch 1 unknown
    c.fetch(3)
    assert c.nodes[2].core.high_watermark == 2
    hws = [e.high_watermark for e in c.effects[2] if isinstance(e, UpdateHighWatermark)]
    assert hws == [2]


def test_fetch_fencing_at_the_leader() -> None:
    c = Cluster(replicas=(1, 2))
    stale = FetchRequest(TOPIC_ID, 0, 2, 0, current_leader_epoch=-1)  # -1: no check
    assert answers(c.nodes[1].core.handle(stale, c.now_ms))[0].error is Errors.NONE
    c.elect(1)  # epoch 1
    old = FetchRequest(TOPIC_ID, 0, 2, 0, current_leader_epoch=0)
    new = FetchRequest(TOPIC_ID, 0, 2, 0, current_leader_epoch=2)
    assert answers(c.nodes[1].core.handle(old, c.now_ms))[0].error is Errors.FENCED_LEADER_EPOCH
    assert answers(c.nodes[1].core.handle(new, c.now_ms))[0].error is Errors.UNKNOWN_LEADER_EPOCH
    stranger = FetchRequest(TOPIC_ID, 0, 9, 0, current_leader_epoch=1)
    stranger_answer = answers(c.nodes[1].core.handle(stranger, c.now_ms))[0]
    assert stranger_answer.error is Errors.NOT_LEADER_OR_FOLLOWER


def test_isr_idempotent_retry_of_the_old_tail_completes_after_failover() -> None:
    """The deadlock the figure-8 rule caused in ISR mode (the broker driver's old epoch-marker
    workaround): after failover the only write is an idempotent retry of the old tail, a
    duplicate that appends nothing. With Kafka's rule it completes as soon as the ISR fetched."""
    c = Cluster(replicas=(1, 2, 3))
    c.produce(records=batch("x", producer_id=7, producer_epoch=0, base_sequence=0), acks=-1)
    c.fetch(2)
    c.fetch(3)  # both followers hold offset 0; leader 1 dies before anyone learns HW 1
    c.crash(1)
    c.elect(2, isr=(2, 3))
    retry = c.produce(records=batch("x", producer_id=7, producer_epoch=0, base_sequence=0),
                      acks=-1)  # fmt: skip
    assert retry not in c.responses and c.nodes[2].log.log_end_offset == 1  # a duplicate
    c.fetch(3)
    assert c.responses[retry].error is Errors.NONE
    assert (c.responses[retry].base_offset, c.responses[retry].last_offset) == (0, 0)
