"""How topic configs reach a broker's logs (harness/runtime/log_configs.py): Kafka defaults < the
broker's log.* settings < the topic's overrides; log.retention.ms wins over log.retention.hours
only when set; the replica core gets max.message.bytes from the same merged map."""

from __future__ import annotations

from pathlib import Path

from harness.runtime.config import NodeConfig
from harness.runtime.log_configs import TopicLogConfigs
from partition.replica import ReplicaConfig


def node_config(**kw: int) -> NodeConfig:
    return NodeConfig(node_id=101, cluster_id="c", voters={}, admin_listeners={},
                      metadata_log_dir=Path("/tmp/x"), **kw)  # type: ignore[arg-type]  # fmt: skip


def test_kafka_defaults_when_nothing_is_set() -> None:
    config = TopicLogConfigs(node_config()).log_config({})
    assert (config.segment_bytes, config.segment_ms) == (1 << 30, 7 * 24 * 3600 * 1000)
    assert (config.retention_ms, config.retention_bytes) == (168 * 3600 * 1000, -1)
    assert (config.flush_messages, config.flush_ms, config.max_message_bytes) == (None, None, 1048588)


def test_broker_settings_are_the_defaults_and_topic_overrides_win() -> None:
    logs = TopicLogConfigs(node_config(log_segment_bytes=4096, log_retention_hours=1,
                                       log_retention_bytes=10_000, log_flush_interval_messages=5,
                                       message_max_bytes=2000))  # fmt: skip
    config = logs.log_config({})
    assert (config.segment_bytes, config.retention_ms, config.retention_bytes) == (4096, 3_600_000, 10_000)
    assert (config.flush_messages, config.max_message_bytes) == (5, 2000)
    topic = logs.log_config({"segment.bytes": "1024", "retention.ms": "-1", "max.message.bytes": "500"})
    assert (topic.segment_bytes, topic.retention_ms, topic.retention_bytes) == (1024, -1, 10_000)
    replica = ReplicaConfig.from_topic_configs(logs.effective({"max.message.bytes": "500"}))
    assert replica.max_message_bytes == 500 == topic.max_message_bytes
    assert ReplicaConfig.from_topic_configs(logs.effective({})).max_message_bytes == 2000


def test_log_retention_ms_wins_over_hours_only_when_set() -> None:
    assert TopicLogConfigs(node_config(log_retention_hours=2)).log_config({}).retention_ms == 7_200_000
    both = node_config(log_retention_hours=2, log_retention_ms=5000)
    assert TopicLogConfigs(both).log_config({}).retention_ms == 5000


def test_a_compacted_internal_topic_keeps_its_log_and_a_mixed_policy_keeps_retention() -> None:
    # __consumer_offsets is cleanup.policy=compact (docs/groups.md): no log cleaner here, so a
    # compact-only log is never deleted by retention; compact,delete keeps retention.
    logs = TopicLogConfigs(node_config(log_retention_hours=1, log_retention_bytes=10_000))
    compact = logs.log_config({"cleanup.policy": "compact"})
    assert (compact.retention_ms, compact.retention_bytes) == (-1, -1)
    assert logs.effective({"cleanup.policy": "compact"})["cleanup.policy"] == "compact"
    both = logs.log_config({"cleanup.policy": "compact,delete"})
    assert (both.retention_ms, both.retention_bytes) == (3_600_000, 10_000)
