"""How a data partition's RecordBatch v2 log is a Raft log: the mapping between Kafka batches and
quorum.raft.log.Entry values, one Entry per offset.

RaftCore counts one Entry per offset (dense offsets, `first + i`), while a Kafka batch holds
`last_offset_delta + 1` offsets. So a batch travels through the core as one *head* entry, whose
`data` is the whole batch, followed by `last_offset_delta` *continuation* entries with empty data:

    batch at offsets 10..12, epoch 4      Entry(10, 4, <the batch bytes>)
                                          Entry(11, 4, b"")
                                          Entry(12, 4, b"")

Raft offsets are therefore Kafka offsets, the Raft high watermark is the partition's HW, and the
partitionLeaderEpoch of every batch is the Raft epoch it was appended in (KIP-101 and KIP-320 keep
working for consumers). The head's bytes are patched with (base offset, epoch) when the batch is
written (`rb.patch`, outside the CRC's range), never re-encoded.

Control entries, which the core writes itself (the LeaderChange record opening every epoch, and
the idle no-op if enabled), are one-offset Kafka *control* batches: one record, key = version 0 /
type 2 (LeaderChange, KRaft's ControlRecordType), value = the Raft record's codec bytes. That
record is the new leader's epoch marker (Raft's no-op entry): consumers skip control batches, as
they skip KRaft's and the quorum mode's.

Invariants (checked: ValueError names the offending offset):
- a produced batch is at least 61 bytes, so empty data marks a continuation unambiguously;
- entries written start with a head (or a control entry) and end on a batch's last offset: a
  batch is never split across appends, so a log never ends inside a batch, every truncation point
  (an epoch boundary) is a batch boundary, and a follower's fetch offset always starts a batch;
- a read from inside a batch (RaftCore does that only to learn the epoch of the entry below an
  offset) yields that batch's remaining continuation entries, which are never written anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

from partition.log import batch as rb
from partition.replica.quorum_mode import EPOCH_MARKER_KEY
from quorum.raft.log import Entry

__all__ = [
    "CONTROL_RECORD_KEY",
    "batches_to_entries",
    "control_batch",
    "entries_to_batches",
    "proposal",
]

# Version 0, type 2 (LeaderChange): the key of every control record the Raft core writes.
CONTROL_RECORD_KEY = EPOCH_MARKER_KEY


def proposal(records: bytes, headers: Sequence[rb.BatchHeader]) -> list[bytes]:
    """The `records` argument of RaftCore.propose for validated producer batches: per batch its
    bytes, then one empty continuation per further offset."""
    out: list[bytes] = []
    for h in headers:
        out.append(records[h.position : h.position + h.size])
        out.extend([b""] * h.last_offset_delta)
    return out


def control_batch(entry: Entry) -> bytes:
    """The one-record Kafka control batch that stores a Raft control entry."""
    record = rb.Record(entry.data, CONTROL_RECORD_KEY, timestamp_ms=-1)
    return rb.encode_batch(
        [record], base_offset=entry.offset, partition_leader_epoch=entry.epoch, is_control=True
    )


def entries_to_batches(entries: Sequence[Entry]) -> bytes:
    """The Kafka batch bytes for `entries` (whole batches, see the module docstring), each head
    patched with its entry's offset and epoch."""
    out: list[bytes] = []
    i = 0
    while i < len(entries):
        head = entries[i]
        if head.control:
            out.append(control_batch(head))
            i += 1
            continue
        if not head.data:
            raise ValueError(f"entry {head.offset} continues a batch whose head is not here")
        header = rb.read_header(head.data)
        if header.size != len(head.data) or header.is_control:
            raise ValueError(f"entry {head.offset} is not one data batch")
        last = i + header.last_offset_delta
        if last >= len(entries):
            raise ValueError(f"batch at {head.offset} ends past the entries given")
        for k in range(i + 1, last + 1):
            e = entries[k]
            if e.data or e.control or e.epoch != head.epoch or e.offset != head.offset + k - i:
                raise ValueError(f"entry {e.offset} does not continue the batch at {head.offset}")
        patched = bytearray(head.data)
        rb.patch(patched, 0, head.offset, head.epoch)
        out.append(bytes(patched))
        i = last + 1
    return b"".join(out)


def batches_to_entries(data: bytes, start_offset: int) -> list[Entry]:
    """Entries of the whole batches in `data` from `start_offset` on; a batch that starts below
    `start_offset` contributes only its continuation entries from there."""
    entries: list[Entry] = []
    for h in rb.iter_headers(data, check_crc=False):
        epoch = h.partition_leader_epoch
        if h.is_control:
            if h.last_offset_delta != 0:
                raise ValueError(f"control batch at {h.base_offset} spans several offsets")
            if h.base_offset >= start_offset:
                (record,) = rb.decode_records(data, h)
                entries.append(Entry(h.base_offset, epoch, record.value or b"", control=True))
            continue
        if h.base_offset >= start_offset:
            entries.append(Entry(h.base_offset, epoch, data[h.position : h.position + h.size]))
        first = max(h.base_offset + 1, start_offset)
        entries.extend(Entry(o, epoch, b"") for o in range(first, h.last_offset + 1))
    return entries
