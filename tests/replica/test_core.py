"""Core plumbing: follower long polls, the metadata image adapter, KIP-704 recovery reporting,
stale metadata, structured log events, and misuse errors."""

from __future__ import annotations

import dataclasses

import pytest
from structlog.testing import capture_logs

from partition.replica import (
    AppendAsLeader,
    FetchRequest,
    InvariantViolation,
    MetadataUpdated,
    ReplicaConfig,
    ReplicaUsageError,
    SendAlterPartition,
    metadata_update_from_image,
)
from quorum.controller.messages import BrokerState
from quorum.metadata.errors import Errors
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import (
    LeaderRecoveryState,
    Partition,
    Record,
    RegisterBroker,
    Topic,
    UnfenceBroker,
)
from tests.replica.router import TOPIC_ID, Cluster, answers


def test_follower_long_poll_parked_until_data_or_deadline() -> None:
    c = Cluster(replicas=(1, 2), config=ReplicaConfig(replica_fetch_wait_max_ms=500))
    assert c.fetch(2) is None  # nothing to read: parked at the leader
    assert c.nodes[1].core.next_deadline_ms() == c.now_ms + 500
    c.produce("a", acks=1)
    assert c.nodes[1].core.next_deadline_ms() == c.now_ms  # wake now
    c.advance(0)  # the tick answers it with the new batch, read from the log
    assert c.nodes[2].core.log_end_offset == 1
    assert c.fetch(2) is None  # @1: parked again (the leader learns LEO 1: HW 1)
    assert c.nodes[1].core.high_watermark == 1
    c.advance(499)
    assert c.nodes[2].core.high_watermark == 0
    c.advance(1)  # the wait is over: an empty answer carrying HW 1
    assert c.nodes[2].core.high_watermark == 1


def test_parked_fetches_fail_when_leadership_moves() -> None:
    c = Cluster(replicas=(1, 2, 3), config=ReplicaConfig(replica_fetch_wait_max_ms=500))
    c.fetch(2)
    c.elect(3)
    assert c.nodes[2].core.leader_epoch == 1
    failed = answers(c.effects[1])[-1]
    assert failed.error is Errors.NOT_LEADER_OR_FOLLOWER and failed.leader_id == 3


def test_metadata_update_from_image() -> None:
    image = MetadataImage()
    records: list[Record] = [
        RegisterBroker(1, "inc-1", ()), RegisterBroker(2, "inc-2", ()), RegisterBroker(3, "inc-3", ()),
        UnfenceBroker(1, 0), UnfenceBroker(2, 1),
        Topic("t", TOPIC_ID), Partition(TOPIC_ID, 0, (1, 2, 3), (1, 2), 1, 4, 7),
    ]  # fmt: skip
    for offset, record in enumerate(records):
        image.apply_record(offset, 1, record)
    update = metadata_update_from_image(image, TOPIC_ID, 0)
    assert update.partition.leader_epoch == 4 and update.partition.isr == (1, 2)
    assert update.eligible_brokers == (BrokerState(1, 0), BrokerState(2, 1))  # 3 is still fenced
    with pytest.raises(ReplicaUsageError):
        metadata_update_from_image(image, TOPIC_ID, 5)


def test_recovering_leader_reports_recovered_before_expanding() -> None:
    c = Cluster(replicas=(1, 2), isr=(1,), auto_alter=False)
    c.partition = dataclasses.replace(
        c.partition, leader_recovery_state=LeaderRecoveryState.RECOVERING
    )
    c.elect(1, isr=(1,))
    sent = [e for e in c.effects[1] if isinstance(e, SendAlterPartition)]
    assert sent and sent[-1].request.new_isr_with_epochs == (BrokerState(1, 101),)
    assert sent[-1].request.leader_recovery_state == LeaderRecoveryState.RECOVERED
    c.process_alter_partition()
    assert c.partition.leader_recovery_state == LeaderRecoveryState.RECOVERED
    c.produce("a", acks=1)
    c.fetch(2)
    c.fetch(2)
    c.process_alter_partition()
    assert c.partition.isr == (1, 2)


def test_stale_metadata_is_ignored() -> None:
    c = Cluster(replicas=(1, 2))
    c.elect(2)
    old = dataclasses.replace(c.partition, leader=1, leader_epoch=0)
    assert c.step(1, MetadataUpdated(old, ())) == []
    assert not c.nodes[1].core.is_leader and c.nodes[1].core.leader_epoch == 1


def test_not_a_replica_goes_offline_and_misuse_raises() -> None:
    c = Cluster(replicas=(1, 2))
    moved = dataclasses.replace(c.partition, replicas=(1,), isr=(1,), partition_epoch=1)
    c.step(2, MetadataUpdated(moved, ()))
    assert c.nodes[2].core.status().role == "offline" and c.nodes[2].core.next_deadline_ms() is None
    with pytest.raises(ReplicaUsageError):
        c.step(1, MetadataUpdated(dataclasses.replace(c.partition, topic_id="other"), ()))


def test_structured_events() -> None:
    c = Cluster(replicas=(1, 2))
    c.produce("a", acks=1)
    with capture_logs() as logs:
        c.advance(45_000)
    events = [
        e for e in logs if e["event"] in ("partition.isr_change_proposed", "partition.isr_shrunk")
    ]
    assert [e["event"] for e in events] == ["partition.isr_change_proposed", "partition.isr_shrunk"]
    assert events[1]["isr"] == [1] and events[1]["previous"] == [1, 2] and events[1]["node"] == 1
    assert any(isinstance(e, AppendAsLeader) for e in c.effects[1])


def test_reassignment_adds_a_follower_for_the_same_leader_epoch() -> None:
    c = Cluster(replicas=(1, 2))
    c.produce("a", acks=1)
    c.fetch(2)
    c.fetch(2)
    grown = dataclasses.replace(c.partition, replicas=(1, 2, 3), partition_epoch=1)
    c.step(1, MetadataUpdated(grown, c.metadata().eligible_brokers))
    req = FetchRequest(TOPIC_ID, 0, 3, 0, current_leader_epoch=0, broker_epoch=103)
    resp = answers(c.nodes[1].core.handle(req, c.now_ms))[-1]
    assert resp.error is Errors.NONE and resp.records


def test_leader_hw_going_back_is_an_invariant_violation() -> None:
    c = Cluster(replicas=(1,))
    c.produce("a", acks=-1)
    c.nodes[1].log.high_watermark = 0  # a driver that lost an UpdateHighWatermark
    with pytest.raises(InvariantViolation):
        c.advance(1)
