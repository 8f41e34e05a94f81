"""RaftLogStore against the quorum.raft.log contract: a rule-based test of append, read, truncate,
flush, snapshots (local and fetched), prefix deletion and crash + reopen on SimStorage, checked
against a plain list of entries; plus the on-disk layout it promises."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from harness.runtime.file_storage import FileStorage
from partition.log import batch as rb
from partition.log.config import LogConfig
from partition.log.storage import SimStorage
from partition.raft.log import RaftLogStore, SnapshotRecoveryError, snapshot_file_name
from quorum.raft.log import Entry, OffsetAndEpoch
from quorum.raft.snapshot import decode_snapshot, encode_snapshot

CFG = LogConfig(segment_bytes=400, index_interval_bytes=64)
DIR = "/meta"


@dataclass
class RaftModel:
    """`history`: every entry appended and not truncated or reset away, including the deleted
    prefix (the store keeps those epochs); `entries` is what the log still holds."""

    history: list[Entry] = field(default_factory=list)
    start: int = 0
    snapshots: list[OffsetAndEpoch] = field(default_factory=list)

    @property
    def entries(self) -> list[Entry]:
        return [e for e in self.history if e.offset >= self.start]

    @property
    def end(self) -> int:
        return self.history[-1].offset + 1 if self.history else self.start

    def epoch_at(self, offset: int) -> int:
        return next(e.epoch for e in self.history if e.offset == offset)

    def holds(self, s: OffsetAndEpoch) -> bool:
        if s.offset <= self.start:
            return s.offset <= self.end
        return s.offset <= self.end and self.epoch_at(s.offset - 1) == s.epoch

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        known = [e for e in self.history if e.epoch <= epoch]
        if known:
            found = known[-1].epoch
            nxt = next((e.offset for e in self.history if e.epoch > found), self.end)
            return OffsetAndEpoch(nxt, found)
        first = self.history[0].offset if self.history else self.end
        at = [s for s in sorted(self.snapshots) if s.offset == first and s.epoch <= epoch]
        return OffsetAndEpoch(first, at[-1].epoch) if at else OffsetAndEpoch(-1, -1)


class RaftLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sim = SimStorage()
        self.store = RaftLogStore.open(self.sim, DIR, CFG)
        self.model = RaftModel()
        self.durable = RaftModel()
        self.epoch = 1

    def _sync_durable(self) -> None:
        self.durable = RaftModel(list(self.model.history), self.model.start, list(self.model.snapshots))

    @rule(n=st.integers(1, 6), bump=st.booleans(), control=st.booleans(), size=st.integers(0, 40))
    def append(self, n: int, bump: bool, control: bool, size: int) -> None:
        self.epoch += bump
        start = self.model.end
        entries = [Entry(start + i, self.epoch, bytes([i % 251]) * size, control and i == 0) for i in range(n)]
        before = (list(self.model.history), self.model.start)
        segments = len(self.store.log.segments)
        self.store.append(entries)
        self.model.history += entries
        if len(self.store.log.segments) != segments:  # a roll flushed what came before
            self.durable = RaftModel(before[0], before[1], list(self.model.snapshots))

    @rule()
    def flush(self) -> None:
        self.store.flush()
        self._sync_durable()

    @precondition(lambda self: self.model.end > self.model.start)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.model.start, self.model.end))
        self.store.truncate_to(offset)
        if offset < self.model.end:
            self.model.history = [e for e in self.model.history if e.offset < offset]
            self._sync_durable()  # truncation is flushed at once

    @rule(data=st.data(), max_bytes=st.integers(0, 200))
    def read(self, data: st.DataObject, max_bytes: int) -> None:
        offset = data.draw(st.integers(self.model.start, self.model.end))
        want = [e for e in self.model.entries if e.offset >= offset]
        # The same answer rules whether the in-memory tail or the files answer it.
        for got in (self.store.read(offset, max_bytes), self.store.read_from_log(offset, max_bytes)):
            assert got == want[: len(got)]
            if want:
                assert got  # at least one entry
                assert len(got) == 1 or sum(len(e.data) for e in got) <= max_bytes

    @precondition(lambda self: self.model.end > self.model.start)
    @rule(data=st.data(), delete=st.booleans())
    def snapshot(self, data: st.DataObject, delete: bool) -> None:
        offset = data.draw(st.integers(self.model.start + 1, self.model.end))
        snap = OffsetAndEpoch(offset, self.model.epoch_at(offset - 1))
        self.store.write_snapshot(snap, b"state@%d" % offset)
        if snap not in self.model.snapshots:
            self.model.snapshots.append(snap)
        if delete:
            self.store.delete_before(offset)
            if offset > self.model.start:
                self.model.start = offset
                self._sync_durable()  # delete_before flushes
            self.model.snapshots = [s for s in self.model.snapshots if s.offset >= self._kept_floor()]
        self.durable.snapshots = list(self.model.snapshots)

    def _kept_floor(self) -> int:
        at_or_below = [s.offset for s in self.model.snapshots if s.offset <= self.model.start]
        return max(at_or_below) if at_or_below else 0

    @rule(ahead=st.integers(0, 30), epoch_bump=st.integers(0, 2), chunks=st.integers(1, 3))
    def install_fetched_snapshot(self, ahead: int, epoch_bump: int, chunks: int) -> None:
        offset = self.model.end + ahead
        epoch = self.epoch + epoch_bump
        if ahead == 0 and self.model.end > self.model.start:
            epoch = self.model.epoch_at(offset - 1) + epoch_bump  # a bump: diverged, reset
        elif ahead == 0:  # at the log start the epoch is known: a consistent snapshot only
            epoch = self.store.last_epoch()
        snap = OffsetAndEpoch(offset, epoch)
        if snap in self.model.snapshots:
            return
        payload = b"fetched@%d" % offset
        position = 0
        for i in range(chunks):
            part = payload[i * len(payload) // chunks : (i + 1) * len(payload) // chunks]
            self.store.write_snapshot_chunk(snap, position, part)
            position += len(part)
        self.store.complete_snapshot(snap)
        self.model.snapshots.append(snap)
        if not self.model.holds(snap):
            self.model.history, self.model.start = [], offset
            self._sync_durable()
        self.durable.snapshots = list(self.model.snapshots)
        self.epoch = max(self.epoch, epoch)
        assert self.store.read_snapshot(snap, 0, 1000) == payload
        assert self.store.snapshot_size(snap) == len(payload)

    @rule()
    def crash_and_reopen(self) -> None:
        self.sim.crash()
        self.store = RaftLogStore.open(self.sim, DIR, CFG)
        self.model = RaftModel(list(self.durable.history), self.durable.start, list(self.durable.snapshots))
        latest = max(self.model.snapshots) if self.model.snapshots else None
        if latest is not None and not self.model.holds(latest):
            self.model.history, self.model.start = [], latest.offset
        assert self.model.start == self.store.start_offset
        self._sync_durable()

    @rule(seed=st.integers(0, 2**32 - 1))
    def torn_crash_and_reopen(self, seed: int) -> None:
        """Unflushed appends survive in part, torn anywhere: the log comes back between the last
        flush and what was appended, holding exactly the entries appended there."""
        self.sim.crash(random.Random(seed))
        self.store = RaftLogStore.open(self.sim, DIR, CFG)
        latest = max(self.model.snapshots) if self.model.snapshots else None
        if self.store.start_offset > self.model.start:  # the log lost what backs the snapshot
            assert latest is not None and self.store.start_offset == latest.offset == self.store.end_offset
            self.model.history, self.model.start = [], latest.offset
        else:
            end = self.store.end_offset
            assert self.durable.end <= end <= self.model.end
            self.model.history = [e for e in self.model.history if e.offset < end]
            assert latest is None or self.model.holds(latest)
        self._sync_durable()

    @invariant()
    def matches_model(self) -> None:
        s, m = self.store, self.model
        assert (s.start_offset, s.end_offset) == (m.start, m.end)
        assert s.latest_snapshot() == (max(m.snapshots) if m.snapshots else None)
        if m.entries:
            assert s.last_epoch() == m.entries[-1].epoch
        else:
            assert s.last_epoch() == (max(m.snapshots).epoch if m.snapshots else 0)
        for epoch in range(0, self.epoch + 3):
            assert s.end_offset_for_epoch(epoch) == m.end_offset_for_epoch(epoch), epoch
        assert s.read(m.start, 1 << 20) == m.entries
        assert s.read_from_log(m.start, 1 << 20) == m.entries


RaftLogMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestRaftLogMachine = RaftLogMachine.TestCase


def test_layout_and_batching(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = RaftLogStore.open(FileStorage(str(tmp_path)), "meta")
    store.append([Entry(0, 1, b"", control=True), Entry(1, 1, b"a"), Entry(2, 1, b"b"), Entry(3, 2, b"c")])
    store.flush()
    store.write_snapshot(OffsetAndEpoch(3, 1), b"snap")
    part = tmp_path / "meta" / "__cluster_metadata-0"
    names = sorted(p.name for p in part.iterdir())
    assert "00000000000000000000.log" in names and "leader-epoch-checkpoint" in names
    assert snapshot_file_name(OffsetAndEpoch(3, 1)) == "00000000000000000003-0000000001.checkpoint" in names
    raw = (part / "00000000000000000000.log").read_bytes()
    size = store.log.segments[0].size
    # Zero-filled preallocation (LogConfig.preallocate): the batches, then zeros until close.
    data, tail = raw[:size], raw[size:]
    assert tail and tail == bytes(len(tail))
    headers = list(rb.iter_headers(data))
    assert [(h.base_offset, h.record_count, h.partition_leader_epoch, h.is_control) for h in headers] == [
        (0, 1, 1, True), (1, 2, 1, False), (3, 1, 2, False)]
    assert [r.value for r in rb.decode_records(data, headers[1])] == [b"a", b"b"]
    assert (tmp_path / "meta" / "recovery-point-offset-checkpoint").exists()
    store.close()
    assert (part / "00000000000000000000.log").read_bytes() == data  # a clean close cuts the zeros


def test_contract_errors() -> None:
    store = RaftLogStore.open(SimStorage(), DIR)
    store.append([Entry(0, 2, b"x")])
    with pytest.raises(ValueError):
        store.append([Entry(5, 2, b"gap")])
    with pytest.raises(ValueError):
        store.append([Entry(1, 1, b"older epoch")])
    with pytest.raises(ValueError):
        store.read(2, 100)
    with pytest.raises(ValueError):
        store.write_snapshot_chunk(OffsetAndEpoch(9, 2), 4, b"not at the end")
    store.truncate_to(0)
    assert store.end_offset == 0 and store.last_epoch() == 0


def test_truncate_inside_a_batch_keeps_the_entries_before() -> None:
    sim = SimStorage()
    store = RaftLogStore.open(sim, DIR)
    store.append([Entry(i, 3, b"e%d" % i) for i in range(6)])  # one batch
    store.truncate_to(4)
    assert [e.offset for e in store.read(0, 1000)] == [0, 1, 2, 3] and store.end_offset == 4
    sim.crash()
    store = RaftLogStore.open(sim, DIR)
    assert [e.data for e in store.read(0, 1000)] == [b"e0", b"e1", b"e2", b"e3"]


def test_partial_fetch_is_discarded_on_reopen() -> None:
    sim = SimStorage()
    store = RaftLogStore.open(sim, DIR)
    store.append([Entry(0, 1, b"x")])
    store.flush()
    store.write_snapshot_chunk(OffsetAndEpoch(10, 2), 0, b"half")
    sim.crash()
    store = RaftLogStore.open(sim, DIR)
    assert store.latest_snapshot() is None and store.end_offset == 1
    assert not any(n.endswith(".part") for n in sim.list_dir(store.directory))


def test_epoch_end_stays_exact_after_a_prefix_deletion_between_snapshots() -> None:
    """harness/sim's "snapshot-epoch-end-misreported": epochs 3 [0, 5), 4 [5, 8), 5 [8, 12);
    snapshots at 4 (epoch 3) and 10 (epoch 5); the prefix is deleted below 6, not at a snapshot.
    Epoch 3 ended at 5, not at the log start: a fetcher at epoch 3 must truncate to 5."""
    sim = SimStorage()
    store = RaftLogStore.open(sim, DIR)
    epochs = [3] * 5 + [4] * 3 + [5] * 4
    store.append([Entry(i, e, b"x") for i, e in enumerate(epochs)])
    store.flush()
    store.write_snapshot(OffsetAndEpoch(4, 3), b"s4")
    store.write_snapshot(OffsetAndEpoch(10, 5), b"s10")
    store.log.delete_prefix(6, check_high_watermark=False)  # what delete_before does, not at a snapshot
    for reopened in (False, True):
        if reopened:
            store.flush()
            store.checkpoint()
            sim.crash()
            store = RaftLogStore.open(sim, DIR)
        assert store.start_offset == 6
        assert store.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
        assert store.end_offset_for_epoch(4) == OffsetAndEpoch(8, 4)
        assert store.end_offset_for_epoch(2) == OffsetAndEpoch(-1, -1)
        assert store.end_offset_for_epoch(9) == OffsetAndEpoch(12, 5)


def test_a_flush_costs_one_fsync_when_no_index_entry_was_added() -> None:
    sim = SimStorage()
    store = RaftLogStore.open(sim, DIR)
    store.append([Entry(0, 1, b"x")])
    store.flush()
    before = sim.fsync_count
    for i in range(1, 11):  # ~80 bytes each: no index entry before 4096 bytes
        store.append([Entry(i, 1, b"y" * 10)])
        store.flush()
    assert sim.fsync_count - before == 10


@pytest.mark.parametrize("seed", [None, 3, 4])
def test_crash_at_every_step_of_a_mid_batch_truncation_keeps_the_entries_below(seed: int | None) -> None:
    """A follower whose epoch ran past the leader's truncates inside a batch: a crash at any
    step leaves the old log or the truncated one, never less (the redo record)."""
    import random

    from tests.log.crashpoints import CrashAt, Crashed, _File

    old = [Entry(i, 2, b"e%d" % i) for i in range(8)]  # one batch [0, 8)
    step = 0
    while True:
        sim = SimStorage()
        store = RaftLogStore.open(sim, DIR)
        store.append(old)
        store.flush()
        wrapped = CrashAt(sim, step)
        store.storage = wrapped  # type: ignore[assignment]
        store.log.storage = wrapped  # type: ignore[assignment]
        for segment in store.log.segments:
            segment.storage = wrapped  # type: ignore[assignment]
            segment.file = _File(wrapped, segment.file)
            segment.offset_index._storage = wrapped  # type: ignore[assignment]
            segment.time_index._storage = wrapped  # type: ignore[assignment]
        store.log.epoch_cache._storage = wrapped  # type: ignore[assignment]
        store.manager.storage = wrapped  # type: ignore[assignment]
        try:
            store.truncate_to(5)
            finished = True
        except Crashed:
            finished = False
        sim.crash(random.Random(seed) if seed is not None else None)
        got = RaftLogStore.open(sim, DIR).read(0, 1 << 20)
        assert got in (old, old[:5]), (step, got)
        if finished:
            assert got == old[:5]
            break
        step += 1
    assert step > 5  # the truncation really went through several durable steps


def _flip_a_bit(sim: SimStorage, path: str) -> None:
    handle = sim.open(path, create=False)
    try:
        data = bytearray(handle.read(0, handle.size()))
        data[len(data) // 2] ^= 0x01
        handle.truncate(0)
        handle.append(bytes(data))
        handle.fsync()
    finally:
        handle.close()


def test_a_corrupt_newest_snapshot_falls_back_to_the_older_one_when_the_log_has_the_rest() -> None:
    """The envelope's checksum catches a flipped bit; the log still holds [4, 10), so the state
    is rebuilt from the snapshot at 4 and the log: the corrupt file is set aside, nothing lost."""
    sim = SimStorage()
    store = RaftLogStore.open(sim, DIR, validate=decode_snapshot)
    store.append([Entry(i, 1, b"e%d" % i) for i in range(12)])
    store.flush()
    older, newer = OffsetAndEpoch(4, 1), OffsetAndEpoch(10, 1)
    store.write_snapshot(older, encode_snapshot(None, b"state@4"))
    store.write_snapshot(newer, encode_snapshot(None, b"state@10"))
    store.delete_before(4)
    _flip_a_bit(sim, f"{store.directory}/{snapshot_file_name(newer)}")
    sim.crash()
    store = RaftLogStore.open(sim, DIR, validate=decode_snapshot)
    assert store.latest_snapshot() == older
    assert [s for s, _ in store.dropped_snapshots] == [newer]
    assert "checksum mismatch" in store.dropped_snapshots[0][1]
    assert (store.start_offset, store.end_offset) == (4, 12)
    assert decode_snapshot(store.read_snapshot_bytes(older)).payload == b"state@4"
    names = sim.list_dir(store.directory)
    assert snapshot_file_name(newer) + ".corrupt" in names
    assert snapshot_file_name(newer) not in names


def test_a_corrupt_snapshot_the_log_cannot_replace_is_refused_and_left_alone() -> None:
    sim = SimStorage()
    store = RaftLogStore.open(sim, DIR, validate=decode_snapshot)
    store.append([Entry(i, 1, b"e%d" % i) for i in range(12)])
    store.flush()
    snap = OffsetAndEpoch(10, 1)
    store.write_snapshot(snap, encode_snapshot(None, b"state@10"))
    store.delete_before(10)
    path = f"{store.directory}/{snapshot_file_name(snap)}"
    handle = sim.open(path, create=False)
    size = handle.size()
    handle.truncate(size - 3)  # torn: the tail is missing
    handle.fsync()
    handle.close()
    sim.crash()
    with pytest.raises(SnapshotRecoveryError, match="torn"):
        RaftLogStore.open(sim, DIR, validate=decode_snapshot)
    assert snapshot_file_name(snap) in sim.list_dir(f"{DIR}/__cluster_metadata-0")


def test_a_fetched_snapshot_that_is_not_intact_is_refused_before_the_log_changes() -> None:
    sim = SimStorage()
    store = RaftLogStore.open(sim, DIR, validate=decode_snapshot)
    store.append([Entry(i, 1, b"e%d" % i) for i in range(3)])
    store.flush()
    snap = OffsetAndEpoch(20, 2)
    data = bytearray(encode_snapshot(None, b"leader state"))
    data[-1] ^= 0x10  # damaged on the way
    store.write_snapshot_chunk(snap, 0, bytes(data))
    with pytest.raises(ValueError, match="checksum"):
        store.complete_snapshot(snap)
    assert store.latest_snapshot() is None
    assert (store.start_offset, store.end_offset) == (0, 3)  # the log is untouched
    assert not any(n.endswith(".part") for n in sim.list_dir(store.directory))
def test_reads_at_the_tail_come_from_memory_and_equal_the_files() -> None:
    """The newest appends answer a tail read without touching the log files; a truncation drops
    them, so a read after it never returns an entry the log no longer has."""
    sim = SimStorage()
    store = RaftLogStore.open(sim, DIR, CFG)
    entries = [Entry(i, 1, b"v%d" % i) for i in range(6)]
    store.append(entries[:3])
    store.append(entries[3:])
    got = store.read(2, 1 << 20)
    assert got == entries[2:] == store.read_from_log(2, 1 << 20)
    assert all(a is b for a, b in zip(got, entries[2:], strict=True))  # the appended objects
    assert store.read(4, 1) == [entries[4]]  # the first entry whatever its size, as the files
    store.truncate_to(4)
    got = store.read(2, 1 << 20)
    assert got == entries[2:4] == store.read_from_log(2, 1 << 20)
    assert got[0] is not entries[2]  # the tail was dropped: these come from the files
    store.append([Entry(4, 2, b"new")])
    assert store.read(3, 1 << 20) == [entries[3], Entry(4, 2, b"new")]
