"""Index durability (docs/storage.md, "Index durability"): the active segment's `.index` and
`.timeindex` are written on flush but fsynced only when the segment is sealed and on close, so a
flush of a log that fsyncs every append is one fsync. A crash may then lose or tear the last
index entries; recovery must neither lose a flushed batch nor trust an index entry the segment
does not confirm, and must end with the indexes a full rescan would build."""

from __future__ import annotations

import copy
import random
import shutil
import struct

import pytest

from harness.runtime.file_storage import FileStorage
from partition.log import batch as rb
from partition.log.config import LogConfig
from partition.log.log import PartitionLog
from partition.log.segment import LogSegment
from partition.log.storage import SimStorage, StorageFile

CFG = LogConfig(segment_bytes=3000, index_interval_bytes=100)
SEG0 = "/d/t-0/00000000000000000000"


def append(log: PartitionLog, i: int, size: int = 20) -> None:
    records = [rb.Record(f"v{i}:".encode() + b"x" * size, timestamp_ms=1000 + i)]
    log.append_as_leader(rb.encode_batch(records), leader_epoch=1)


def state(segment: LogSegment) -> tuple[object, ...]:
    """What recovery derives for a segment: indexes, timestamps, next offset (and for one that
    takes appends, what they go on from; a sealed segment opened untouched leaves those unset)."""
    common = (segment.base_offset, segment.size, segment.next_offset, segment.max_timestamp_ms,
              segment.offset_index.keys, segment.offset_index.values, segment.time_index.keys,
              segment.time_index.values)  # fmt: skip
    if segment.first_batch_max_timestamp_ms == -1 and segment._bytes_since_index == 0 and segment.size:
        return common  # opened by load_closed
    return (*common, segment.first_batch_max_timestamp_ms, segment._max_ts_relative_offset,
            segment._bytes_since_index)  # fmt: skip


def states(log: PartitionLog) -> list[tuple[object, ...]]:
    """`state` of each segment: its indexes and timestamps, the active one in full (a sealed
    segment loaded untouched does not know where appends would go on from)."""
    *sealed, active = log.segments
    return [state(s)[:8] for s in sealed] + [state(active)]


def check_lookups(log: PartitionLog) -> None:
    """Every offset is found in the batch holding it, every index entry names a batch start
    with that last offset, and each segment's max timestamp is its batches' maximum."""
    for segment in log.segments:
        headers = list(segment.iter_headers())
        starts = {h.position: h for h in headers}
        for rel, pos in zip(segment.offset_index.keys, segment.offset_index.values, strict=True):
            assert pos in starts and starts[pos].last_offset == segment.base_offset + rel
        for ts, rel in zip(segment.time_index.keys, segment.time_index.values, strict=True):
            assert max(h.max_timestamp_ms for h in headers if h.last_offset <= segment.base_offset + rel) == ts
        assert segment.max_timestamp_ms == max((h.max_timestamp_ms for h in headers), default=-1)
        for header in headers:
            for offset in range(header.base_offset, header.last_offset + 1):
                found = segment.find_position(offset)
                assert found is not None and found[0] == header.position
    for offset in range(log.log_start_offset, log.log_end_offset):
        assert log.read_records(offset, 1)[0].offset == offset


def test_a_flush_is_one_fsync_when_the_active_segments_indexes_grew() -> None:
    sim = SimStorage()
    log = PartitionLog.open(sim, "/d", "t", 0, LogConfig(index_interval_bytes=100))
    grew = 0

    def index_bytes() -> int:
        return sum(len(sim._files[p].data) for p in (f"{SEG0}.index", f"{SEG0}.timeindex") if p in sim._files)

    for i in range(60):
        append(log, i)
        before, written = sim.fsync_count, index_bytes()
        log.flush()
        assert sim.fsync_count - before == 1  # the segment file only
        grew += index_bytes() > written
    assert grew >= 10  # the index did grow on many of those flushes
    # Written, though not fsynced: the file holds every entry.
    on_disk = sim.open(f"{SEG0}.index", create=False)
    assert on_disk.size() == 8 * len(log.segments[-1].offset_index.keys)


class OpenCounter:
    """SimStorage counting the opens of each path."""

    def __init__(self, sim: SimStorage) -> None:
        self.sim = sim
        self.opens: dict[str, int] = {}

    def open(self, path: str, *, create: bool = True, preallocate: bool = False,
             zero_fill: bool = False) -> StorageFile:  # fmt: skip
        self.opens[path] = self.opens.get(path, 0) + 1
        return self.sim.open(path, create=create, preallocate=preallocate, zero_fill=zero_fill)

    def __getattr__(self, name: str) -> object:
        return getattr(self.sim, name)


def test_an_index_file_is_opened_once_while_its_segment_is_active() -> None:
    counter = OpenCounter(SimStorage())
    log = PartitionLog.open(counter, "/d", "t", 0, LogConfig(index_interval_bytes=100))  # type: ignore[arg-type]
    for i in range(60):
        append(log, i)
        log.flush()
    assert len(log.segments[-1].offset_index.keys) >= 10
    assert counter.opens[f"{SEG0}.index"] == 1
    assert counter.opens[f"{SEG0}.timeindex"] == 1


def test_a_roll_and_a_clean_close_make_the_indexes_durable() -> None:
    sim = SimStorage()
    log = PartitionLog.open(sim, "/d", "t", 0, CFG)
    for i in range(80):
        append(log, i)
        log.flush()
    assert len(log.segments) >= 2
    sealed = states(log)[:-1]
    for segment in log.segments[:-1]:  # nothing of a sealed segment's indexes waits for an fsync
        for path in (segment.offset_index.path, segment.time_index.path):
            assert sim._files[path].pending == []
    active = log.segments[-1]
    assert sim._files[active.offset_index.path].pending  # the active one's do
    log.close()
    assert all(not inode.pending for path, inode in sim._files.items() if "index" in path)
    sim.crash(None)
    reopened = PartitionLog.open(sim, "/d", "t", 0, CFG, recovery_point=log.recovery_point)
    assert states(reopened)[:-1] == sealed
    assert not set(reopened._dirty) & set(reopened.segments[:-1])  # sealed: trusted, not rescanned
    check_lookups(reopened)


@pytest.mark.parametrize("size", [20, 300])
def test_a_crash_loses_unsynced_index_entries_and_recovery_rebuilds_them(size: int) -> None:
    """Many flushes, no roll since the last ones: the active segment's index entries were written
    but not fsynced, and a crash keeps a random prefix of them (the last maybe torn). Opening
    from the recovery point keeps every flushed batch and ends with the indexes a full rescan of
    the same files builds."""
    lost_below_recovery_point = 0
    for seed in range(60):
        rng = random.Random(seed)
        sim = SimStorage()
        log = PartitionLog.open(sim, "/d", "t", 0, CFG)
        flushed = 0
        for i in range(rng.randint(20, 70)):
            append(log, i, size=rng.choice([size, 5, 60]))
            if rng.random() < 0.7:
                log.flush()
                flushed = log.log_end_offset
        active = log.segments[-1]
        in_memory = [k for k in active.offset_index.keys if k + active.base_offset < flushed]
        sim.crash(rng)
        on_disk = sim.open(active.offset_index.path).size() // 8 if sim.exists(active.offset_index.path) else 0
        lost_below_recovery_point += on_disk < len(in_memory)
        rescan = PartitionLog.open(copy.deepcopy(sim), "/d", "t", 0, CFG, recovery_point=0)
        log = PartitionLog.open(sim, "/d", "t", 0, CFG, recovery_point=flushed)
        assert flushed <= log.log_end_offset
        assert states(log) == states(rescan)
        check_lookups(log)
    assert lost_below_recovery_point >= 10  # the case this is about did happen, often


def _entries(pairs: list[tuple[int, int]], fmt: str) -> bytes:
    return b"".join(struct.pack(fmt, *p) for p in pairs)


@pytest.mark.parametrize("damage", ["short", "torn", "garbage", "zeros", "stale", "stale-time"])
def test_a_damaged_or_stale_active_index_is_not_trusted(damage: str) -> None:
    """Whatever a crash left in the active segment's index files, opening from the recovery
    point reads correctly and ends with the indexes a full rescan builds."""
    sim = SimStorage()
    log = PartitionLog.open(sim, "/d", "t", 0, LogConfig(index_interval_bytes=100))
    for i in range(50):
        append(log, i, size=5 + (i * 37) % 90)
    log.flush()
    end = log.log_end_offset
    segment = log.segments[0]
    keys, values = segment.offset_index.keys, segment.offset_index.values
    log.close()
    index, timeindex = f"{SEG0}.index", f"{SEG0}.timeindex"
    data = bytes(sim._files[index].data)
    if damage == "short":
        content = data[: 8 * (len(keys) // 2)]
    elif damage == "torn":
        content = data[:-3]
    elif damage == "garbage":
        content = random.Random(7).randbytes(len(data))
    elif damage == "zeros":
        content = bytes(len(data))
    elif damage == "stale":  # the same offsets in another layout (a truncation that was lost)
        content = _entries([(k, v + 13) for k, v in zip(keys, values, strict=True)], ">ii")
    else:  # a time index that kept fewer entries than the offset index
        content = data
        times = bytes(sim._files[timeindex].data)
        sim.cut(timeindex, 12 * max(1, len(times) // 24))
    if content != data:
        sim.cut(index, 0)
        handle = sim.open(index)
        handle.append(content)
        handle.fsync()
    rescan = PartitionLog.open(copy.deepcopy(sim), "/d", "t", 0, LogConfig(index_interval_bytes=100))
    reopened = PartitionLog.open(sim, "/d", "t", 0, LogConfig(index_interval_bytes=100), recovery_point=end)
    assert reopened.log_end_offset == end
    assert states(reopened) == states(rescan)
    check_lookups(reopened)


def test_real_files_a_kept_index_handle_survives_truncation_roll_and_reopen(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """FileStorage: the handle kept per index file sees the cut of a truncation and the seal of a
    roll; a reopen from the recovery point, with the last index entries cut off the file (what
    a crash may leave), equals a full rescan of a copy of the same files."""
    storage = FileStorage(str(tmp_path / "a"))
    log = PartitionLog.open(storage, "/d", "t", 0, CFG)
    for i in range(40):
        append(log, i)
        log.flush()
    log.truncate_to(33)
    for i in range(33, 70):
        append(log, i, size=45)
        log.flush()
    assert len(log.segments) >= 2
    end = log.log_end_offset
    index_path = tmp_path / "a" / "d" / "t-0" / log.segments[-1].offset_index.path.rsplit("/", 1)[1]
    log.close()
    entries = index_path.stat().st_size // 8
    assert entries >= 4
    with open(index_path, "r+b") as f:  # the last entries lost
        f.truncate(8 * (entries - 3))
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    rescan = PartitionLog.open(FileStorage(str(tmp_path / "b")), "/d", "t", 0, CFG)
    reopened = PartitionLog.open(storage, "/d", "t", 0, CFG, recovery_point=end)
    assert reopened.log_end_offset == rescan.log_end_offset == end
    assert states(reopened) == states(rescan)
    check_lookups(reopened)
    values = [reopened.read_records(offset, 1)[0].value for offset in range(31, 35)]
    assert values == [b"v31:" + b"x" * 20, b"v32:" + b"x" * 20, b"v33:" + b"x" * 45, b"v34:" + b"x" * 45]
    reopened.close()
    rescan.close()
