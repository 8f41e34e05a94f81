"""Zero-filled preallocation (`zero_fill` files, `LogConfig.preallocate`, Kafka's log.preallocate):
zeros written ahead of a segment's end so the fsync per append is an fdatasync; size and reads
never include them; roll and close cut them; a crash leaves them, and recovery takes the first
position where no valid batch starts as the end, without counting the zeros as lost bytes."""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from harness.runtime import file_storage as storage_module
from harness.runtime.file_storage import ZERO_FILL_CHUNK_BYTES, FileStorage
from partition.log import batch as rb
from partition.log.config import LogConfig
from partition.log.log import PartitionLog
from partition.log.storage import SimStorage, read_whole

CFG = LogConfig(segment_bytes=4000, index_interval_bytes=100, preallocate=True)
SEG0 = "d/t-0/00000000000000000000.log"


def batch(i: int) -> bytes:
    return rb.encode_batch([rb.Record(b"v%d" % i, timestamp_ms=1000 + i)])


def values(log: PartitionLog) -> list[bytes]:
    """Every record's value, read through the log (segment by segment)."""
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data, offset = log.read_slice(offset, 1 << 20)
        out += [r.value for h in rb.iter_headers(data) for r in rb.decode_records(data, h)]
    return out


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which sync each zero_fill file's `fsync` used, in order (the module's seam)."""
    calls: list[str] = []

    def fsync(fd: int) -> None:
        calls.append("fsync")
        os.fsync(fd)

    def fdatasync(fd: int) -> None:
        calls.append("fdatasync")
        os.fdatasync(fd)

    monkeypatch.setattr(storage_module, "_fsync", fsync)
    monkeypatch.setattr(storage_module, "_fdatasync", fdatasync)
    return calls


# ------------------------------------------------------------------------------- FileStorage


def test_file_size_and_reads_exclude_the_zeros_written_ahead(tmp_path) -> None:  # type: ignore[no-untyped-def]
    storage = FileStorage(str(tmp_path))
    path = f"{tmp_path}/seg.log"
    f = storage.open("seg.log", zero_fill=True)
    assert f.append(b"abc") == 0 and f.append(b"de", b"fg") == 3
    assert f.size() == 7 and f.read(0, 100) == b"abcdefg" and f.read(7, 10) == b""
    on_disk = os.stat(path).st_size
    assert on_disk >= 7 + ZERO_FILL_CHUNK_BYTES and on_disk % 4096 == 0
    with open(path, "rb") as raw:
        assert raw.read() == b"abcdefg" + bytes(on_disk - 7)
    f.truncate(f.size())  # a seal: the zero tail goes, the content stays
    assert os.stat(path).st_size == 7 and f.read(0, 100) == b"abcdefg"
    f.append(b"h")  # zero fill starts again from the end
    assert os.stat(path).st_size > 8 and f.size() == 8
    f.close()  # a clean close cuts the tail
    assert read_whole(storage, "seg.log") == b"abcdefgh" and os.stat(path).st_size == 8


def test_fdatasync_while_appends_stay_inside_durable_zeros(tmp_path, syncs) -> None:  # type: ignore[no-untyped-def]
    storage = FileStorage(str(tmp_path))
    f = storage.open("seg.log", zero_fill=True)
    record = b"r" * 1000
    f.append(record)
    f.fsync()  # the zeros just written (and the file's new size) are not durable yet
    assert syncs == ["fsync"]
    appends_per_chunk = ZERO_FILL_CHUNK_BYTES // len(record)
    for _ in range(appends_per_chunk - 1):
        f.append(record)
        f.fsync()
    assert syncs == ["fsync"] + ["fdatasync"] * (appends_per_chunk - 1)
    del syncs[:]
    while f.size() + len(record) <= os.stat(f"{tmp_path}/seg.log").st_size:
        f.append(record)
        f.fsync()
    f.append(record)  # past the zeros: another chunk, made durable by one full fsync
    f.fsync()
    f.append(record)
    f.fsync()
    assert syncs[-2:] == ["fsync", "fdatasync"] and syncs.count("fsync") == 1
    f.truncate(500)  # a real cut: the size changed, so the next sync is a full one again
    f.append(b"x")
    f.fsync()
    assert syncs[-1] == "fsync" and f.read(0, 1 << 21) == record[:500] + b"x"
    f.close()


def test_plain_files_keep_fsync_and_the_exact_size(tmp_path, syncs) -> None:  # type: ignore[no-untyped-def]
    storage = FileStorage(str(tmp_path))
    f = storage.open("seg.log", preallocate=True)  # KEEP_SIZE reservation only
    f.append(b"abc")
    f.fsync()
    assert os.stat(f"{tmp_path}/seg.log").st_size == 3 and syncs == []  # os.fsync, not the seam
    f.close()


def test_a_stale_handle_cuts_no_bytes_another_handle_appended(tmp_path) -> None:  # type: ignore[no-untyped-def]
    storage = FileStorage(str(tmp_path))
    stale = storage.open("seg.log", zero_fill=True)
    stale.append(b"old")
    fresh = storage.open("seg.log", zero_fill=True)  # sees the zeros as content until cut
    fresh.truncate(3)  # as recovery cuts at the last valid batch
    fresh.append(b"new data")
    stale.close()  # past its own end the file holds another handle's bytes: nothing is cut
    assert fresh.read(0, 100) == b"oldnew data"
    fresh.close()
    assert read_whole(storage, "seg.log") == b"oldnew data"


# -------------------------------------------------------------------------------- SimStorage


def test_sim_zero_fill_sizes_reads_and_trim() -> None:
    sim = SimStorage(zero_fill_chunk_bytes=64)
    f = sim.open("f", zero_fill=True)
    f.append(b"abc")
    assert f.size() == 3 and f.read(0, 100) == b"abc"
    plain = sim.open("f")  # another handle sees the file as it is: zeros after the content
    assert plain.size() == 3 + 64 and plain.read(0, 100) == b"abc" + bytes(64)
    f.fsync()
    sim.fsync_dir(".")
    f.append(b"de")
    sim.crash()  # unsynced append lost, synced zeros kept: a zero tail after the content
    assert read_whole(sim, "f") == b"abc" + bytes(64)
    g = sim.open("f", zero_fill=True)
    assert g.size() == 67  # after a crash the zeros are just bytes: the reader finds the end
    g.truncate(3)
    g.append(b"xyz")
    g.close()  # cuts the tail (an unsynced truncation, like any)
    assert read_whole(sim, "f") == b"abcxyz"


@given(st.lists(st.tuples(st.binary(min_size=1, max_size=90), st.booleans()), min_size=1, max_size=30),
       st.integers(0, 2**32))  # fmt: skip
@settings(max_examples=150, deadline=None)
def test_sim_crash_never_loses_synced_bytes(writes: list[tuple[bytes, bool]], seed: int) -> None:
    """Whatever a torn crash keeps, the file starts with everything fsynced, then some prefix of
    later appends (the last possibly torn), then nothing but zeros."""
    sim = SimStorage(zero_fill_chunk_bytes=50)
    f = sim.open("f", zero_fill=True)
    f.fsync()
    sim.fsync_dir(".")
    appended = synced = b""
    for data, sync in writes:
        f.append(data)
        appended += data
        if sync:
            f.fsync()
            synced = appended
    sim.crash(random.Random(seed))
    content = read_whole(sim, "f")
    assert content.startswith(synced)
    assert appended.startswith(content.rstrip(b"\0"))  # no hole, no byte out of place


# -------------------------------------------------------------------------------- recovery


def build(storage: FileStorage | SimStorage, count: int, config: LogConfig = CFG) -> PartitionLog:
    log = PartitionLog.open(storage, "d", "t", 0, config)
    for i in range(count):
        log.append_as_leader(batch(i), leader_epoch=1)
    log.flush()
    return log


def test_crash_with_a_zero_tail_recovers_exactly_the_appended_batches(tmp_path) -> None:  # type: ignore[no-untyped-def]
    storage = FileStorage(str(tmp_path))
    size = build(storage, 10).segments[-1].size  # never closed, as after kill -9: zeros stay
    path = f"{tmp_path}/{SEG0}"
    with open(path, "rb") as raw:
        content = raw.read()
    assert len(content) >= size + ZERO_FILL_CHUNK_BYTES and content[size:] == bytes(len(content) - size)
    with capture_logs() as logs:
        log = PartitionLog.open(storage, "d", "t", 0, CFG, recovery_point=0)
    assert log.log_end_offset == 10 and values(log) == [b"v%d" % i for i in range(10)]
    assert log.segments[-1].size == size == os.stat(path).st_size  # the zeros were cut
    assert [e for e in logs if e["event"] in ("log.recovery_truncated", "log.segment_dropped")] == []
    assert log.read(0, 1 << 20) == content[:size]  # nothing past the last batch
    log.append_as_leader(batch(10), 1)
    log.close()
    assert values(PartitionLog.open(storage, "d", "t", 0, CFG)) == [b"v%d" % i for i in range(11)]


def test_a_torn_batch_followed_by_zeros_is_cut_at_the_torn_batch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    storage = FileStorage(str(tmp_path))
    crashed = build(storage, 10)
    end = crashed.segments[-1].size
    torn = rb.encode_batch([rb.Record(b"torn" * 10)])[:40]
    with open(f"{tmp_path}/{SEG0}", "r+b") as raw:  # a write that reached the disk in part
        raw.seek(end)
        raw.write(torn)
    with capture_logs() as logs:
        log = PartitionLog.open(storage, "d", "t", 0, CFG, recovery_point=0)
    assert log.log_end_offset == 10 and log.segments[-1].size == end
    assert os.stat(f"{tmp_path}/{SEG0}").st_size == end
    cut = [e for e in logs if e["event"] == "log.recovery_truncated"]
    assert [e["bytes_cut"] for e in cut] == [len(torn.rstrip(b"\0"))]  # the torn bytes, not the zeros


def test_reopen_after_a_clean_close_finds_no_zero_tail(tmp_path) -> None:  # type: ignore[no-untyped-def]
    storage = FileStorage(str(tmp_path))
    log = build(storage, 5)
    size = log.segments[-1].size
    log.close()
    assert os.stat(f"{tmp_path}/{SEG0}").st_size == size
    reopened = PartitionLog.open(storage, "d", "t", 0, CFG, recovery_point=5)
    assert reopened.log_end_offset == 5 and reopened.segments[-1].size == size
    reopened.close()


def test_roll_leaves_no_zero_tail_on_a_sealed_segment(tmp_path) -> None:  # type: ignore[no-untyped-def]
    storage = FileStorage(str(tmp_path))
    log = build(storage, 120)  # 4000-byte segments: several rolls
    assert len(log.segments) > 2
    for segment in log.segments[:-1]:
        assert os.stat(f"{tmp_path}/{segment.log_path}").st_size == segment.size
    assert os.stat(f"{tmp_path}/{log.segments[-1].log_path}").st_size > log.segments[-1].size
    reopened = PartitionLog.open(storage, "d", "t", 0, CFG, recovery_point=log.recovery_point)
    assert values(reopened) == [b"v%d" % i for i in range(120)]


def test_sim_roll_makes_the_trim_durable_before_the_next_segment() -> None:
    """With an fsync per append (the Raft log), the active segment is clean when it rolls: the
    roll still fsyncs it, so its cut zero tail cannot come back under a segment that follows."""
    sim = SimStorage()
    config = LogConfig(segment_bytes=4000, index_interval_bytes=100, preallocate=True, fsync_each_append=True)
    build(sim, 120, config)
    sim.crash()  # every unsynced byte lost
    log = PartitionLog.open(sim, "d", "t", 0, config, recovery_point=120)  # sealed ones trusted
    assert len(log.segments) > 2 and log.log_end_offset == 120
    for segment in log.segments[:-1]:
        content = read_whole(sim, segment.log_path)
        assert sum(h.size for h in rb.iter_headers(content)) == len(content) == segment.size
    assert values(log) == [b"v%d" % i for i in range(120)]


@pytest.mark.parametrize("seed", range(40))
def test_sim_torn_crashes_recover_a_prefix_holding_every_flushed_batch(seed: int) -> None:
    """A seeded crash keeps any prefix of the unsynced writes (zero chunks, batches, a torn one):
    recovery ends the log at a batch boundary at or past the last flush, with the same bytes."""
    rng = random.Random(seed)
    sim = SimStorage(zero_fill_chunk_bytes=rng.choice([16, 100, 4096]))
    log = PartitionLog.open(sim, "d", "t", 0, CFG)
    flushed = 0
    for i in range(rng.randint(1, 150)):
        log.append_as_leader(batch(i), leader_epoch=1)
        if rng.random() < 0.2:
            log.flush()
            flushed = log.log_end_offset
    appended = log.log_end_offset
    sim.crash(rng)
    reopened = PartitionLog.open(sim, "d", "t", 0, CFG)
    assert flushed <= reopened.log_end_offset <= appended
    assert values(reopened) == [b"v%d" % i for i in range(reopened.log_end_offset)]
    reopened.append_as_leader(batch(reopened.log_end_offset), 1)  # and the log goes on
    assert values(reopened)[-1] == b"v%d" % (reopened.log_end_offset - 1)


def test_a_log_without_preallocate_writes_no_zeros() -> None:
    sim = SimStorage()
    log = build(sim, 3, LogConfig(segment_bytes=4000))
    assert len(read_whole(sim, SEG0)) == log.segments[-1].size
