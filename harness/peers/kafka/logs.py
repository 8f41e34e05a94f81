"""An Apache Kafka broker's partition logs as its log directory holds them: the records of a
replica, read from its segment files, and the high watermarks the broker checkpointed.

What Kafka writes (storage/src/main/java/org/apache/kafka/storage/internals/log/LogSegment.java,
UnifiedLog.java; LocalLog.java names the files):
- a replica of topic-partition lives in `<log.dirs>/<topic>-<partition>/`; each segment is
  `<base offset, 20 digits>.log`, a plain sequence of RecordBatch v2 (the bytes a producer
  sends, offsets assigned by the leader; KIP-98's format), read here with kafka-python's
  `MemoryRecords`. Files with other suffixes (`.index`, `.timeindex`, `.snapshot`, and
  `.deleted`/`.cleaned`/`.swap` of segments being replaced) are not records;
- `replication-offset-checkpoint` in the log directory (CheckpointFile: a version line `0`, a
  count, then `topic partition offset` lines) holds each replica's high watermark as of the last
  checkpoint, every `replica.high.watermark.checkpoint.interval.ms` (5 s by default) and at a
  controlled shutdown. A checkpointed high watermark is a lower bound of the replica's high
  watermark at any later time, except after the replica truncated below it (then it is
  capped at the replica's log end here).

A segment read while the broker appends may end in a batch being written: the read stops at the
first batch that is incomplete or fails its CRC (the same rule Kafka's recovery applies to a torn
tail, LogSegment.recover), so what is returned is always whole batches.

Invariants: reading never writes into the log directory; a missing directory or file reads as
an empty replica or no checkpoint, never an error.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from kafka.errors import KafkaError
from kafka.record import MemoryRecords

HW_CHECKPOINT = "replication-offset-checkpoint"
SEGMENT_SUFFIX = ".log"


@dataclass(frozen=True, slots=True)
class PartitionLog:
    """One replica's records as (offset, value) with its log end offset (the next offset)."""

    records: list[tuple[int, str | None]]
    log_end_offset: int
    leader_epochs: tuple[int, ...]  # the distinct leader epochs of its batches, in log order


def _value(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="backslashreplace")


def read_partition(log_dir: Path, topic: str, partition: int) -> PartitionLog:
    """The whole replica of topic-partition in `log_dir` (a broker's `log.dirs` entry)."""
    folder = log_dir / f"{topic}-{partition}"
    segments = sorted(folder.glob(f"*{SEGMENT_SUFFIX}")) if folder.is_dir() else []
    records: list[tuple[int, str | None]] = []
    epochs: list[int] = []
    end = 0
    for segment in segments:
        try:
            data = segment.read_bytes()
        except FileNotFoundError:  # deleted by retention or a truncation while listed
            continue
        batches = MemoryRecords(data)
        while True:
            try:
                batch = batches.next_batch()
            except (struct.error, ValueError, KafkaError):  # garbage where a header should be
                break
            if batch is None or not batch.validate_crc():
                break
            if not epochs or epochs[-1] != batch.leader_epoch:
                epochs.append(batch.leader_epoch)
            if not batch.is_control_batch:
                records += [(r.offset, _value(r.value)) for r in batch]
            end = batch.last_offset + 1
    return PartitionLog(records, end, tuple(epochs))


def read_hw_checkpoint(log_dir: Path) -> dict[tuple[str, int], int]:
    """(topic, partition) -> checkpointed high watermark; {} if there is no checkpoint yet."""
    try:
        lines = (log_dir / HW_CHECKPOINT).read_text().split("\n")
    except FileNotFoundError:
        return {}
    if len(lines) < 2 or lines[0].strip() != "0":
        return {}
    out: dict[tuple[str, int], int] = {}
    for line in lines[2:]:
        fields = line.split()
        if len(fields) == 3:
            topic, partition, offset = fields
            out[(topic, int(partition))] = int(offset)
    return out
