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

Deleted topics (Kafka's LogManager.asyncDelete): `delete_log` closes the log and renames its
directory at once to `<topic>-<partition>.<unique id>-delete` (which `open` never loads as a
log), then `remove_deleted_logs(now_ms)` removes the files and the directory once
`file_delete_delay_ms` (log.segment.delete.delay.ms / file.delete.delay.ms, 60000) has passed.
A `-delete` directory found by `open` (the broker died before removing it) is scheduled again,
due `file_delete_delay_ms` after the `now_ms` given to `open`. Clocks are the caller's (`now_ms`):
the manager reads none.
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

DELETE_DIR_SUFFIX = "-delete"
FILE_DELETE_DELAY_MS = 60_000  # file.delete.delay.ms / log.segment.delete.delay.ms


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`orders-3` -> ("orders", 3); None for anything else."""
    topic, dash, number = name.rpartition("-")
    if not dash or not topic or not number.isdigit():
        return None
    return topic, int(number)


class LogManager:
    """Every partition log under `log_dir`, opened and recovered together."""

    def __init__(self, storage: Storage, log_dir: str, config: LogConfig,
                 file_delete_delay_ms: int = FILE_DELETE_DELAY_MS) -> None:  # fmt: skip
        self.storage = storage
        self.log_dir = log_dir
        self.config = config
        self.file_delete_delay_ms = file_delete_delay_ms
        # `-delete` directory name -> when its files may be removed (caller's clock, ms).
        self.pending_deletes: dict[str, int] = {}
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self._recovery_points: dict[tuple[str, int], int] = {}
        self._log_starts: dict[tuple[str, int], int] = {}
        self._high_watermarks: dict[tuple[str, int], int] = {}

    @classmethod
    def open(cls, storage: Storage, log_dir: str, config: LogConfig | None = None,
             configs: dict[tuple[str, int], LogConfig] | None = None, *, now_ms: int = 0,
             file_delete_delay_ms: int = FILE_DELETE_DELAY_MS) -> LogManager:  # fmt: skip
        """Open the log dir, recovering every partition found in it; leftover `-delete`
        directories are scheduled for removal at `now_ms + file_delete_delay_ms`."""
        manager = cls(storage, log_dir, config or LogConfig(), file_delete_delay_ms)
        storage.make_dirs(log_dir)
        manager._recovery_points = read_offsets(storage, f"{log_dir}/{RECOVERY_POINT_CHECKPOINT}")
        manager._log_starts = read_offsets(storage, f"{log_dir}/{LOG_START_OFFSET_CHECKPOINT}")
        manager._high_watermarks = read_offsets(storage, f"{log_dir}/{REPLICATION_CHECKPOINT}")
        for name in storage.list_dir(log_dir):
            if name.endswith(DELETE_DIR_SUFFIX):
                manager.pending_deletes[name] = now_ms + file_delete_delay_ms
                continue
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

    def set_config(self, topic: str, partition: int, config: LogConfig) -> None:
        """Apply a changed topic config to an open log (dynamic topic config, as Kafka's
        LogManager.updateTopicConfig): later appends roll, flush and retain by it."""
        log = self.logs.get((topic, partition))
        if log is not None and log.config != config:
            log.config = config
            structlog.get_logger().info("log.config_changed", topic=topic, partition=partition)

    def delete_log(self, topic: str, partition: int, unique_id: str, now_ms: int) -> str | None:
        """Close the log of a deleted topic and rename its directory aside at once
        (`<topic>-<partition>.<unique_id>-delete`, made durable); its files are removed by
        `remove_deleted_logs` after file_delete_delay_ms. Returns the new name (None: no log)."""
        log = self.logs.pop((topic, partition), None)
        if log is None:
            return None
        log.flush()
        log.close()
        name = f"{partition_dir_name(topic, partition)}.{unique_id}{DELETE_DIR_SUFFIX}"
        self.storage.rename(log.directory, f"{self.log_dir}/{name}")
        self.storage.fsync_dir(self.log_dir)
        self.pending_deletes[name] = now_ms + self.file_delete_delay_ms
        self.checkpoint()  # the deleted partition leaves the per-dir checkpoints
        structlog.get_logger().info("log.scheduled_for_deletion", topic=topic, partition=partition,
                                    directory=name, delay_ms=self.file_delete_delay_ms)  # fmt: skip
        return name

    def next_delete_due_ms(self) -> int | None:
        return min(self.pending_deletes.values(), default=None)

    def remove_deleted_logs(self, now_ms: int) -> list[str]:
        """Remove every `-delete` directory that is due (its files, then itself). Returns their
        names."""
        due = sorted(name for name, at in self.pending_deletes.items() if at <= now_ms)
        for name in due:
            directory = f"{self.log_dir}/{name}"
            if self.storage.exists(directory):
                for entry in self.storage.list_dir(directory):
                    self.storage.remove(f"{directory}/{entry}")
                self.storage.remove_dir(directory)
            del self.pending_deletes[name]
            structlog.get_logger().info("log.deleted", directory=name)
        if due:
            self.storage.fsync_dir(self.log_dir)
        return due

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
