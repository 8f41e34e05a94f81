"""Log configuration, with Kafka's topic-level names and defaults (kafka.log.LogConfig).

`LogConfig.from_topic_configs(configs, defaults)` is how a topic's configs reach its logs (as
Kafka's LogConfig.fromProps over the broker defaults): `defaults` is the broker-level LogConfig
(log.segment.bytes, log.retention.ms, ... from the node config, harness/runtime/log_configs.py) and
`configs` the topic's overrides by Kafka name; the broker applies the result to every hosted
partition log of the topic, at creation and on every config change (dynamic topic config).

`keep_epoch_history` is kraftlab's too (see the field). `None` for flush_messages / flush_ms means Kafka's default of Long.MAX_VALUE: never flush on a
count or a timer, leave it to the OS and rely on replication. `fsync_each_append` is kraftlab's
switch for the quorum-mode and single-replica cases (and the Raft log), where an acknowledged
append must survive power loss on this node alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1 << 30  # segment.bytes
    segment_ms: int = 7 * DAY_MS  # segment.ms
    index_interval_bytes: int = 4096  # index.interval.bytes
    retention_ms: int = 7 * DAY_MS  # retention.ms (-1: unlimited)
    retention_bytes: int = -1  # retention.bytes (-1: unlimited)
    flush_messages: int | None = None  # flush.messages
    flush_ms: int | None = None  # flush.ms
    # max.message.bytes: the largest batch a producer may append (Kafka checks it on leader
    # appends only; replication never refuses what a leader accepted). None: no limit (the Raft
    # log; the replica core answers MESSAGE_TOO_LARGE before the log sees the batch).
    max_message_bytes: int | None = None
    fsync_each_append: bool = False
    # Keep leader epochs that started below the log start instead of moving the first one up to
    # it (Kafka's truncateFromStart). The Raft log sets it: its prefix is deleted below a snapshot
    # but not always at one, and the diverging-epoch answer must stay exact there.
    keep_epoch_history: bool = False
    # Kafka's log.preallocate (topic config `preallocate`), done so that an fsync per append need
    # not write the inode: segment files are filled with zeros ahead of their end, a chunk at a
    # time (storage.py, zero_fill), trimmed on roll and close; recovery stops at the zero tail a
    # crash leaves. For logs that fsync small appends: the Raft log sets it. A data log taking
    # large produce throughput would write every byte twice (docs/storage.md, "Preallocation").
    preallocate: bool = False

    def __post_init__(self) -> None:
        if self.segment_bytes < 14:  # Kafka's lower bound: room for one empty batch's overhead
            raise ValueError(f"segment.bytes must be >= 14, got {self.segment_bytes}")
        if self.segment_bytes > _INT32_MAX:  # Kafka's INT; index positions are 32-bit (">ii")
            raise ValueError(f"segment.bytes must be <= {_INT32_MAX}, got {self.segment_bytes}")
        if self.index_interval_bytes < 0:
            raise ValueError("index.interval.bytes must be >= 0")
        if self.flush_messages is not None and self.flush_messages < 1:
            raise ValueError("flush.messages must be >= 1")
        if self.segment_ms < 1:
            raise ValueError(f"segment.ms must be >= 1, got {self.segment_ms}")
        if self.flush_ms is not None and self.flush_ms < 0:
            raise ValueError("flush.ms must be >= 0")

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str], defaults: LogConfig | None = None) -> LogConfig:
        """`defaults` (the broker-level config) with the log keys of `configs` (a topic's
        overrides, Kafka names, string values as in ConfigRecord) applied. Long.MAX_VALUE for
        flush.messages / flush.ms means never (None). ValueError names a bad key."""
        config = defaults or cls()
        changes: dict[str, Any] = {}
        for name, value in configs.items():
            field_name = _TOPIC_KEYS.get(name)
            if field_name is None:
                if name == "cleanup.policy" and value != "delete":
                    raise ValueError(f"cleanup.policy={value!r}: only 'delete' is supported")
                continue  # not a log config (min.insync.replicas, replication.mode, ...)
            try:
                number = int(value)
            except ValueError:
                raise ValueError(f"{name} must be an integer, got {value!r}") from None
            unset = field_name in ("flush_messages", "flush_ms") and number >= _LONG_MAX
            changes[field_name] = None if unset else number
        return replace(config, **changes) if changes else config


_LONG_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1
# Kafka topic config name -> LogConfig field.
_TOPIC_KEYS: Mapping[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "max.message.bytes": "max_message_bytes",
}
