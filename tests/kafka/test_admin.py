"""CreateTopics, DeleteTopics and DescribeCluster through real admin clients (kafka-python's
KafkaAdminClient, confluent-kafka's AdminClient): forwarded to the active controller, visible in
Metadata, with Kafka's error codes for a duplicate topic or a bad replication factor."""

from __future__ import annotations

import pytest

from tests.kafka.conftest import BROKERS, KafkaCluster, Wire
from tests.live import poll

pytestmark = pytest.mark.integration


def partitions(c: KafkaCluster, topic: str) -> list[tuple[int, int, list[int]]] | None:
    with Wire(c.kafka_port(BROKERS[1])) as w:
        t = w.metadata([topic]).topics[0]
    if t.error_code != 0 or any(p.leader_id < 0 for p in t.partitions):
        return None
    return sorted((p.partition_index, p.leader_id, sorted(p.replica_nodes)) for p in t.partitions)


def test_kafka_python_admin_create_describe_delete(kcluster: KafkaCluster) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import InvalidReplicationFactorError, TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=kcluster.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("kp-admin", 3, 3, topic_configs={"retention.ms": "60000"})])
        parts = poll(lambda: partitions(kcluster, "kp-admin"), 20, "kp-admin in Metadata")
        assert [(i, r) for i, _, r in parts] == [(i, BROKERS) for i in range(3)]
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("kp-admin", 1, 3)])
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics([NewTopic("kp-admin-rf", 1, 4)])  # only 3 brokers
        cluster = admin.describe_cluster()
        assert sorted(b["broker_id"] for b in cluster["brokers"]) == BROKERS, cluster
        assert cluster["cluster_id"] == kcluster.file.cluster_id
        admin.delete_topics(["kp-admin"])
    finally:
        admin.close()

    def gone() -> bool:
        with Wire(kcluster.kafka_port(BROKERS[2])) as w:
            return w.metadata(["kp-admin"]).topics[0].error_code == 3

    poll(gone, 20, "kp-admin deleted")


def test_confluent_admin_create(kcluster: KafkaCluster) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kcluster.bootstrap})
    futures = admin.create_topics([NewTopic("kp-admin-ck", num_partitions=2,
                                            replication_factor=3)])  # fmt: skip
    futures["kp-admin-ck"].result(timeout=20)
    parts = poll(lambda: partitions(kcluster, "kp-admin-ck"), 20, "kp-admin-ck in Metadata")
    assert [i for i, _, _ in parts] == [0, 1]
    again = admin.create_topics([NewTopic("kp-admin-ck", num_partitions=1, replication_factor=3)])
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
        again["kp-admin-ck"].result(timeout=20)
