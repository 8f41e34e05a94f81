"""Leader election: online (ISR in replica order), unclean (KIP-704), preferred and unclean on
demand (KIP-460), auto rebalance, ELR (KIP-966), quorum mode; and producer id blocks."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.controller import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterConfigsRequest,
    AlterConfigsResponse,
    ControllerConfig,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ReportReplicaPositionRequest,
    ReportReplicaPositionResponse,
)
from quorum.metadata import NO_LEADER, Errors, LeaderRecoveryState
from tests.controller.driver import Driver


def cluster(config: ControllerConfig | None = None, **topic_configs: str) -> Driver:
    d = Driver(config)
    d.start_brokers(101, 102, 103)
    d.create("t", 1, 3, **topic_configs)  # replicas (101, 102, 103), leader 101
    return d


def elect(
    d: Driver, kind: str, partition: int | None = 0, topic: str = "t"
) -> ElectLeadersResponse:
    r = d.send(ElectLeadersRequest(topic, partition, kind))
    assert isinstance(r, ElectLeadersResponse)
    return r


def test_online_election_takes_the_first_live_isr_replica_in_replica_order() -> None:
    d = cluster()
    d.alter("t", 0, (101, 103))  # 102 out of the ISR: 103 must be next, not 102
    d.heartbeat(101, want_fence=True)
    p = d.part("t")
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (103, (103,), 1, 2)


def test_no_live_isr_member_and_unclean_disabled_means_offline() -> None:
    d = cluster()
    d.alter("t", 0, (101,))
    d.heartbeat(101, want_fence=True)
    p = d.part("t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (NO_LEADER, (101,), 0)
    assert d.image.offline_partitions() != []


def test_unclean_enabled_elects_a_live_replica_recovering() -> None:
    d = cluster(unclean_leader_election_enable="true")
    d.alter("t", 0, (101,))
    d.heartbeat(101, want_fence=True)
    p = d.part("t")
    assert (p.leader, p.isr, p.leader_epoch) == (102, (102,), 1)
    assert p.leader_recovery_state == LeaderRecoveryState.RECOVERING
    # The ISR cannot grow while RECOVERING (KIP-704) ...
    assert d.alter("t", 0, (102, 103)).error is Errors.INVALID_REQUEST
    # ... until the leader reports RECOVERED.
    r = d.alter("t", 0, (102,), recovery=LeaderRecoveryState.RECOVERED)
    assert r.error is Errors.NONE and r.leader_recovery_state == LeaderRecoveryState.RECOVERED
    assert d.alter("t", 0, (102, 103)).error is Errors.NONE


def test_preferred_election_on_demand() -> None:
    d = cluster()
    assert elect(d, "preferred").results[0].error is Errors.ELECTION_NOT_NEEDED
    d.heartbeat(101, want_fence=True)
    assert d.part("t").leader == 102
    r = elect(d, "preferred")
    assert r.results[0].error is Errors.PREFERRED_LEADER_NOT_AVAILABLE  # 101 is fenced
    d.heartbeat(101)
    assert (
        elect(d, "preferred").results[0].error is Errors.PREFERRED_LEADER_NOT_AVAILABLE
    )  # not in ISR
    d.alter("t", 0, (102, 103, 101))
    r = elect(d, "preferred", partition=None)
    assert r.error is Errors.NONE and r.results[0].error is Errors.NONE
    p = d.part("t")
    assert (p.leader, p.leader_epoch) == (101, 2)


def test_unclean_election_on_demand() -> None:
    d = cluster()
    assert elect(d, "unclean").results[0].error is Errors.ELECTION_NOT_NEEDED
    d.alter("t", 0, (101,))
    d.heartbeat(101, want_fence=True)
    assert d.part("t").leader == NO_LEADER
    r = elect(d, "unclean")
    assert r.results[0].error is Errors.NONE
    p = d.part("t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (
        102,
        (102,),
        LeaderRecoveryState.RECOVERING,
    )


def test_unclean_election_with_no_live_replica() -> None:
    d = cluster()
    d.alter("t", 0, (101,))
    for b in (102, 103, 101):
        d.heartbeat(b, want_fence=True)
    r = elect(d, "unclean")
    assert r.results[0].error is Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert d.part("t").leader == NO_LEADER


def test_elect_leaders_errors() -> None:
    d = cluster()
    assert elect(d, "sideways").error is Errors.INVALID_REQUEST
    assert elect(d, "online").error is Errors.INVALID_REQUEST
    assert elect(d, "preferred", topic="nope").error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert elect(d, "preferred", partition=5).results[0].error is Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_auto_leader_rebalance_restores_preferred_leaders_after_the_interval() -> None:
    config = ControllerConfig(
        leader_imbalance_check_interval_ms=10_000, broker_session_timeout_ms=60_000
    )
    d = Driver(config)
    d.start_brokers(101, 102, 103)
    d.create("t", 3, 3)
    d.heartbeat(101, want_fence=True)
    d.heartbeat(101)
    d.alter("t", 1, (102, 103, 101))
    d.alter("t", 2, (103, 101, 102))
    assert d.part("t", 0).leader == 102
    d.alter("t", 0, (102, 103, 101))
    d.now_ms = 9_999
    assert d.tick() == []
    d.now_ms = 10_000
    d.tick()
    p = d.part("t", 0)
    assert (p.leader, p.leader_epoch) == (101, 2)
    assert d.controller.next_deadline_ms() <= 20_000


def test_auto_rebalance_disabled() -> None:
    d = Driver(
        ControllerConfig(auto_leader_rebalance_enable=False, leader_imbalance_check_interval_ms=1)
    )
    d.start_brokers(101, 102)
    d.create("t", 1, 2)
    d.heartbeat(101, want_fence=True)
    d.heartbeat(101)
    d.alter("t", 0, (102, 101))
    d.now_ms = 5
    assert d.tick() == []
    assert d.part("t").leader == 102


def test_offline_partitions_are_retried_by_tick_after_a_config_change() -> None:
    d = cluster()
    d.alter("t", 0, (101,))
    d.heartbeat(101, want_fence=True)
    assert d.part("t").leader == NO_LEADER
    from quorum.metadata import Config, encode_record

    d.image.apply(
        d.image.applied_offset + 1,
        1,
        encode_record(Config("topic", "t", "unclean.leader.election.enable", "true")),
    )
    d.tick()
    assert d.part("t").leader == 102


# --- ELR (KIP-966) -----------------------------------------------------------------------------


def test_last_replica_standing_without_elr_waits_for_the_last_isr_member() -> None:
    d = cluster(min_insync_replicas="2")
    d.alter("t", 0, (101, 102))
    d.alter("t", 0, (101,))
    d.heartbeat(101, want_fence=True)
    p = d.part("t")
    assert (p.leader, p.isr, p.elr) == (NO_LEADER, (101,), ())


def test_last_replica_standing_with_elr_elects_an_eligible_replica() -> None:
    d = cluster(ControllerConfig(eligible_leader_replicas_enable=True), min_insync_replicas="2")
    d.alter("t", 0, (101, 102))  # ISR 2 >= min ISR: 103 is just out
    assert d.part("t").elr == ()
    d.alter("t", 0, (101,))  # below min ISR: 102 stays eligible
    assert (d.part("t").isr, d.part("t").elr) == ((101,), (102,))
    d.heartbeat(101, want_fence=True)
    p = d.part("t")
    assert (p.leader, p.isr, p.elr) == (102, (102,), (101,))
    # Back at min ISR: the ELR is cleared.
    d.heartbeat(101)
    d.alter("t", 0, (102, 101))
    assert (d.part("t").isr, d.part("t").elr) == ((102, 101), ())


def test_elr_member_that_restarts_uncleanly_leaves_the_elr() -> None:
    d = cluster(ControllerConfig(eligible_leader_replicas_enable=True), min_insync_replicas="2")
    d.alter("t", 0, (101, 102))
    d.alter("t", 0, (101,))
    assert d.part("t").elr == (102,)
    d.heartbeat(102, want_fence=True)
    d.now_ms = 20_000
    d.heartbeat(101)
    d.heartbeat(103)
    d.tick()
    assert d.register(102, new_incarnation=True, previous_epoch=-1).error is Errors.NONE
    assert 102 not in d.part("t").elr


# --- replication.mode=quorum ------------------------------------------------------------------


def report(d: Driver, broker: int, last_epoch: int, leo: int, *, leader_epoch: int | None = None,
           broker_epoch: int | None = None) -> ReportReplicaPositionResponse:  # fmt: skip
    p = d.part("t")
    r = d.send(ReportReplicaPositionRequest(
        broker, d.epoch(broker) if broker_epoch is None else broker_epoch, p.topic_id, 0,
        p.leader_epoch if leader_epoch is None else leader_epoch, last_epoch, leo))  # fmt: skip
    assert isinstance(r, ReportReplicaPositionResponse)
    return r


def test_quorum_mode_fences_then_elects_the_most_up_to_date_of_a_reporting_majority() -> None:
    d = cluster(replication_mode="quorum")
    assert (d.part("t").leader, d.part("t").leader_epoch) == (101, 0)
    d.heartbeat(101, want_fence=True)
    # Step 1: the fencing change. No leader, a new leader epoch; nobody is elected from
    # positions reported before it (they may be stale: the old leader may still be committing).
    p = d.part("t")
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (NO_LEADER, 1, 1, (102, 103))
    # Step 2: reports tagged with the fenced epoch. One of three is no majority: still offline.
    assert report(d, 102, 0, 50) == ReportReplicaPositionResponse(Errors.NONE, p.topic_id, 0, -1, 1)
    assert d.part("t").leader == NO_LEADER
    # A report of another epoch never counts.
    assert report(d, 103, 0, 70, leader_epoch=0).error is Errors.FENCED_LEADER_EPOCH
    assert report(d, 103, 0, 70, leader_epoch=2).error is Errors.UNKNOWN_LEADER_EPOCH
    assert d.part("t").leader == NO_LEADER
    # Step 3: 103 at the fenced epoch makes a majority; it is ahead, so it leads, at epoch 2.
    r = report(d, 103, 0, 70)
    assert r == ReportReplicaPositionResponse(Errors.NONE, p.topic_id, 0, 103, 2)
    p = d.part("t")
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (103, 2, 2, (102, 103))
    # A late report changes nothing.
    assert report(d, 102, 0, 90, leader_epoch=1).error is Errors.FENCED_LEADER_EPOCH
    assert d.part("t").leader == 103


def test_quorum_mode_last_epoch_beats_length_and_ties_go_to_assignment_order() -> None:
    d = cluster(replication_mode="quorum")
    d.heartbeat(101, want_fence=True)
    report(d, 102, 3, 10)
    report(d, 103, 2, 99)
    assert (d.part("t").leader, d.part("t").leader_epoch) == (102, 2)
    d.heartbeat(102, want_fence=True)  # fence 2 -> epoch 3
    d.heartbeat(101)  # 101 unfenced again
    assert (d.part("t").leader, d.part("t").leader_epoch) == (NO_LEADER, 3)
    report(d, 103, 3, 10)
    report(d, 101, 3, 10)
    assert (d.part("t").leader, d.part("t").leader_epoch) == (101, 4)  # tie: 101 comes first


def test_quorum_mode_no_live_majority_means_no_leader() -> None:
    d = cluster(replication_mode="quorum")
    d.heartbeat(102, want_fence=True)
    d.heartbeat(101, want_fence=True)
    p = d.part("t")
    assert (p.leader, p.leader_epoch) == (NO_LEADER, 1)
    report(d, 103, 0, 10)
    # A fenced broker's report is refused as a candidate and does not make a majority either.
    report(d, 102, 0, 20)
    assert d.tick() == [] and d.part("t").leader == NO_LEADER
    # Only reports from acceptable replicas at the fenced epoch count: once 102 is unfenced,
    # its report (kept from before) completes the majority at the next attempt.
    d.heartbeat(102)
    assert (d.part("t").leader, d.part("t").leader_epoch) == (102, 2)


def test_quorum_mode_reports_are_validated() -> None:
    d = cluster(replication_mode="quorum")
    d.heartbeat(101, want_fence=True)
    assert report(d, 102, 0, 1, broker_epoch=12345).error is Errors.STALE_BROKER_EPOCH
    d.start_brokers(104)
    assert report(d, 104, 0, 1).error is Errors.INVALID_REQUEST  # not a replica
    isr = cluster()
    isr.heartbeat(101, want_fence=True)
    assert report(isr, 102, 0, 1).error is Errors.INVALID_REQUEST  # ISR mode: no such election


def test_quorum_mode_new_controller_waits_for_fresh_reports() -> None:
    d = cluster(replication_mode="quorum")
    d.heartbeat(101, want_fence=True)
    report(d, 102, 0, 5)
    d.fail_over()  # reports are soft state (replicas re-send them while fenced)
    report(d, 103, 0, 7)
    assert d.part("t").leader == NO_LEADER
    report(d, 102, 0, 5)
    assert (d.part("t").leader, d.part("t").leader_epoch) == (103, 2)


def test_quorum_mode_preferred_election_never_skips_the_fence() -> None:
    d = cluster(replication_mode="quorum")
    d.heartbeat(101, want_fence=True)
    report(d, 102, 0, 5)
    report(d, 103, 0, 7)
    d.heartbeat(101)
    assert d.part("t").leader == 103
    r = elect(d, "preferred")
    assert r.results[0].error is Errors.PREFERRED_LEADER_NOT_AVAILABLE
    assert (d.part("t").leader, d.part("t").leader_epoch) == (103, 2)


# --- producer ids ------------------------------------------------------------------------------


def test_producer_id_blocks_are_consecutive() -> None:
    d = cluster()
    a = d.send(AllocateProducerIdsRequest(101, d.epoch(101)))
    b = d.send(AllocateProducerIdsRequest(102, d.epoch(102)))
    assert a == AllocateProducerIdsResponse(Errors.NONE, 0, 1000)
    assert b == AllocateProducerIdsResponse(Errors.NONE, 1000, 1000)
    assert d.image.next_producer_id == 2000
    stale = d.send(AllocateProducerIdsRequest(101, 999))
    assert stale == AllocateProducerIdsResponse(Errors.STALE_BROKER_EPOCH)
    unknown = d.send(AllocateProducerIdsRequest(7, 0))
    assert unknown == AllocateProducerIdsResponse(Errors.BROKER_ID_NOT_REGISTERED)


# --- topic config changes ----------------------------------------------------------------------


def alter_configs(d: Driver, topic: str, *pairs: tuple[str, str | None]) -> AlterConfigsResponse:
    r = d.send(AlterConfigsRequest(topic, pairs))
    assert isinstance(r, AlterConfigsResponse)
    return r


def test_enabling_unclean_election_elects_an_offline_partition_at_the_next_tick() -> None:
    """Reference pitfall 5: ISR={101}, 101 dies; with unclean election switched on, a live
    replica is elected (RECOVERING) by the periodic check."""
    d = cluster()
    d.alter("t", 0, (101,))
    d.heartbeat(101, want_fence=True)
    assert d.part("t").leader == NO_LEADER
    assert alter_configs(d, "t", ("unclean.leader.election.enable", "true")).error is Errors.NONE
    assert d.image.topic_configs("t")["unclean.leader.election.enable"] == "true"
    d.now_ms = 2000
    d.tick()
    p = d.part("t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (
        102,
        (102,),
        LeaderRecoveryState.RECOVERING,
    )
    assert alter_configs(d, "t", ("unclean.leader.election.enable", None)).error is Errors.NONE
    assert d.image.topic_config_overrides("t") == {}


def test_alter_configs_errors() -> None:
    d = cluster()
    assert (
        alter_configs(d, "nope", ("retention.ms", "1")).error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert alter_configs(d, "t", ("retention.ms", "x")).error is Errors.INVALID_CONFIG
    assert alter_configs(d, "t", ("no.such", None)).error is Errors.INVALID_CONFIG
    assert alter_configs(d, "t", ("retention.ms", "1"), ("retention.ms", "2")).error is (
        Errors.INVALID_CONFIG
    )
    assert d.image.topic_config_overrides("t") == {}


def test_a_topic_keeps_its_replication_mode_for_life() -> None:
    d = cluster()
    r = alter_configs(d, "t", ("replication.mode", "quorum"))
    assert r.error is Errors.INVALID_CONFIG and "cannot change" in r.message
    assert alter_configs(d, "t", ("replication.mode", "isr")).error is Errors.NONE  # no change
    q = cluster(replication_mode="quorum")
    assert alter_configs(q, "t", ("replication.mode", None)).error is Errors.INVALID_CONFIG
    assert q.image.topic_configs("t")["replication.mode"] == "quorum"


def test_changing_min_isr_clears_the_elr() -> None:
    d = cluster(ControllerConfig(eligible_leader_replicas_enable=True), min_insync_replicas="2")
    d.alter("t", 0, (101, 102))
    d.alter("t", 0, (101,))
    assert d.part("t").elr == (102,)
    alter_configs(d, "t", ("min.insync.replicas", "1"))
    assert d.part("t").elr == ()


_report_op = st.tuples(st.just("report"), st.sampled_from((101, 102, 103)), st.integers(-1, 3),
                       st.integers(0, 9), st.sampled_from((0, 0, 0, -1, 1)))  # epoch offset
quorum_ops = st.lists(st.one_of(
    st.tuples(st.just("fence_leader")),
    st.tuples(st.just("fence_leader")),
    st.tuples(st.just("fence"), st.sampled_from((101, 102, 103))),
    st.tuples(st.just("heartbeat"), st.sampled_from((101, 102, 103))),
    _report_op, _report_op, _report_op,
    st.tuples(st.just("fail_over")),
    st.tuples(st.just("tick")),
), min_size=15, max_size=40)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(quorum_ops)
def test_quorum_elections_follow_the_fencing_rule(ops: list[tuple[Any, ...]]) -> None:
    """Against a model of the reports: leadership never moves without the fenced epoch in
    between; a leader is elected only from usable replicas that reported at the fenced epoch and
    form a majority, and it is the highest (last epoch, LEO) of them (ties: replica order)."""
    d = cluster(replication_mode="quorum")
    reports: dict[int, tuple[int, int]] = {}  # the model: positions at the current fenced epoch
    for op in ops:
        before = d.part("t")
        match op:
            case ("fence_leader",):
                if before.leader != NO_LEADER:
                    d.heartbeat(before.leader, want_fence=True)
            case ("fence", b):
                d.heartbeat(b, want_fence=True)
            case ("heartbeat", b):
                d.heartbeat(b)
            case ("report", b, last_epoch, leo, off):
                r = report(d, b, last_epoch, leo, leader_epoch=before.leader_epoch + off)
                if r.error is Errors.NONE and before.leader == NO_LEADER:
                    reports[b] = (last_epoch, leo)
            case ("fail_over",):
                d.fail_over()
                reports.clear()  # soft state: gone with the old active controller
            case ("tick",):
                d.tick()
        after = d.part("t")
        if after.leader_epoch != before.leader_epoch and after.leader == NO_LEADER:
            reports.clear()  # a new fenced epoch: earlier reports never count
        if before.leader != NO_LEADER and after.leader != NO_LEADER:
            assert after.leader == before.leader, (before, after)  # no move without a fence
        if before.leader == NO_LEADER and after.leader != NO_LEADER:
            voters = {b: p for b, p in reports.items() if d.image.is_broker_usable(b)}
            assert len(voters) >= 2 and after.leader in voters, (voters, after)
            best = max(voters, key=lambda b: (*voters[b], -after.replicas.index(b)))
            assert after.leader == best and after.leader_epoch == before.leader_epoch + 1
            reports.clear()


def test_quorum_mode_a_reregistered_reporter_must_report_again() -> None:
    """A new incarnation may have lost what its old one reported (an unflushed tail): the
    controller drops the old incarnation's report at re-registration, so the stale LEO 50 can
    neither make a majority nor win the election."""
    d = cluster(replication_mode="quorum")
    d.heartbeat(101, want_fence=True)
    report(d, 102, 0, 50)  # 102's old incarnation: LEO 50
    d.now_ms = 20_000  # 102 crashed: its session expires
    d.heartbeat(103)
    d.tick()
    response = d.register(102, new_incarnation=True, previous_epoch=d.epoch(102))
    assert response.error is Errors.NONE
    d.heartbeat(102)  # caught up: unfenced (an election attempt runs)
    assert d.part("t").leader == NO_LEADER
    report(d, 103, 0, 10)
    assert d.part("t").leader == NO_LEADER  # 103 alone: the old report of 102 does not count
    report(d, 102, 0, 5)  # the new incarnation lost its unflushed tail
    assert (d.part("t").leader, d.part("t").leader_epoch) == (103, 2)
