"""Log configuration, with Kafka's topic-level names and defaults (kafka.log.LogConfig).

`keep_epoch_history` is kraftlab's too (see the field). `None` for flush_messages / flush_ms means Kafka's default of Long.MAX_VALUE: never flush on a
count or a timer, leave it to the OS and rely on replication. `fsync_each_append` is kraftlab's
switch for the quorum-mode and single-replica cases (and the Raft log), where an acknowledged
append must survive power loss on this node alone.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    fsync_each_append: bool = False
    # Keep leader epochs that started below the log start instead of moving the first one up to
    # it (Kafka's truncateFromStart). The Raft log sets it: its prefix is deleted below a snapshot
    # but not always at one, and the diverging-epoch answer must stay exact there.
    keep_epoch_history: bool = False

    def __post_init__(self) -> None:
        if self.segment_bytes < 14:  # Kafka's lower bound: room for one empty batch's overhead
            raise ValueError(f"segment.bytes must be >= 14, got {self.segment_bytes}")
        if self.index_interval_bytes < 0:
            raise ValueError("index.interval.bytes must be >= 0")
        if self.flush_messages is not None and self.flush_messages < 1:
            raise ValueError("flush.messages must be >= 1")
