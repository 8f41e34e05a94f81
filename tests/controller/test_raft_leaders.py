"""replication.mode=raft on the controller: it records the leaders the Raft groups elect (as their
brokers report them) and never elects, fences or moves one itself (quorum/controller/raft_leaders.py).
"""

from __future__ import annotations

from quorum.controller import (
    ControllerResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    RaftLeader,
    ReportRaftLeadersRequest,
    ReportRaftLeadersResponse,
)
from quorum.metadata import Errors, Partition, PartitionChange, Topic
from quorum.metadata.records import NO_LEADER
from tests.controller.driver import Driver

RAFT = (("replication.mode", "raft"),)


def raft_topic(d: Driver, name: str = "r", partitions: int = 1) -> str:
    """A raft topic as the controller creates one (no leader, epoch 0, ISR = replicas)."""
    topic_id = f"{name}-id"
    records = [Topic(name, topic_id, RAFT)] + [
        Partition(topic_id, p, (101, 102, 103), (101, 102, 103), NO_LEADER)
        for p in range(partitions)
    ]
    d.commit(ControllerResult(tuple(records)))
    return topic_id


def report(d: Driver, broker: int, topic_id: str, epoch: int, isr: tuple[int, ...],
           partition: int = 0, broker_epoch: int | None = None) -> ReportRaftLeadersResponse:  # fmt: skip
    request = ReportRaftLeadersRequest(
        broker, d.epoch(broker) if broker_epoch is None else broker_epoch,
        (RaftLeader(topic_id, partition, epoch, isr),))  # fmt: skip
    response = d.send(request)
    assert isinstance(response, ReportRaftLeadersResponse)
    return response


def started() -> tuple[Driver, str]:
    d = Driver()
    d.start_brokers(101, 102, 103)
    return d, raft_topic(d)


def test_the_elected_leader_and_its_raft_epoch_are_recorded() -> None:
    d, tid = started()
    response = report(d, 102, tid, 3, (102, 101))
    assert response.error is Errors.NONE
    (result,) = response.results
    assert (result.error, result.leader, result.leader_epoch) == (Errors.NONE, 102, 3)
    p = d.part("r")
    # The Raft epoch, not a bump of the image's: clients' KIP-320 epochs are the replicas'.
    assert (p.leader, p.leader_epoch, p.isr) == (102, 3, (101, 102))
    change = d.written[-1]
    assert isinstance(change, PartitionChange) and change.leader_epoch == 3


def test_an_isr_update_in_the_same_epoch_keeps_the_epoch() -> None:
    d, tid = started()
    report(d, 102, tid, 3, (102,))
    before = d.part("r").partition_epoch
    assert report(d, 102, tid, 3, (101, 102, 103)).results[0].error is Errors.NONE
    p = d.part("r")
    assert (p.leader, p.leader_epoch, p.isr) == (102, 3, (101, 102, 103))
    assert p.partition_epoch == before + 1
    written = len(d.written)
    assert report(d, 102, tid, 3, (101, 102, 103)).results[0].error is Errors.NONE
    assert len(d.written) == written  # a repeated report writes nothing


def test_stale_and_conflicting_reports_are_refused() -> None:
    d, tid = started()
    report(d, 102, tid, 5, (101, 102))
    assert report(d, 103, tid, 4, (103,)).results[0].error is Errors.FENCED_LEADER_EPOCH
    # Epoch 5 already has a leader: a second one is a broken report, not a new fact.
    assert report(d, 103, tid, 5, (103,)).results[0].error is Errors.INVALID_REQUEST
    # Not in its own ISR, or an ISR naming a non-replica.
    assert report(d, 103, tid, 6, (101,)).results[0].error is Errors.INVALID_REQUEST
    assert report(d, 103, tid, 6, (103, 104)).results[0].error is Errors.INVALID_REQUEST
    assert d.part("r").leader == 102
    result = report(d, 103, tid, 6, (103, 101)).results[0]
    assert (result.error, result.leader, result.leader_epoch) == (Errors.NONE, 103, 6)
    assert report(d, 101, tid, 7, (101,), broker_epoch=999).error is Errors.STALE_BROKER_EPOCH


def test_a_fenced_leader_is_dropped_at_the_same_epoch_and_may_report_again() -> None:
    d, tid = started()
    report(d, 101, tid, 2, (101, 102, 103))
    d.now_ms += 60_000
    for b in (102, 103):  # 101 stays silent: its session expires
        d.heartbeat(b)
    d.tick()
    p = d.part("r")
    # The controller knows the leader is gone, not who comes next: no election, no new epoch.
    assert (p.leader, p.leader_epoch, p.isr) == (NO_LEADER, 2, (102, 103))
    assert d.tick() == []  # and no repair elects anyone later
    # Cut off from the controllers only, 101 may still lead its Raft group: recorded again.
    assert report(d, 101, tid, 2, (101, 102)).results[0].error is Errors.NONE
    assert (d.part("r").leader, d.part("r").leader_epoch) == (101, 2)
    d.heartbeat(102)
    assert d.tick() == []  # the periodic repair leaves a raft partition alone


def test_elections_and_alter_partition_do_not_apply() -> None:
    d, tid = started()
    report(d, 101, tid, 1, (101, 102, 103))
    response = d.send(ElectLeadersRequest("r", None, "preferred"))
    assert isinstance(response, ElectLeadersResponse)
    assert [r.error for r in response.results] == [Errors.INVALID_REQUEST]
    assert d.alter("r", 0, (101, 102)).error is Errors.INVALID_REQUEST
    assert d.part("r").isr == (101, 102, 103)


def test_a_non_raft_topic_refuses_reports() -> None:
    d = Driver()
    d.start_brokers(101, 102, 103)
    d.create("isr", 1, 3)
    t = d.image.topic("isr")
    assert t is not None
    result = report(d, 101, t.topic_id, 1, (101,)).results[0]
    assert result.error is Errors.INVALID_REQUEST
