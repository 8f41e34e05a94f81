"""Kafka APIs for Kafka's own tools and for old clients, on raw requests (harness/kafka/
ops_handlers.py, handlers.py): OffsetForLeaderEpoch, DescribeQuorum, ElectLeaders,
DescribeLogDirs, DescribeProducers, and Metadata v0 (aiokafka and kafka-python 2.x open with it).
"""

from __future__ import annotations

import pytest
from kafka.protocol.admin import (
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    DescribeQuorumRequest,
    ElectLeadersRequest,
)
from kafka.protocol.consumer import OffsetForLeaderEpochRequest

from tests.kafka.conftest import BROKERS, KafkaCluster, Wire
from tests.kafka.test_protocol import batch, produce, roles

pytestmark = pytest.mark.integration

NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
FENCED_LEADER_EPOCH = 74
ELECTION_NOT_NEEDED = 84


def test_metadata_v0_lists_every_topic_for_an_empty_list(kcluster: KafkaCluster) -> None:
    kcluster.create_topic("ops-md0")
    with Wire(kcluster.kafka_port(BROKERS[0])) as w:
        every = w.metadata([], version=0)
        one = w.metadata(["ops-md0"], version=0)
    assert "ops-md0" in {t.name for t in every.topics}
    assert [t.name for t in one.topics] == ["ops-md0"]
    assert sorted(b.node_id for b in every.brokers) == BROKERS


def test_offset_for_leader_epoch_answers_the_epochs_end(kcluster: KafkaCluster) -> None:
    kcluster.create_topic("ops-epoch")
    leader, epoch, follower = roles(kcluster, "ops-epoch")
    cls = OffsetForLeaderEpochRequest[4]
    tcls = cls.OffsetForLeaderTopic

    def ask(port: int, leader_epoch: int, current: int) -> object:
        req = cls(replica_id=-1, topics=[tcls(topic="ops-epoch", partitions=[
            tcls.OffsetForLeaderPartition(partition=0, current_leader_epoch=current,
                                          leader_epoch=leader_epoch)])])  # fmt: skip
        with Wire(port) as w:
            return w.call(req).topics[0].partitions[0]

    with Wire(kcluster.kafka_port(leader)) as w:
        assert produce(w, "ops-epoch", batch([b"a", b"b", b"c"])).error_code == NONE
    p = ask(kcluster.kafka_port(leader), epoch, epoch)
    assert (p.error_code, p.leader_epoch) == (NONE, epoch)  # type: ignore[attr-defined]
    assert p.end_offset >= 3  # type: ignore[attr-defined]
    stale = ask(kcluster.kafka_port(leader), epoch, epoch - 1) if epoch > 0 else None
    if stale is not None:
        assert stale.error_code == FENCED_LEADER_EPOCH  # type: ignore[attr-defined]
    assert ask(kcluster.kafka_port(follower), epoch, -1).error_code == NOT_LEADER_OR_FOLLOWER  # type: ignore[attr-defined]


def test_describe_quorum_names_the_metadata_leader(kcluster: KafkaCluster) -> None:
    cls = DescribeQuorumRequest[2]
    req = cls(topics=[cls.TopicData(topic_name="__cluster_metadata",
                                    partitions=[cls.TopicData.PartitionData(partition_index=0)])])
    with Wire(kcluster.kafka_port(BROKERS[0])) as w:
        r = w.call(req)
    assert r.error_code == NONE
    p = r.topics[0].partitions[0]
    assert p.leader_id == kcluster.agreed_leader([1, 2, 3])
    assert sorted(v.replica_id for v in p.current_voters) == [1, 2, 3]
    assert sorted(o.replica_id for o in p.observers) == BROKERS
    assert sorted(n.node_id for n in r.nodes) == [1, 2, 3]
    # Forwarded to the active controller (KafkaApis.handleDescribeQuorumRequest): every voter's
    # and observer's log end offset and fetch time is known, not just this broker's own.
    for replica in [*p.current_voters, *p.observers]:
        assert 0 <= replica.log_end_offset <= p.high_watermark + 1_000, replica
        assert replica.last_fetch_timestamp > 0 and replica.last_caught_up_timestamp > 0, replica
    [leader] = [v for v in p.current_voters if v.replica_id == p.leader_id]
    assert leader.log_end_offset >= p.high_watermark > 0


def test_elect_leaders_preferred_goes_through_the_controller(kcluster: KafkaCluster) -> None:
    kcluster.create_topic("ops-elect")
    cls = ElectLeadersRequest[2]
    req = cls(election_type=0, topic_partitions=[
        cls.TopicPartitions(topic="ops-elect", partitions=[0])], timeout_ms=10_000)  # fmt: skip
    with Wire(kcluster.kafka_port(BROKERS[1])) as w:
        r = w.call(req)
    [result] = r.replica_election_results
    assert result.topic == "ops-elect"
    # A new topic's leader is its preferred replica already.
    assert [(p.partition_id, p.error_code) for p in result.partition_result] == [
        (0, ELECTION_NOT_NEEDED)]


def test_describe_log_dirs_and_producers(kcluster: KafkaCluster) -> None:
    kcluster.create_topic("ops-dirs")
    leader, _, _ = roles(kcluster, "ops-dirs")
    with Wire(kcluster.kafka_port(leader)) as w:
        assert produce(w, "ops-dirs", batch([b"x"], producer_id=424242, base_sequence=0)
                       ).error_code == NONE
        dcls = DescribeLogDirsRequest[4]
        dirs = w.call(dcls(topics=[dcls.DescribableLogDirTopic(topic="ops-dirs", partitions=[0])]))
        pcls = DescribeProducersRequest[0]
        prods = w.call(pcls(topics=[pcls.TopicRequest(name="ops-dirs", partition_indexes=[0])]))
    [logdir] = dirs.results
    [topic] = logdir.topics
    assert topic.name == "ops-dirs"
    [part] = topic.partitions
    assert part.partition_index == 0 and part.partition_size > 0 and part.offset_lag == 0
    [p] = prods.topics[0].partitions
    assert p.error_code == NONE
    assert [(s.producer_id, s.producer_epoch, s.last_sequence) for s in p.active_producers] == [
        (424242, 0, 0)]
