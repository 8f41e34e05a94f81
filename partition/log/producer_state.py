"""Producer state for idempotence (KIP-98; Kafka's ProducerStateManager, ProducerAppendInfo).

Per producer id: the producer epoch and the metadata of its last 5 batches (first and last
sequence, first and last offset); Kafka keeps 5 because a producer has at most 5 requests in
flight (`max.in.flight.requests.per.connection` <= 5 with idempotence).

`check` decides a batch before it is appended, in Kafka's order:
1. an epoch older than the producer's current one: FENCED (INVALID_PRODUCER_EPOCH);
2. the same (first_seq, last_seq) as a retained batch: DUPLICATE, with the original offsets
   (DUPLICATE_SEQUENCE_NUMBER: the producer treats it as success and nothing is written);
3. a newer epoch must start at sequence 0, the same epoch must continue at last_seq + 1 (mod 2^31):
   else OUT_OF_ORDER (OUT_OF_ORDER_SEQUENCE_NUMBER);
4. an unknown producer id is accepted at any sequence (its state may have been removed with the
   log prefix, as in Kafka).

The state is snapshotted to `<20-digit offset>.snapshot` (state of every batch below offset), at
each segment roll and on close, atomically; on open the log loads the newest snapshot at or below
its end and replays batch headers from there. Our snapshot keeps all 5 batches per producer (Kafka's
keeps only the last), so duplicates of any of them are still caught after a restart.

Snapshot format (big-endian): version int16 (1), crc uint32 (CRC-32C of the rest), count int32,
then per producer: producer_id int64, epoch int16, n int8, n x (first_seq int32, last_seq int32,
first_offset int64, last_offset int64).
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from dataclasses import dataclass, field

from partition.log import batch as rb
from partition.log.batch import crc32c
from partition.log.checkpoint import write_atomically
from partition.log.errors import CorruptRecordError
from partition.log.storage import Storage, read_whole

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_VERSION = 1
_HEAD = struct.Struct(">hIi")
_PRODUCER = struct.Struct(">qhb")
_BATCH = struct.Struct(">iiqq")


class SequenceCheck(enum.Enum):
    OK = "OK"
    DUPLICATE = "DUPLICATE_SEQUENCE_NUMBER"
    OUT_OF_ORDER = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    FENCED = "INVALID_PRODUCER_EPOCH"


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class CheckResult:
    outcome: SequenceCheck
    duplicate_of: BatchMetadata | None = None


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else rb.NO_SEQUENCE


class ProducerState:
    """The idempotence table of one partition (in memory; snapshots via `snapshot_bytes`)."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, producer_id: int, producer_epoch: int, first_seq: int, last_seq: int) -> CheckResult:
        """Decide a batch before appending it (rules in the module docstring)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return CheckResult(SequenceCheck.OK)
        if producer_epoch < entry.producer_epoch:
            return CheckResult(SequenceCheck.FENCED)
        if producer_epoch == entry.producer_epoch:
            for meta in entry.batches:
                if meta.first_seq == first_seq and meta.last_seq == last_seq:
                    return CheckResult(SequenceCheck.DUPLICATE, meta)
            expected = (entry.last_seq + 1) % (1 << 31)
            if first_seq != expected:
                return CheckResult(SequenceCheck.OUT_OF_ORDER)
        elif first_seq != 0:
            return CheckResult(SequenceCheck.OUT_OF_ORDER)
        return CheckResult(SequenceCheck.OK)

    def update(self, header: rb.BatchHeader) -> None:
        """Record an appended batch (leader or follower; followers do not check)."""
        if not header.has_producer_id:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.producer_epoch:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_id, header.producer_epoch)
        entry.batches.append(
            BatchMetadata(header.base_sequence, header.last_sequence, header.base_offset, header.last_offset)
        )

    def clear(self) -> None:
        self.producers.clear()

    # -- snapshots -----------------------------------------------------------------------------

    def snapshot_bytes(self) -> bytes:
        body = bytearray(struct.pack(">i", len(self.producers)))
        for pid in sorted(self.producers):
            entry = self.producers[pid]
            body += _PRODUCER.pack(pid, entry.producer_epoch, len(entry.batches))
            for m in entry.batches:
                body += _BATCH.pack(m.first_seq, m.last_seq, m.first_offset, m.last_offset)
        crc = crc32c(body, 0, len(body))
        return struct.pack(">hI", _SNAPSHOT_VERSION, crc) + bytes(body)

    @classmethod
    def from_snapshot(cls, data: bytes) -> ProducerState:
        """Parse a snapshot; CorruptRecordError if torn or its CRC is wrong."""
        if len(data) < _HEAD.size:
            raise CorruptRecordError("producer snapshot too short")
        version, crc, count = _HEAD.unpack_from(data, 0)
        if version != _SNAPSHOT_VERSION or crc32c(data, 6, len(data)) != crc:
            raise CorruptRecordError("producer snapshot version or CRC mismatch")
        state = cls()
        pos = _HEAD.size
        try:
            for _ in range(count):
                pid, epoch, n = _PRODUCER.unpack_from(data, pos)
                pos += _PRODUCER.size
                entry = state.producers[pid] = ProducerEntry(pid, epoch)
                for _b in range(n):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
                    pos += _BATCH.size
        except struct.error as exc:
            raise CorruptRecordError("producer snapshot truncated") from exc
        return state


def snapshot_path(directory: str, offset: int) -> str:
    return f"{directory}/{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(storage: Storage, directory: str) -> list[int]:
    """Offsets of the snapshot files in `directory`, ascending."""
    return sorted(
        int(name[: -len(SNAPSHOT_SUFFIX)])
        for name in storage.list_dir(directory)
        if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit()
    )


def write_snapshot(storage: Storage, directory: str, offset: int, state: ProducerState) -> None:
    write_atomically(storage, snapshot_path(directory, offset), state.snapshot_bytes())


def load_snapshot(storage: Storage, directory: str, offset: int) -> ProducerState:
    return ProducerState.from_snapshot(read_whole(storage, snapshot_path(directory, offset)))
