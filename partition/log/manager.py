"""The logs of one log directory and its checkpoint files (Kafka's LogManager, one log dir).

`LogManager.open` reads `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint` and
`replication-offset-checkpoint` (HW) and opens every `<topic>-<partition>` directory with those
values, so recovery rescans only what lies past each recovery point. `checkpoint()` writes all
three atomically (checkpoint.write_atomically). Kafka writes them on timers
(log.flush.offset.checkpoint.interval.ms, replica.high.watermark.checkpoint.interval.ms); here the
driver calls `checkpoint()` when it wants, and every log calls back after a truncation (its
`on_truncated` hook, however the truncation was asked for): a recovery point left on disk above
a truncation would let a later crash trust rewritten batches without validating them (Kafka's
LogManager.truncateTo checkpoints too). Only the recovery-point file is rewritten then, and only
when the value last written for that log is above its new end: a node truncating many logs at
once (a Raft election among many partitions) would otherwise rewrite every checkpoint of every
log once per truncated log.

Deleted topics (Kafka's LogManager.asyncDelete): `delete_log` closes the log and renames its
directory at once to `<topic>-<partition>.<unique id>-delete` (which `open` never loads as a
log), then `remove_deleted_logs(now_ms)` removes the files and the directory once
`file_delete_delay_ms` (log.segment.delete.delay.ms / file.delete.delay.ms, 60000) has passed.
A `-delete` directory found by `open` (the broker died before removing it) is scheduled again,
due `file_delete_delay_ms` after the `now_ms` given to `open`. Clocks are the caller's (`now_ms`):
the manager reads none.

Topic ids (KIP-516): `open` loads every `<topic>-<partition>` directory by name, not knowing
which topic incarnation it holds; each log's `partition.metadata` says (PartitionLog.topic_id).
When the broker hosts a partition, `get_or_create(..., topic_id=...)` compares: a directory of
another topic id is what a topic deleted and re-created under the same name (while this broker
was down, or while it hosted no replica of it) left behind. Its leader epochs, fenced epoch and
offsets belong to the old topic and would wedge the new one (an append at the new topic's epoch 0
is below the old log's latest epoch; a quorum-mode replica's fenced epoch would refuse every
partition state of the new topic), so it is renamed to `<topic>-<partition>.<old id>-delete`,
scheduled for removal like a deleted topic's log, and a fresh log is created. A directory with
no partition.metadata (an older layout) adopts the topic id it is opened with.
"""

from __future__ import annotations

import functools
import re

import structlog

from partition.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA_FILE,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    read_offsets,
    read_partition_metadata,
    write_offsets,
)
from partition.log.config import LogConfig
from partition.log.log import PartitionLog, partition_dir_name
from partition.log.storage import Storage

DELETE_DIR_SUFFIX = "-delete"
FILE_DELETE_DELAY_MS = 60_000  # file.delete.delay.ms / log.segment.delete.delay.ms
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]+")  # usable as is in a directory name


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
        self._written_recovery_points: dict[tuple[str, int], int] = {}  # on disk now
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
        manager._written_recovery_points = dict(manager._recovery_points)
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

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None, *,
                      topic_id: str | None = None, now_ms: int = 0) -> PartitionLog:  # fmt: skip
        """The log of `topic`-`partition`, opened (created if missing) on first use. With
        `topic_id` (KIP-516): a directory holding another topic id belongs to a deleted topic of
        the same name and is set aside as deleted (`_set_aside_stale`) for a fresh log; one
        holding no id (an older layout) adopts this one."""
        key = (topic, partition)
        log = self.logs.get(key)
        if log is not None and topic_id is not None and log.topic_id not in (None, topic_id):
            del self.logs[key]
            log.flush()
            log.close()
            self._set_aside_stale(topic, partition, log.topic_id, topic_id, now_ms)
            log = None
        if log is None:
            directory = f"{self.log_dir}/{partition_dir_name(topic, partition)}"
            created = not self.storage.exists(directory)
            if not created and topic_id is not None:
                stored = read_partition_metadata(self.storage, f"{directory}/{PARTITION_METADATA_FILE}")
                if stored is not None and stored != topic_id:
                    self._set_aside_stale(topic, partition, stored, topic_id, now_ms)
                    created = True
            log = PartitionLog.open(
                self.storage, self.log_dir, topic, partition, config or self.config,
                recovery_point=self._recovery_points.get(key, 0),
                log_start_offset=self._log_starts.get(key, 0),
                high_watermark=self._high_watermarks.get(key, 0), topic_id=topic_id,
            )
            log.on_truncated = functools.partial(self._truncated, key)
            self.logs[key] = log
            if created:
                self.storage.fsync_dir(self.log_dir)
            structlog.get_logger().debug("log.opened", topic=topic, partition=partition,
                                         log_end_offset=log.log_end_offset)  # fmt: skip
        elif topic_id is not None and log.topic_id is None:
            log.write_topic_id(topic_id)  # an older layout, opened at start: adopts the id
        return log

    def _set_aside_stale(self, topic: str, partition: int, stale_id: str, topic_id: str,
                         now_ms: int) -> None:  # fmt: skip
        """Rename the directory of a deleted topic's log (`stale_id`) to
        `<topic>-<partition>.<stale id>-delete`, durably, before a fresh log takes its name; its
        files go after file_delete_delay_ms (as `delete_log`). Its checkpoint entries are
        dropped: the fresh log starts at offset 0 with no HW and no recovery point."""
        key = (topic, partition)
        unique = stale_id if _SAFE_ID.fullmatch(stale_id) else stale_id.encode().hex()
        name = f"{partition_dir_name(topic, partition)}.{unique}{DELETE_DIR_SUFFIX}"
        serial = 0
        while self.storage.exists(f"{self.log_dir}/{name}"):  # never over another leftover
            serial += 1
            name = f"{partition_dir_name(topic, partition)}.{unique}.{serial}{DELETE_DIR_SUFFIX}"
        self.storage.rename(f"{self.log_dir}/{partition_dir_name(topic, partition)}",
                            f"{self.log_dir}/{name}")  # fmt: skip
        self.storage.fsync_dir(self.log_dir)
        self.pending_deletes[name] = now_ms + self.file_delete_delay_ms
        for offsets in (self._recovery_points, self._log_starts, self._high_watermarks):
            offsets.pop(key, None)
        self.checkpoint()
        structlog.get_logger().warning("log.stale_topic_id", topic=topic, partition=partition,
                                       stale_topic_id=stale_id, topic_id=topic_id, directory=name,
                                       delay_ms=self.file_delete_delay_ms)  # fmt: skip

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

    def _truncated(self, key: tuple[str, int]) -> None:
        """A log was truncated (and flushed): lower its recovery point on disk if it is above
        the new end (module docstring)."""
        log = self.logs.get(key)
        if log is not None and self._written_recovery_points.get(key, 0) > log.recovery_point:
            self._write_recovery_points()

    def _write_recovery_points(self) -> None:
        points = {k: log.recovery_point for k, log in self.logs.items()}
        write_offsets(self.storage, f"{self.log_dir}/{RECOVERY_POINT_CHECKPOINT}", points)
        self._written_recovery_points = points

    def checkpoint(self) -> None:
        """Write the three per-dir checkpoint files from the logs' current values."""
        self._write_recovery_points()
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
