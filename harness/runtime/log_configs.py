"""How topic configs reach a broker's data logs: Kafka's broker-level log defaults from the node
config, overlaid with each topic's overrides from the metadata image (Kafka's
LogConfig.fromProps(brokerDefaults, topicOverrides)).

Precedence per key, highest first: the topic's own config (ConfigRecord, `topic create --config`
or an AlterConfigs), the broker's synonym in its properties file (`log.segment.bytes`,
`log.roll.ms`, `log.retention.ms` else `log.retention.hours`, `log.retention.bytes`,
`log.flush.interval.messages`, `log.flush.interval.ms`, `message.max.bytes`), Kafka's default.
The replica core's topic configs (min.insync.replicas, max.message.bytes, ...) come from the same
merged map, so the core's MESSAGE_TOO_LARGE check and the log's agree.

Invariant: `TopicLogConfigs.for_topic` is a pure function of (node config, topic overrides); the
replica manager re-applies it to every hosted log of a topic whenever the image changes, so a
config change on a live topic reaches its open logs (dynamic topic config, as Kafka).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from partition.log.config import LogConfig
from quorum.metadata.configs import (
    CLEANUP_POLICY,
    COMPACT_POLICIES,
    FLUSH_MESSAGES,
    FLUSH_MS,
    MAX_MESSAGE_BYTES,
    RETENTION_BYTES,
    RETENTION_MS,
    SEGMENT_BYTES,
    SEGMENT_MS,
    effective_topic_configs,
)

if TYPE_CHECKING:
    from harness.runtime.config import NodeConfig

HOUR_MS = 3600 * 1000
RETENTION_MS_UNSET = -2  # log.retention.ms not given (Kafka: null): log.retention.hours applies


def broker_topic_defaults(config: NodeConfig) -> dict[str, str]:
    """The topic log configs' broker-level defaults, by topic config name."""
    retention_ms = config.log_retention_ms
    if retention_ms == RETENTION_MS_UNSET:
        retention_ms = config.log_retention_hours * HOUR_MS
    return {
        SEGMENT_BYTES: str(config.log_segment_bytes),
        SEGMENT_MS: str(config.log_roll_ms),
        RETENTION_MS: str(retention_ms),
        RETENTION_BYTES: str(config.log_retention_bytes),
        FLUSH_MESSAGES: str(config.log_flush_interval_messages),
        FLUSH_MS: str(config.log_flush_interval_ms),
        MAX_MESSAGE_BYTES: str(config.message_max_bytes),
    }


class TopicLogConfigs:
    """Effective topic configs and LogConfigs for one broker (cached per distinct overrides)."""

    def __init__(self, config: NodeConfig) -> None:
        self.defaults = broker_topic_defaults(config)
        self._cache: dict[tuple[tuple[str, str], ...], tuple[dict[str, str], LogConfig]] = {}

    def effective(self, overrides: Mapping[str, str]) -> dict[str, str]:
        """Kafka defaults < broker defaults < the topic's overrides."""
        return self._lookup(overrides)[0]

    def log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        return self._lookup(overrides)[1]

    def _lookup(self, overrides: Mapping[str, str]) -> tuple[dict[str, str], LogConfig]:
        key = tuple(sorted(overrides.items()))
        hit = self._cache.get(key)
        if hit is None:
            merged = effective_topic_configs({**self.defaults, **overrides})
            hit = (merged, LogConfig.from_topic_configs(_without_compaction(merged)))
            if len(self._cache) > 1024:  # bounded: topics come and go
                self._cache.clear()
            self._cache[key] = hit
        return hit


def _without_compaction(configs: dict[str, str]) -> dict[str, str]:
    """The log settings of a compacted internal topic (`__consumer_offsets`): there is no log
    cleaner, so a compact-only log is never deleted by retention (Kafka deletes by time or size
    only under `delete`); `compact,delete` keeps retention."""
    policy = configs.get(CLEANUP_POLICY, "delete")
    if policy not in COMPACT_POLICIES:
        return configs
    out = {**configs, CLEANUP_POLICY: "delete"}
    if "delete" not in policy.split(","):
        out[RETENTION_MS] = out[RETENTION_BYTES] = "-1"
    return out
