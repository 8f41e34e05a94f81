"""Topic creation and deletion, replica placement (round robin with a shifting start, racks)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quorum.controller import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
)
from quorum.controller.placement import assign_replicas
from quorum.controller.topics import MAX_PARTITIONS_PER_TOPIC, MAX_REPLICATION_FACTOR
from quorum.metadata import Errors, Partition, RemoveTopic, Topic
from tests.controller.driver import Driver


def test_create_three_partitions_rf3_like_the_kafka_demo() -> None:
    d = Driver()
    d.start_brokers(101, 102, 103)
    response = d.create("first", 3, 3)
    assert response.error is Errors.NONE and len(response.topic_id) == 22
    topic = d.image.topic("first")
    assert topic is not None and topic.topic_id == response.topic_id
    assert [
        (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch)
        for p in d.image.partitions(topic.topic_id)
    ] == [
        ((101, 102, 103), (101, 102, 103), 101, 0, 0),
        ((102, 103, 101), (102, 103, 101), 102, 0, 0),
        ((103, 101, 102), (103, 101, 102), 103, 0, 0),
    ]
    assert isinstance(d.written[-4], Topic) and all(
        isinstance(r, Partition) for r in d.written[-3:]
    )


def test_validate_only_runs_every_check_and_writes_nothing() -> None:
    """CreateTopics validate_only (ReplicationControlManager.createTopics): the answer a real
    create would get, no records, and the name stays free."""
    d = Driver()
    d.start_brokers(101, 102, 103)
    before = len(d.written)
    ok = d.send(CreateTopicRequest("dry", 2, 3, (("min.insync.replicas", "2"),),
                                   validate_only=True))
    assert isinstance(ok, CreateTopicResponse) and ok.error is Errors.NONE
    for bad, error in ((CreateTopicRequest("dry", 1, 4, validate_only=True),
                        Errors.INVALID_REPLICATION_FACTOR),
                       (CreateTopicRequest("dry", 1, 3, (("min.insync.replicas", "x"),),
                                           validate_only=True), Errors.INVALID_CONFIG)):
        answer = d.send(bad)
        assert isinstance(answer, CreateTopicResponse) and answer.error is error
    assert len(d.written) == before and d.image.topic("dry") is None
    assert d.create("dry", 2, 3).error is Errors.NONE


def test_defaults_and_overrides_of_topic_configs() -> None:
    d = Driver()
    d.start_brokers(101, 102, 103)
    d.create("t", 1, 3, min_insync_replicas="2", replication_mode="quorum")
    configs = d.image.topic_configs("t")
    assert configs["min.insync.replicas"] == "2"
    assert configs["replication.mode"] == "quorum"
    assert configs["unclean.leader.election.enable"] == "false"
    assert configs["segment.bytes"] == str(1 << 30)
    assert d.image.topic_config_overrides("t") == {
        "min.insync.replicas": "2",
        "replication.mode": "quorum",
    }


def test_successive_topics_start_on_successive_brokers() -> None:
    d = Driver()
    d.start_brokers(101, 102, 103)
    d.create("a", 1, 2)
    d.create("b", 1, 2)
    assert d.part("a").replicas == (101, 102)
    assert d.part("b").replicas == (102, 103)


def test_topic_already_exists() -> None:
    d = Driver()
    d.start_brokers(101)
    d.create("t", 1, 1)
    assert d.create("t", 1, 1).error is Errors.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("partitions", [0, -1, MAX_PARTITIONS_PER_TOPIC + 1, 10**12])
def test_invalid_partitions(partitions: int) -> None:
    d = Driver()
    d.start_brokers(101)
    before = len(d.written)
    assert d.create("t", partitions, 1).error is Errors.INVALID_PARTITIONS
    assert d.image.topic("t") is None and len(d.written) == before


def test_partition_and_replication_factor_upper_bounds() -> None:
    d = Driver()
    d.start_brokers(101)
    before = len(d.written)
    r = d.create("big", 1, MAX_REPLICATION_FACTOR + 1)
    assert r.error is Errors.INVALID_REPLICATION_FACTOR and str(MAX_REPLICATION_FACTOR) in r.message
    assert d.create("big", 1, 10**20).error is Errors.INVALID_REPLICATION_FACTOR
    assert len(d.written) == before  # nothing built, nothing written
    assert d.create("big", MAX_PARTITIONS_PER_TOPIC, 1).error is Errors.NONE  # the bound itself
    assert len(d.image.partitions(d.image.topic("big").topic_id)) == MAX_PARTITIONS_PER_TOPIC


def test_invalid_replication_factor_counts_only_unfenced_brokers() -> None:
    d = Driver()
    d.start_brokers(101, 102)
    d.register(103)  # registered but fenced
    assert d.create("t", 1, 0).error is Errors.INVALID_REPLICATION_FACTOR
    r = d.create("t", 1, 3)
    assert r.error is Errors.INVALID_REPLICATION_FACTOR and "2 unfenced" in r.message
    assert d.create("t", 1, 2).error is Errors.NONE


@pytest.mark.parametrize(
    "configs",
    [
        {"no.such.config": "1"},
        {"min_insync_replicas": "0"},
        {"unclean_leader_election_enable": "yes"},
        {"replication_mode": "paxos"},  # raft is accepted since the runtime routes it
        {"segment_bytes": "abc"},
        {"retention_ms": "-2"},
    ],
)
def test_invalid_config(configs: dict[str, str]) -> None:
    d = Driver()
    d.start_brokers(101)
    r = d.create("t", 1, 1, **configs)
    assert r.error is Errors.INVALID_CONFIG and r.message
    assert d.image.topic("t") is None


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x" * 250, "sp ace"])
def test_invalid_topic_name(name: str) -> None:
    d = Driver()
    d.start_brokers(101)
    assert d.create(name, 1, 1).error is Errors.INVALID_TOPIC_EXCEPTION


def test_rack_aware_placement_spreads_each_partition_over_racks() -> None:
    d = Driver()
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    d.start_brokers(*racks, racks=racks)
    d.create("t", 6, 3)
    for i in range(6):
        p = d.part("t", i)
        assert {racks[r] for r in p.replicas} == {"a", "b", "c"}
    assert len({d.part("t", i).leader for i in range(6)}) == 6


def test_delete_topic() -> None:
    d = Driver()
    d.start_brokers(101)
    created = d.create("t", 2, 1)
    response = d.send(DeleteTopicRequest("t"))
    assert response == DeleteTopicResponse(Errors.NONE)
    assert d.written[-1] == RemoveTopic(created.topic_id)
    assert d.image.topic("t") is None
    missing = d.send(DeleteTopicRequest("t"))
    assert isinstance(missing, DeleteTopicResponse)
    assert missing.error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    again = d.create("t", 1, 1)
    assert again.error is Errors.NONE and again.topic_id != created.topic_id


@given(
    st.integers(1, 8),
    st.integers(1, 20),
    st.integers(1, 8),
    st.integers(0, 10),
    st.booleans(),
)
def test_placement_gives_distinct_replicas_and_rotates_leaders(
    n: int, partitions: int, rf: int, start: int, with_racks: bool
) -> None:
    rf = min(rf, n)
    brokers = list(range(100, 100 + n))
    racks = {b: f"r{b % 3}" for b in brokers} if with_racks else {}
    assignment = assign_replicas(brokers, racks, partitions, rf, start)
    assert len(assignment) == partitions
    for replicas in assignment:
        assert len(replicas) == rf and len(set(replicas)) == rf
        assert set(replicas) <= set(brokers)
        if with_racks:
            assert len({racks[r] for r in replicas}) == min(rf, len(set(racks.values())))
    leaders = [r[0] for r in assignment]
    # Leaders are spread: no broker leads more than ceil(partitions / n) partitions.
    assert max(leaders.count(b) for b in brokers) <= -(-partitions // n)


def test_placement_rejects_an_impossible_replication_factor() -> None:
    with pytest.raises(ValueError):
        assign_replicas([1, 2], {}, 1, 3)


def test_describe_lines_like_kafka_topics() -> None:
    from quorum.metadata.describe import describe_topic, describe_topics

    d = Driver()
    d.start_brokers(101, 102, 103)
    created = d.create("first", 2, 3, min_insync_replicas="2")
    d.heartbeat(102, want_fence=True)
    assert describe_topic(d.image, "first") == [
        f"Topic: first\tTopicId: {created.topic_id}\tPartitionCount: 2\tReplicationFactor: 3\t"
        "Configs: min.insync.replicas=2",
        "\tTopic: first\tPartition: 0\tLeader: 101\tReplicas: 101,102,103\tIsr: 101,103\t"
        "Elr: N/A\tLastKnownElr: N/A",
        "\tTopic: first\tPartition: 1\tLeader: 103\tReplicas: 102,103,101\tIsr: 103,101\t"
        "Elr: N/A\tLastKnownElr: N/A",
    ]
    assert describe_topic(d.image, "nope") == []
    assert describe_topics(d.image) == describe_topic(d.image, "first")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("segment.ms", "0"),
        ("cleanup.policy", "compact"),
        ("cleanup.policy", "compact,delete"),
        ("flush.messages", "0"),
        ("flush.ms", "-1"),
        ("max.message.bytes", "-1"),
        ("retention.bytes", "lots"),
    ],
)
def test_invalid_log_config_names_the_key(name: str, value: str) -> None:
    d = Driver()
    d.start_brokers(101)
    r = d.send(CreateTopicRequest("t", 1, 1, ((name, value),)))
    assert isinstance(r, CreateTopicResponse)
    assert r.error is Errors.INVALID_CONFIG and name in r.message
    if name == "cleanup.policy":
        assert "compaction is not supported" in r.message
    assert d.image.topic("t") is None


def test_log_configs_are_accepted_at_create_and_alter() -> None:
    d = Driver()
    d.start_brokers(101)
    configs = {"segment.bytes": "1024", "segment.ms": "60000", "retention.ms": "-1",
               "retention.bytes": "4096", "cleanup.policy": "delete", "flush.messages": "1",
               "flush.ms": "1000", "max.message.bytes": "2048"}  # fmt: skip
    r = d.send(CreateTopicRequest("t", 1, 1, tuple(configs.items())))
    assert isinstance(r, CreateTopicResponse) and r.error is Errors.NONE
    assert d.image.topic_config_overrides("t") == configs
    bad = d.send(AlterConfigsRequest("t", (("cleanup.policy", "compact"),)))
    assert isinstance(bad, AlterConfigsResponse) and bad.error is Errors.INVALID_CONFIG
    good = d.send(AlterConfigsRequest("t", (("retention.bytes", "100"),)))
    assert isinstance(good, AlterConfigsResponse) and good.error is Errors.NONE
    assert d.image.topic_configs("t")["retention.bytes"] == "100"


def test_only_the_internal_offsets_topic_may_be_compacted() -> None:
    # Kafka's __consumer_offsets is cleanup.policy=compact; a user topic still may not be
    # (kraftlab has no log cleaner, docs/groups.md).
    d = Driver()
    d.start_brokers(101)
    r = d.send(CreateTopicRequest("__consumer_offsets", 3, 1, (("cleanup.policy", "compact"),)))
    assert isinstance(r, CreateTopicResponse) and r.error is Errors.NONE
    assert d.image.topic_config_overrides("__consumer_offsets") == {"cleanup.policy": "compact"}
    r = d.send(CreateTopicRequest("__other", 1, 1, (("cleanup.policy", "compact"),)))
    assert isinstance(r, CreateTopicResponse) and r.error is Errors.INVALID_CONFIG
