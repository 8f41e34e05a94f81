"""How a RecordBatch v2 log is a Raft log: the mapping between Kafka batches and
quorum.raft.log.Entry values, in the two layouts of partition.raft.log.EntryLayout. A data
partition's log (BATCHES) holds one Entry per batch, spanning the batch's offsets, as below; the
metadata log (RECORDS) holds one Entry per record, consecutive entries of one epoch and kind
grouped into a batch (`record_batches`).

RaftCore counts offsets through each entry's span (`Entry.count`), and a Kafka batch holds
`last_offset_delta + 1` offsets, so a batch travels through the core as ONE entry whose `data`
is the whole batch and whose `count` is its number of offsets:

    batch at offsets 10..12, epoch 4      Entry(10, 4, <the batch bytes>, count=3)

Raft offsets are therefore Kafka offsets, the Raft high watermark is the partition's HW, and the
partitionLeaderEpoch of every batch is the Raft epoch it was appended in (KIP-101 and KIP-320 keep
working for consumers). The batch bytes are patched with (base offset, epoch) when the batch is
written (`rb.patch`, outside the CRC's range), never re-encoded. (An earlier mapping sent one
entry per offset, the head followed by empty continuations: per-record objects on the hot path.)

Control entries, which the core writes itself (the LeaderChange record opening every epoch, and
the idle no-op if enabled), are one-offset Kafka *control* batches: one record, key = version 0 /
type 2 (LeaderChange, KRaft's ControlRecordType), value = the Raft record's codec bytes. That
record is the new leader's epoch marker (Raft's no-op entry): consumers skip control batches, as
they skip KRaft's and the quorum mode's.

Invariants (checked: ValueError names the offending offset):
- a data entry holds exactly one whole batch, whose offsets are exactly the entry's span: a batch
  is never split, so a log never ends inside a batch, every truncation point (an epoch boundary)
  is a batch boundary, and a follower's fetch offset always starts a batch;
- a read from inside a batch (RaftCore does that only to learn the epoch of the entry below an
  offset) yields that batch's entry, which starts below the offset asked for.
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
    "record_batches",
]

MAX_BATCH_DATA_BYTES = 512 * 1024  # the RECORDS layout: data per batch, at most

# Version 0, type 2 (LeaderChange): the key of every control record the Raft core writes.
CONTROL_RECORD_KEY = EPOCH_MARKER_KEY


def proposal(records: bytes, headers: Sequence[rb.BatchHeader]) -> tuple[list[bytes], list[int]]:
    """The `records` and `counts` arguments of RaftCore.propose for validated producer batches:
    per batch its bytes, and its number of offsets."""
    return ([records[h.position : h.position + h.size] for h in headers],
            [h.last_offset_delta + 1 for h in headers])  # fmt: skip


def control_batch(entry: Entry) -> bytes:
    """The one-record Kafka control batch that stores a Raft control entry."""
    record = rb.Record(entry.data, CONTROL_RECORD_KEY, timestamp_ms=-1)
    return rb.encode_batch(
        [record], base_offset=entry.offset, partition_leader_epoch=entry.epoch, is_control=True
    )


def entries_to_batches(entries: Sequence[Entry]) -> bytes:
    """The Kafka batch bytes for `entries` (one whole batch each, see the module docstring),
    each patched with its entry's offset and epoch."""
    out: list[bytes] = []
    for e in entries:
        if e.control:
            if e.count != 1:
                raise ValueError(f"control entry {e.offset} spans {e.count} offsets")
            out.append(control_batch(e))
            continue
        if len(e.data) < rb.HEADER_SIZE:
            raise ValueError(f"entry {e.offset} is not one data batch")
        header = rb.read_header(e.data)
        if header.size != len(e.data) or header.is_control:
            raise ValueError(f"entry {e.offset} is not one data batch")
        if header.last_offset_delta + 1 != e.count:
            raise ValueError(f"entry {e.offset} spans {e.count} offsets, its batch "
                             f"{header.last_offset_delta + 1}")  # fmt: skip
        patched = bytearray(e.data)
        rb.patch(patched, 0, e.offset, e.epoch)
        out.append(bytes(patched))
    return b"".join(out)


def batches_to_entries(data: bytes) -> list[Entry]:
    """One entry per whole batch in `data` (the first may start below the offset read from)."""
    entries: list[Entry] = []
    for h in rb.iter_headers(data, check_crc=False):
        epoch = h.partition_leader_epoch
        if h.is_control:
            if h.last_offset_delta != 0:
                raise ValueError(f"control batch at {h.base_offset} spans several offsets")
            (record,) = rb.decode_records(data, h)
            entries.append(Entry(h.base_offset, epoch, record.value or b"", control=True))
            continue
        entries.append(Entry(h.base_offset, epoch, data[h.position : h.position + h.size],
                             count=h.last_offset_delta + 1))  # fmt: skip
    return entries


def record_batches(entries: Sequence[Entry]) -> list[bytes]:
    """The RECORDS layout: one RecordBatch per run of entries with the same epoch and kind, up
    to MAX_BATCH_DATA_BYTES of data each, one record per entry whose value is `Entry.data`; the
    values-only encoder, no Record per entry. Epochs must not decrease along `entries`."""
    first = entries[0]
    epoch, control = first.epoch, first.control
    datas = [e.data for e in entries]
    # Epochs never decrease (the caller checked): equal ends mean one epoch throughout.
    if entries[-1].epoch == epoch and sum(map(len, datas)) <= MAX_BATCH_DATA_BYTES and all(
        e.control == control for e in entries
    ):
        # The usual append: one proposal batch or one Fetch's records.
        return [rb.encode_values_batch(datas, base_offset=first.offset,
                                       partition_leader_epoch=epoch, is_control=control)]  # fmt: skip
    batches: list[bytes] = []
    group: list[Entry] = []
    size = 0
    for entry in [*entries, None]:
        if group and (entry is None or entry.epoch != group[0].epoch or entry.control != group[0].control
                      or size + len(entry.data) > MAX_BATCH_DATA_BYTES):  # fmt: skip
            batches.append(rb.encode_values_batch(
                [e.data for e in group], base_offset=group[0].offset,
                partition_leader_epoch=group[0].epoch, is_control=group[0].control))  # fmt: skip
            group, size = [], 0
        if entry is not None:
            group.append(entry)
            size += len(entry.data)
    return batches
