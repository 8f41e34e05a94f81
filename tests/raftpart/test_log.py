"""The data log as a Raft log (partition.raft.entries, partition.raft.log): a batch is one entry
spanning its offsets, control entries are Kafka control batches, truncation only at batch
boundaries, producer state follows the log, and the quorum-state file survives power loss."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from partition.log import LogConfig, PartitionLog, SimStorage
from partition.log import batch as rb
from partition.log.errors import CheckpointError
from partition.log.producer_state import SequenceCheck
from partition.raft.entries import CONTROL_RECORD_KEY, entries_to_batches, proposal
from partition.raft.log import QUORUM_STATE_FILE, RaftLogStore
from partition.replica.errors import InvariantViolation
from quorum.raft.effects import ElectionState
from quorum.raft.errors import RaftUsageError
from quorum.raft.log import Entry, OffsetAndEpoch
from tests.raftpart.router import batch


def open_store(storage: SimStorage | None = None) -> RaftLogStore:
    plog = PartitionLog.open(storage or SimStorage(), "/data", "events", 0, LogConfig())
    return RaftLogStore.of_partition(plog)


def entries_of(data: bytes, first: int, epoch: int) -> list[Entry]:
    """The entries RaftCore.propose makes of produced bytes at offset `first` in `epoch`."""
    records, counts = proposal(data, list(rb.iter_headers(data)))
    out = []
    for d, n in zip(records, counts, strict=True):
        out.append(Entry(first, epoch, d, count=n))
        first += n
    return out


def test_a_batch_is_one_entry_spanning_its_offsets() -> None:
    data = batch("a", "b", "c")
    assert proposal(data, list(rb.iter_headers(data))) == ([data], [3])
    store = open_store()
    store.append([Entry(0, 1, b"leader-change-record", control=True)])
    store.append(entries_of(data, 1, 1))
    assert (store.end_offset, store.last_epoch()) == (4, 1)
    got = store.read(0, 1 << 20)
    assert [(e.offset, e.last_offset, e.epoch, e.control) for e in got] == [
        (0, 0, 1, True), (1, 3, 1, False),
    ]  # fmt: skip
    assert got[0].data == b"leader-change-record"
    # On disk: Kafka batches, the head patched with its offset and epoch, CRC still valid.
    raw = store.read_batches(0, 1 << 20, max_offset=4)
    headers = [rb.validate(raw, h.position) for h in rb.iter_headers(raw)]
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch, h.is_control)
            for h in headers] == [(0, 0, 1, True), (1, 3, 1, False)]  # fmt: skip
    control = rb.decode_records(raw, headers[0])
    assert [(r.key, r.value) for r in control] == [(CONTROL_RECORD_KEY, b"leader-change-record")]
    assert [r.value for r in rb.decode_records(raw, headers[1])] == [b"a", b"b", b"c"]


def test_a_read_inside_a_batch_yields_its_entry() -> None:
    # RaftCore reads end-1 to learn the epoch of the last entry: the last offset of a batch.
    store = open_store()
    data = batch("a", "b", "c")
    store.append(entries_of(data, 0, 2))
    got = store.read(2, 1)
    assert [(e.offset, e.count, e.epoch) for e in got] == [(0, 3, 2)]
    assert rb.decode_records(got[0].data, rb.read_header(got[0].data))[2].value == b"c"
    assert store.read(3, 1) == []
    with pytest.raises(ValueError):
        store.read(4, 1)


def test_reads_return_whole_batches_within_max_bytes() -> None:
    store = open_store()
    first, second = batch("x" * 100, "y"), batch("z" * 100)
    store.append(entries_of(first, 0, 1))
    store.append(entries_of(second, 2, 1))
    one = store.read(0, 10)  # at least one whole batch, however small max_bytes is
    assert [(e.offset, e.count) for e in one] == [(0, 2)]
    assert [(e.offset, e.count) for e in store.read(0, 1 << 20)] == [(0, 2), (2, 1)]


@pytest.mark.parametrize(
    "entries, complaint",
    [
        ([Entry(0, 1, b"")], "is not one data batch"),
        ([Entry(0, 1, batch("a", "b"))], "spans 1 offsets, its batch 2"),
        ([Entry(0, 1, batch("a"), count=2)], "spans 2 offsets, its batch 1"),
        ([Entry(0, 1, batch("a") + b"junk")], "is not one data batch"),
        ([Entry(0, 1, b"record", control=True, count=2)], "control entry 0 spans 2 offsets"),
    ],
)
def test_entries_that_split_a_batch_are_refused(entries: list[Entry], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        entries_to_batches(entries)


def test_truncation_only_at_a_batch_boundary() -> None:
    store = open_store()
    store.append(entries_of(batch("a", "b", "c"), 0, 1))
    store.append(entries_of(batch("d"), 3, 2))
    with pytest.raises(InvariantViolation, match="inside the batch at 0"):
        store.truncate_to(2)
    assert store.end_offset == 4  # refused before anything was cut
    store.truncate_to(3)
    assert (store.end_offset, store.last_epoch()) == (3, 1)
    assert store.end_offset_for_epoch(2) == OffsetAndEpoch(3, 1)


def test_epoch_lookups_follow_the_epoch_cache() -> None:
    store = open_store()
    assert (store.last_epoch(), store.end_offset_for_epoch(1)) == (0, OffsetAndEpoch(-1, -1))
    store.append(entries_of(batch("a", "b"), 0, 1))
    store.append(entries_of(batch("c"), 2, 3))
    assert store.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    assert store.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1)  # no epoch 2: epoch 1 ends at 2
    assert store.end_offset_for_epoch(3) == OffsetAndEpoch(3, 3)
    assert store.end_offset_for_epoch(0) == OffsetAndEpoch(-1, -1)


def test_producer_state_follows_appends_and_truncations() -> None:
    store = open_store()
    store.append(entries_of(batch("a", producer=(7, 0, 0)), 0, 1))
    store.append(entries_of(batch("b", producer=(7, 0, 1)), 1, 2))
    dup = store.check_producer(7, 0, 1, 1)
    assert dup.outcome is SequenceCheck.DUPLICATE and dup.duplicate_of is not None
    assert (dup.duplicate_of.first_offset, dup.duplicate_of.last_offset) == (1, 1)
    store.truncate_to(1)  # the epoch-2 batch was never committed: a retry is new again
    assert store.check_producer(7, 0, 1, 1).outcome is SequenceCheck.OK
    assert store.check_producer(7, 0, 2, 2).outcome is SequenceCheck.OUT_OF_ORDER


def test_quorum_state_survives_power_loss_and_a_torn_file_is_refused() -> None:
    storage = SimStorage()
    store = open_store(storage)
    assert store.election_state() is None
    store.persist_election_state(ElectionState(4, voted_id=2, leader_id=None))
    storage.crash()  # no rng: every unsynced byte is lost
    assert open_store(storage).election_state() == ElectionState(4, 2, None)
    path = f"{store.log.directory}/{QUORUM_STATE_FILE}"
    storage.cut(path, 10)
    with pytest.raises(CheckpointError, match="unreadable quorum state"):
        open_store(storage).election_state()


def test_unflushed_appends_are_lost_on_power_loss_from_the_tail_only() -> None:
    storage = SimStorage()
    store = open_store(storage)
    store.append(entries_of(batch("a", "b"), 0, 1))
    store.flush()
    store.append(entries_of(batch("c"), 2, 1))
    storage.crash()
    after = open_store(storage)
    got = after.read(0, 1 << 20)
    assert (after.end_offset, [(e.offset, e.last_offset) for e in got]) == (2, [(0, 1)])


def test_raft_partitions_take_no_snapshots() -> None:
    store = open_store()
    assert store.latest_snapshot() is None
    snapshot = OffsetAndEpoch(1, 1)
    with pytest.raises(RaftUsageError):
        store.write_snapshot(snapshot, b"")
    with pytest.raises(RaftUsageError):
        store.delete_before(1)
    # The log belongs to the broker's LogManager: checkpoints and closing are its own.
    with pytest.raises(RaftUsageError):
        store.checkpoint()


def test_an_append_must_continue_the_log_in_offsets_and_epochs() -> None:
    """The one store checks both layouts' appends alike: each entry starts where the one before
    it ends (its span, here a batch of two offsets), with an epoch no lower."""
    store = open_store()
    store.append(entries_of(batch("a", "b"), 0, 2))
    with pytest.raises(ValueError, match="entry 3@2 does not continue the log"):
        store.append(entries_of(batch("c"), 3, 2))  # a hole at offset 2
    with pytest.raises(ValueError, match="entry 2@1 does not continue the log"):
        store.append(entries_of(batch("c"), 2, 1))  # an epoch going back
    store.append(entries_of(batch("c"), 2, 2))
    assert (store.end_offset, store.last_epoch()) == (3, 2)


@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 2)), min_size=1, max_size=10))
def test_any_log_reads_back_from_any_offset_as_written(shape: list[tuple[int, int]]) -> None:
    store = open_store()
    written: list[Entry] = []
    offset, epoch = 0, 1
    for records, bump in shape:  # batches of 1-4 records, epochs going up by 0-2
        epoch += bump
        entries = entries_of(batch(*(f"v{offset + i}" for i in range(records))), offset, epoch)
        store.append(entries)
        written += entries
        offset += records
    for start in range(offset + 1):
        got = store.read(start, 1 << 20)
        # From the entry holding `start` (it may begin below it), every span as written.
        assert [(e.offset, e.count, e.epoch) for e in got] == [
            (e.offset, e.count, e.epoch) for e in written if e.next_offset > start
        ]  # fmt: skip
        for e in got:
            header = rb.validate(e.data)  # patched, CRC intact
            assert (header.base_offset, header.partition_leader_epoch) == (e.offset, e.epoch)
            values = [r.value for r in rb.decode_records(e.data, header)]
            assert values == [f"v{e.offset + i}".encode() for i in range(e.count)]
    for e in {e.epoch for e in written} | {0, epoch + 1}:
        known = [w for w in written if w.epoch <= e]
        expected = OffsetAndEpoch(-1, -1)
        if known:
            later = [w.offset for w in written if w.epoch > known[-1].epoch]
            expected = OffsetAndEpoch(later[0] if later else offset, known[-1].epoch)
        assert store.end_offset_for_epoch(e) == expected
