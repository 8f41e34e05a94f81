"""The logs of one log directory and its checkpoint files (Kafka's LogManager, one log dir).

`LogManager.open` reads `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint` and
`replication-offset-checkpoint` (HW) and opens every `<topic>-<partition>` directory with those
values, so recovery rescans only what lies past each recovery point. `checkpoint()` writes all
three atomically (checkpoint.write_atomically). Kafka writes them on timers
(log.flush.offset.checkpoint.interval.ms, replica.high.watermark.checkpoint.interval.ms); here the
driver calls `checkpoint()` when it wants, and every log calls it after a truncation (its
`on_truncated` hook, however the truncation was asked for): a recovery point left on disk above
a truncation would let a later crash trust rewritten batches without validating them (Kafka's
LogManager.truncateTo checkpoints too).
"""

from __future__ import annotations

import structlog

from partition.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    read_offsets,
    write_offsets,
)
from partition.log.config import LogConfig
from partition.log.log import PartitionLog, partition_dir_name
from partition.log.storage import Storage


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`orders-3` -> ("orders", 3); None for anything else."""
    topic, dash, number = name.rpartition("-")
    if not dash or not topic or not number.isdigit():
        return None
    return topic, int(number)


class LogManager:
    """Every partition log under `log_dir`, opened and recovered together."""

    def __init__(self, storage: Storage, log_dir: str, config: LogConfig) -> None:
        self.storage = storage
        self.log_dir = log_dir
        self.config = config
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self._recovery_points: dict[tuple[str, int], int] = {}
        self._log_starts: dict[tuple[str, int], int] = {}
        self._high_watermarks: dict[tuple[str, int], int] = {}

    @classmethod
    def open(cls, storage: Storage, log_dir: str, config: LogConfig | None = None,
             configs: dict[tuple[str, int], LogConfig] | None = None) -> LogManager:  # fmt: skip
        """Open the log dir, recovering every partition found in it."""
        manager = cls(storage, log_dir, config or LogConfig())
        storage.make_dirs(log_dir)
        manager._recovery_points = read_offsets(storage, f"{log_dir}/{RECOVERY_POINT_CHECKPOINT}")
        manager._log_starts = read_offsets(storage, f"{log_dir}/{LOG_START_OFFSET_CHECKPOINT}")
        manager._high_watermarks = read_offsets(storage, f"{log_dir}/{REPLICATION_CHECKPOINT}")
        for name in storage.list_dir(log_dir):
            tp = parse_partition_dir(name)
            if tp is not None:
                manager.get_or_create(tp[0], tp[1], (configs or {}).get(tp))
        return manager

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        key = (topic, partition)
        log = self.logs.get(key)
        if log is None:
            created = not self.storage.exists(f"{self.log_dir}/{partition_dir_name(topic, partition)}")
            log = PartitionLog.open(
                self.storage, self.log_dir, topic, partition, config or self.config,
                recovery_point=self._recovery_points.get(key, 0),
                log_start_offset=self._log_starts.get(key, 0),
                high_watermark=self._high_watermarks.get(key, 0),
            )
            log.on_truncated = self.checkpoint
            self.logs[key] = log
            if created:
                self.storage.fsync_dir(self.log_dir)
            structlog.get_logger().debug("log.opened", topic=topic, partition=partition,
                                         log_end_offset=log.log_end_offset)  # fmt: skip
        return log

    def truncate_to(self, topic: str, partition: int, offset: int) -> int:
        """Truncate one log (its `on_truncated` hook writes the checkpoints)."""
        return self.logs[(topic, partition)].truncate_to(offset)

    def checkpoint(self) -> None:
        """Write the three per-dir checkpoint files from the logs' current values."""
        write_offsets(self.storage, f"{self.log_dir}/{RECOVERY_POINT_CHECKPOINT}",
                      {k: log.recovery_point for k, log in self.logs.items()})  # fmt: skip
        write_offsets(self.storage, f"{self.log_dir}/{LOG_START_OFFSET_CHECKPOINT}",
                      {k: log.log_start_offset for k, log in self.logs.items()})  # fmt: skip
        write_offsets(self.storage, f"{self.log_dir}/{REPLICATION_CHECKPOINT}",
                      {k: log.high_watermark for k, log in self.logs.items()})  # fmt: skip

    def flush_all(self) -> None:
        for log in self.logs.values():
            log.flush()
        self.checkpoint()

    def close(self) -> None:
        """Clean shutdown: flush every log, write the checkpoints, close the files."""
        self.flush_all()
        for log in self.logs.values():
            log.close()
