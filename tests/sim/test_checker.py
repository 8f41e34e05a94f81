"""The simulator's oracle on its own: each invariant of harness.sim.checks.invariants fires on a
hand-made history that breaks it, and stays quiet on one that does not."""

from __future__ import annotations

import pytest

from harness.sim.checks.invariants import KvModel, SafetyChecker, SafetyViolation
from quorum.metadata.records import KvCas, KvPut, encode_record
from quorum.raft.log import Entry, OffsetAndEpoch


class ListLog:
    """A minimal RaftLog over a list (offsets from 0, no snapshots) for feeding the checker."""

    def __init__(self, entries: list[Entry] | None = None) -> None:
        self.entries = list(entries or [])

    @property
    def start_offset(self) -> int:
        return 0

    @property
    def end_offset(self) -> int:
        return len(self.entries)

    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def read(self, start_offset: int, max_bytes: int) -> list[Entry]:
        return self.entries[start_offset:]

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:  # pragma: no cover - unused
        raise NotImplementedError

    def latest_snapshot(self) -> OffsetAndEpoch | None:
        return None


def put(offset: int, epoch: int, key: str, value: str) -> Entry:
    return Entry(offset, epoch, encode_record(KvPut(key, value)))


def append(checker: SafetyChecker, node: int, log: ListLog, entries: list[Entry]) -> None:
    checker.on_append(node, entries, log)
    log.entries.extend(entries)


def test_two_leaders_in_one_epoch_is_caught() -> None:
    checker = SafetyChecker()
    checker.on_leader_learned(1, 3, 1, ListLog())
    checker.on_leader_learned(2, 3, 1, ListLog())  # a follower naming the same leader: fine
    with pytest.raises(SafetyViolation, match="ElectionSafety"):
        checker.on_leader_learned(2, 3, 2, ListLog())


def test_log_matching_catches_different_data_at_same_offset_and_epoch() -> None:
    checker = SafetyChecker()
    append(checker, 1, ListLog(), [put(0, 1, "x", "a")])
    with pytest.raises(SafetyViolation, match="LogMatching"):
        append(checker, 2, ListLog(), [put(0, 1, "x", "b")])


def test_log_matching_catches_different_history_below_same_entry() -> None:
    checker = SafetyChecker()
    log1, log2 = ListLog(), ListLog()
    append(checker, 1, log1, [put(0, 1, "x", "a"), put(1, 3, "x", "c")])
    append(checker, 2, log2, [put(0, 2, "x", "b")])
    with pytest.raises(SafetyViolation, match="LogMatching"):
        append(checker, 2, log2, [put(1, 3, "x", "c")])


def test_committed_entry_must_be_the_same_everywhere() -> None:
    checker = SafetyChecker()
    log1, log2 = ListLog(), ListLog()
    append(checker, 1, log1, [put(0, 1, "x", "a")])
    append(checker, 2, log2, [put(0, 2, "x", "b")])
    checker.on_commit(1, 1, log1)
    with pytest.raises(SafetyViolation, match="StateMachineSafety"):
        checker.on_commit(2, 1, log2)


def test_high_watermark_never_moves_back_except_across_a_crash() -> None:
    checker = SafetyChecker()
    log = ListLog()
    append(checker, 1, log, [put(0, 1, "x", "a"), put(1, 1, "x", "b")])
    checker.on_commit(1, 2, log)
    with pytest.raises(SafetyViolation, match="MonotonicHighWatermark"):
        checker.on_commit(1, 1, log)
    checker.on_crash(1)
    checker.on_commit(1, 1, log)


def test_truncation_below_the_high_watermark_is_caught() -> None:
    checker = SafetyChecker()
    log = ListLog()
    append(checker, 1, log, [put(0, 1, "x", "a"), put(1, 1, "x", "b")])
    checker.on_commit(1, 1, log)
    checker.on_truncate(1, 1)
    with pytest.raises(SafetyViolation, match="TruncateBelowHighWatermark"):
        checker.on_truncate(1, 0)


def test_leader_missing_a_committed_entry_is_caught() -> None:
    checker = SafetyChecker()
    log1 = ListLog()
    append(checker, 1, log1, [put(0, 1, "x", "a"), put(1, 1, "x", "b")])
    checker.on_leader_learned(1, 1, 1, log1)
    checker.on_commit(1, 2, log1, epoch=1)
    short = ListLog()
    append(checker, 2, short, [put(0, 1, "x", "a")])
    with pytest.raises(SafetyViolation, match="LeaderCompleteness"):
        checker.on_leader_learned(2, 2, 2, short)


def test_a_stale_leader_of_a_lower_epoch_need_not_hold_later_commits() -> None:
    # Node 3 won epoch 4 with a delayed grant after node 2 had committed offset 1 in epoch 5.
    checker = SafetyChecker()
    log2 = ListLog()
    append(checker, 2, log2, [put(0, 1, "x", "a"), put(1, 5, "x", "b")])
    checker.on_commit(2, 1, log2, epoch=1)
    checker.on_commit(2, 2, log2, epoch=5)
    stale = ListLog()
    append(checker, 3, stale, [put(0, 1, "x", "a")])
    checker.on_leader_learned(3, 4, 3, stale)
    with pytest.raises(SafetyViolation, match="LeaderCompleteness"):
        checker.on_leader_learned(1, 6, 1, ListLog([put(0, 1, "x", "a")]))


def test_a_flushed_entry_lost_in_a_crash_is_caught() -> None:
    checker = SafetyChecker()
    log = ListLog()
    append(checker, 1, log, [put(0, 1, "x", "a"), put(1, 1, "x", "b")])
    checker.on_flush(1, log)
    checker.on_crash(1)
    checker.on_recovered(1, ListLog(log.entries[:2]))  # all there: fine
    checker.on_crash(1)
    with pytest.raises(SafetyViolation, match="Durability"):
        checker.on_recovered(1, ListLog(log.entries[:1]))


def test_unflushed_tail_may_be_lost() -> None:
    checker = SafetyChecker()
    log = ListLog()
    append(checker, 1, log, [put(0, 1, "x", "a")])
    checker.on_flush(1, log)
    append(checker, 1, log, [put(1, 1, "x", "b")])
    checker.on_crash(1)
    checker.on_recovered(1, ListLog(log.entries[:1]))


def test_stale_and_wrong_reads_are_caught() -> None:
    checker = SafetyChecker()
    log = ListLog()
    append(checker, 1, log, [put(0, 1, "x", "a"), put(1, 1, "x", "b")])
    checker.on_commit(1, 2, log)
    checker.on_read(1, "x", "b", applied_end=2, required_end=2)
    checker.on_read(1, "x", "a", applied_end=1, required_end=1)
    with pytest.raises(SafetyViolation, match="StaleRead"):
        checker.on_read(1, "x", "a", applied_end=1, required_end=2)  # missed an acked write
    with pytest.raises(SafetyViolation, match="StaleRead"):
        checker.on_read(1, "x", "a", applied_end=2, required_end=2)  # wrong value at 2


def test_kv_model_follows_cas_rules() -> None:
    model = KvModel()
    records = [
        KvPut("k", "1"),
        KvCas("k", "2", "3"),  # fails: current is "1"
        KvCas("k", "1", "4"),
        KvCas("absent", None, "5"),
    ]
    for offset, record in enumerate(records):
        model.apply(offset, Entry(offset, 1, encode_record(record)))
    assert model.value_at("k", 1) == "1"
    assert model.value_at("k", 2) == "1"
    assert model.value_at("k", 3) == "4"
    assert model.value_at("absent", 3) is None
    assert model.value_at("absent", 4) == "5"


def test_a_leader_committing_an_older_epochs_entry_is_caught() -> None:
    checker = SafetyChecker()
    log = ListLog()
    append(checker, 1, log, [put(0, 1, "x", "a"), put(1, 2, "x", "b")])
    checker.on_leader_commit(1, 2, 2, log)  # HW over its own epoch's entry: fine
    with pytest.raises(SafetyViolation, match="CommitOwnEpoch"):
        checker.on_leader_commit(1, 2, 1, log)  # HW right over an epoch-1 entry
