"""Consumer groups with real Kafka clients (docs/groups.md): the group coordinator hosted by the
brokers, its state in `__consumer_offsets`.

- a kafka-python and a confluent-kafka consumer in one group split a 6-partition topic (range
  assignor: 3 partitions each), every record read once;
- members join and leave a group while records flow (rebalances), committing after processing:
  no record is lost and none is processed twice;
- a group restarted from scratch resumes at its committed offsets;
- DescribeGroups / ListGroups / OffsetFetch through the admin clients, the `__consumer_offsets`
  topic as Kafka creates it (internal, compacted, RF 3).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kafka.conftest import BROKERS, KafkaCluster, Wire
from tests.kafka.groups import (
    Member,
    committed,
    confluent_loop,
    group_state,
    kafka_python_loop,
    produce,
    wait_for,
)
from tests.live import poll

pytestmark = pytest.mark.integration


def test_kafka_python_and_confluent_kafka_split_a_topic(kcluster: KafkaCluster) -> None:
    topic, group, partitions = "grp-split", "split", 6
    kcluster.create_topic(topic, partitions)
    a = Member("kp-member").start(kafka_python_loop(kcluster, topic, group))
    b = Member("ck-member").start(confluent_loop(kcluster, topic, group))
    try:
        wait_for("a Stable group of both members",
                 lambda: group_state(kcluster, group) == ("Stable", ["ck-member", "kp-member"])
                 and a.assigned | b.assigned == set(range(partitions))
                 and not a.assigned & b.assigned, 60, a, b)  # fmt: skip
        values = produce(kcluster, topic, "split", 600, partitions)
        wait_for("every record", lambda: len(a.records) + len(b.records) >= 600, 60, a, b)
        of_a, of_b = set(a.assigned), set(b.assigned)
    finally:
        a.join()
        b.join()
    assert not a.errors and not b.errors
    # Range assignor over 6 partitions and 2 members: 3 each, disjoint; each read its own.
    assert len(of_a) == len(of_b) == 3
    assert of_a | of_b == set(range(partitions))
    assert {p for p, _, _ in a.records} == of_a
    assert {p for p, _, _ in b.records} == of_b
    got = sorted(v for _, _, v in a.records + b.records)
    assert got == sorted(values)  # every record once
    # Both committed what they processed: 100 records per partition.
    offsets = committed(kcluster, group)
    assert offsets == {(topic, p): 100 for p in range(partitions)}


def test_members_join_and_leave_without_loss_or_duplicates(kcluster: KafkaCluster) -> None:
    topic, group, partitions = "grp-churn", "churn", 4
    kcluster.create_topic(topic, partitions)
    first = Member("first").start(kafka_python_loop(kcluster, topic, group))
    members = [first]
    values = produce(kcluster, topic, "c1", 200, partitions)
    try:
        wait_for("the first records", lambda: len(first.records) >= 200, 60, *members)
        second = Member("second").start(kafka_python_loop(kcluster, topic, group))
        members.append(second)
        values += produce(kcluster, topic, "c2", 200, partitions)
        wait_for("a rebalance onto both members",
                 lambda: group_state(kcluster, group)[1] == ["first", "second"]
                 and bool(second.assigned), 60, *members)  # fmt: skip
        values += produce(kcluster, topic, "c3", 200, partitions)
        first.join()  # LeaveGroup: its partitions move to the second member
        wait_for("the second member alone",
                 lambda: group_state(kcluster, group) == ("Stable", ["second"]), 60, second)
        values += produce(kcluster, topic, "c4", 200, partitions)
        wait_for("every record", lambda: sum(len(m.records) for m in members) >= len(values),
                 60, second)  # fmt: skip
        assert second.assigned == set(range(partitions))  # all of them once the first left
    finally:
        for m in members:
            m.join()
    assert not first.errors and not second.errors
    processed = [v for m in members for _, _, v in m.records]
    assert sorted(processed) == sorted(values)  # none lost, none processed twice
    assert committed(kcluster, group) == {(topic, p): 200 for p in range(partitions)}


def test_restarted_group_resumes_from_committed_offsets(kcluster: KafkaCluster) -> None:
    topic, group, partitions = "grp-resume", "resume", 3
    kcluster.create_topic(topic, partitions)
    before = produce(kcluster, topic, "r1", 300, partitions)
    m = Member("before").start(kafka_python_loop(kcluster, topic, group))
    try:
        wait_for("the first 300", lambda: len(m.records) >= 300, 60, m)
    finally:
        m.join()
    assert committed(kcluster, group) == {(topic, p): 100 for p in range(partitions)}
    after = produce(kcluster, topic, "r2", 300, partitions)
    # The whole group is new processes, and the other client library.
    n = Member("after").start(confluent_loop(kcluster, topic, group))
    try:
        wait_for("the next 300", lambda: len(n.records) >= 300, 60, n)
    finally:
        n.join()
    assert sorted(v for _, _, v in m.records) == sorted(before)
    assert sorted(v for _, _, v in n.records) == sorted(after)  # resumed: nothing read again
    assert min(o for _, o, _ in n.records) == 100
    assert committed(kcluster, group) == {(topic, p): 200 for p in range(partitions)}


def test_offsets_topic_is_internal_compacted_and_replicated(kcluster: KafkaCluster) -> None:
    from kafka.protocol.admin import DescribeConfigsRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    with Wire(kcluster.kafka_port(BROKERS[0])) as w:
        # The first FindCoordinator creates the topic (COORDINATOR_NOT_AVAILABLE until then).
        poll(lambda: w.call(FindCoordinatorRequest[3](key="any", key_type=0)).error_code == 0,
             30, "a coordinator")  # fmt: skip
        topic = w.metadata(["__consumer_offsets"]).topics[0]
        assert topic.error_code == 0 and topic.is_internal
        assert all(sorted(p.replica_nodes) == BROKERS for p in topic.partitions)
        cls = DescribeConfigsRequest[4]
        r = w.call(cls(resources=[cls.DescribeConfigsResource(
            resource_type=2, resource_name="__consumer_offsets",
            configuration_keys=["cleanup.policy"])], include_synonyms=False,
            include_documentation=False))  # fmt: skip
    [resource] = r.results
    assert [(c.name, c.value) for c in resource.configs] == [("cleanup.policy", "compact")]


def test_clients_cannot_produce_to_the_offsets_topic(kcluster: KafkaCluster) -> None:
    """Only the group coordinator writes `__consumer_offsets`: a client's produce is refused with
    INVALID_TOPIC_EXCEPTION (17) and appends nothing, as Kafka's ReplicaManager.appendToLocalLog
    does with internalTopicsAllowed=false. The Kafka listener and the admin HTTP produce route go
    through the same ReplicaManager.produce (as the native listener); the coordinator's own writes
    pass `internal_topics_allowed=True` (the other tests here commit offsets through it)."""
    from kafka.protocol.consumer import ListOffsetsRequest
    from kafka.protocol.metadata import FindCoordinatorRequest
    from kafka.protocol.producer import ProduceRequest

    from partition.log import batch as rb

    def end_offset(w: Wire, partition: int) -> int:
        cls = ListOffsetsRequest[7]
        t = cls.ListOffsetsTopic
        r = w.call(cls(replica_id=-1, isolation_level=0, topics=[t(name=topic, partitions=[
            t.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1,
                                   timestamp=-1)])]))  # fmt: skip
        p = r.topics[0].partitions[0]
        assert p.error_code == 0
        return int(p.offset)

    topic = "__consumer_offsets"
    with Wire(kcluster.kafka_port(BROKERS[0])) as w:
        poll(lambda: w.call(FindCoordinatorRequest[3](key="any", key_type=0)).error_code == 0,
             30, "a coordinator")  # fmt: skip
    leader, _ = kcluster.leader(topic, 0)
    records = rb.encode_batch([rb.Record(b"forged", b"key", timestamp_ms=1_700_000_000_000)])
    with Wire(kcluster.kafka_port(leader)) as w:
        before = end_offset(w, 0)
        cls = ProduceRequest[9]
        t = cls.TopicProduceData(name=topic, partition_data=[
            cls.TopicProduceData.PartitionProduceData(index=0, records=records)])
        r = w.call(cls(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[t]))
        answer = r.responses[0].partition_responses[0]
        assert (answer.error_code, answer.base_offset) == (17, -1)
        status, body = kcluster.client(leader, 10.0).request(
            "POST", f"/topics/{topic}/partitions/0/records?acks=all&timeout_ms=5000",
            {"records": [{"value": "forged"}]})  # fmt: skip
        assert (status, body["error"]) == (400, "INVALID_TOPIC_EXCEPTION")
        assert end_offset(w, 0) == before  # nothing appended


def test_group_cli_describes_like_kafka_consumer_groups(kcluster: KafkaCluster) -> None:
    topic, group, partitions = "grp-cli", "cli", 2
    kcluster.create_topic(topic, partitions)
    produce(kcluster, topic, "cli", 60, partitions)
    m = Member("cli-member").start(kafka_python_loop(kcluster, topic, group))
    try:
        wait_for("60 records committed",
                 lambda: committed(kcluster, group) == {(topic, p): 30 for p in range(partitions)}
                 and group_state(kcluster, group)[0] == "Stable", 60, m)  # fmt: skip
        assert group in kcluster.cli("group", "list").split()
        lines = kcluster.cli("group", "describe", group).splitlines()
        # The admin API: the coordinator answers, any other broker points at it.
        hinted = status, body = kcluster.client(BROKERS[0]).request("GET", f"/groups/{group}")
        if status == 421:
            status, body = kcluster.client(body["coordinator"]).request("GET", f"/groups/{group}")
    finally:
        m.join()
    header, *rows = (line.split() for line in lines)
    assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                      "CONSUMER-ID", "HOST", "CLIENT-ID"]  # fmt: skip
    assert [r[:6] for r in rows] == [[group, topic, str(p), "30", "30", "0"]
                                     for p in range(partitions)]  # fmt: skip
    assert all(r[6].startswith("cli-member-") and r[7] == "/127.0.0.1" and r[8] == "cli-member"
               for r in rows)  # fmt: skip
    if hinted[0] == 421:
        assert hinted[1]["error"] == "NOT_COORDINATOR" and hinted[1]["coordinator"] in BROKERS
    assert status == 200 and body["state"] == "Stable" and body["protocol"] == "range"
    assert sorted((o["partition"], o["offset"]) for o in body["offsets"]) == [(0, 30), (1, 30)]


def test_a_parked_join_keeps_its_connection_in_order_and_blocks_no_other(
    kcluster: KafkaCluster,
) -> None:
    """Kafka answers a connection's requests in order: an ApiVersions sent behind a parked
    JoinGroup is answered after it, while another connection is served at once."""
    import struct

    from kafka.protocol.consumer import JoinGroupRequest
    from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest

    group = "parked"
    with Wire(kcluster.kafka_port(BROKERS[0])) as w:
        coordinator = poll(lambda: (r := w.call(FindCoordinatorRequest[3](
            key=group, key_type=0))).error_code == 0 and r.node_id, 30, "a coordinator")  # fmt: skip
    cls = JoinGroupRequest[9]

    def join(member_id: str) -> Any:
        return cls(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                   member_id=member_id, group_instance_id=None, protocol_type="consumer",
                   protocols=[cls.JoinGroupRequestProtocol(name="range", metadata=b"")],
                   reason=None)  # fmt: skip

    with Wire(kcluster.kafka_port(coordinator)) as w, \
            Wire(kcluster.kafka_port(coordinator)) as other:  # fmt: skip
        first = w.call(join(""))
        assert first.error_code == 79  # MEMBER_ID_REQUIRED (KIP-394)
        join_id = w.send(join(first.member_id))  # parked: group.initial.rebalance.delay.ms
        versions_id = w.send(ApiVersionsRequest[0]())
        assert other.call(ApiVersionsRequest[0]()).error_code == 0  # not behind the parked join
        frames = [w.recv_frame(), w.recv_frame()]
    assert [struct.unpack_from(">i", f)[0] for f in frames] == [join_id, versions_id]
