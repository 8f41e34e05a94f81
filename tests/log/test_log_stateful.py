"""Rule-based test of PartitionLog (through LogManager) against a list of batches: append, read,
truncate, roll, retention, prefix deletion, flush, clean reopen and crash + recovery."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from partition.log import batch as rb
from partition.log.config import LogConfig
from partition.log.manager import LogManager
from partition.log.storage import SimStorage

CFG = LogConfig(segment_bytes=300, index_interval_bytes=64, retention_bytes=400, retention_ms=-1)
TP = ("t", 0)


@dataclass
class Model:
    batches: list[tuple[int, list[bytes], int]] = field(default_factory=list)  # base, values, epoch

    @property
    def end(self) -> int:
        return self.batches[-1][0] + len(self.batches[-1][1]) if self.batches else 0

    def record(self, offset: int) -> tuple[bytes, int]:
        for base, values, epoch in self.batches:
            if base <= offset < base + len(values):
                return values[offset - base], epoch
        raise KeyError(offset)

    def truncate(self, offset: int) -> None:
        self.batches = [b for b in self.batches if b[0] + len(b[1]) <= offset or b[0] < offset]
        if self.batches and self.end > offset:
            self.batches.pop()  # the batch holding `offset` goes whole


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sim = SimStorage()
        self.manager = LogManager.open(self.sim, "/logs", CFG)
        self.log = self.manager.get_or_create(*TP)
        self.model = Model()
        self.durable = Model()
        self.epoch = 1
        self.start = 0
        self.hw = 0

    @rule(values=st.lists(st.binary(min_size=0, max_size=30), min_size=1, max_size=4), bump=st.booleans())
    def append(self, values: list[bytes], bump: bool) -> None:
        self.epoch += bump
        before = list(self.model.batches)
        segments = len(self.log.segments)
        info = self.log.append_as_leader(rb.encode_batch([rb.Record(v) for v in values]), self.epoch)
        assert info.first_offset == self.model.end and info.last_offset == self.model.end + len(values) - 1
        self.model.batches.append((info.first_offset, values, self.epoch))
        if len(self.log.segments) != segments:  # a roll flushes everything before the new segment
            self.durable.batches = before

    @rule(data=st.data(), max_bytes=st.integers(1, 400))
    def read(self, data: st.DataObject, max_bytes: int) -> None:
        offset = data.draw(st.integers(self.start, self.model.end))
        records = self.log.read_records(offset, max_bytes)
        if offset == self.model.end:
            assert records == []
            return
        assert records and records[0].offset == offset
        for i, r in enumerate(records):
            assert r.offset == offset + i
            assert (r.value, self._epoch_of(r.offset)) == self.model.record(r.offset)

    def _epoch_of(self, offset: int) -> int:
        return self.log.epoch_cache.epoch_for_offset(offset)

    @precondition(lambda self: self.model.end > self.start)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.model.end))
        end = self.manager.truncate_to(*TP, offset)
        if offset < self.model.end:
            self.model.truncate(offset)
            self.durable.batches = list(self.model.batches)  # truncation is flushed at once
        assert end == self.model.end <= offset
        self.hw = min(self.hw, end)
        self.start = min(self.start, end)

    @rule(data=st.data())
    def move_high_watermark(self, data: st.DataObject) -> None:
        self.hw = data.draw(st.integers(self.start, self.model.end))
        assert self.log.update_high_watermark(self.hw) == self.hw

    @rule()
    def retention(self) -> None:
        active = self.log.segments[-1].base_offset
        self.log.apply_retention(now_ms=0)
        assert self.log.segments[-1].base_offset == active  # never the active segment
        assert self.start <= self.log.log_start_offset <= max(self.start, self.hw)  # never past the HW
        self.start = self.log.log_start_offset

    @rule(data=st.data())
    def delete_prefix(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.hw))
        self.log.delete_prefix(offset)
        self.start = max(self.start, offset)

    @rule()
    def flush(self) -> None:
        self.manager.flush_all()
        self.durable.batches = list(self.model.batches)

    @rule()
    def clean_reopen(self) -> None:
        self.manager.close()
        self.durable.batches = list(self.model.batches)
        self.manager = LogManager.open(self.sim, "/logs", CFG)
        self.log = self.manager.logs[TP]
        assert (self.log.log_start_offset, self.log.high_watermark) == (self.start, self.hw)

    @rule()
    def crash(self) -> None:
        self.sim.crash()
        self.manager = LogManager.open(self.sim, "/logs", CFG)
        self.log = self.manager.logs[TP]
        self.model = Model(list(self.durable.batches))
        assert self.log.log_end_offset == self.model.end
        self.start = self.log.log_start_offset
        self.hw = self.log.high_watermark
        self.epoch = max(self.epoch, self.log.epoch_cache.latest_epoch())
        for offset in range(self.start, self.model.end):  # every surviving record, exactly
            (record,) = self.log.read_records(offset, 1)[:1]
            assert (record.value, self._epoch_of(offset)) == self.model.record(offset)

    @rule(seed=st.integers(0, 2**32 - 1))
    def torn_crash(self, seed: int) -> None:
        """Each file keeps a random in-order prefix of its unsynced writes, the last one torn:
        the log comes back somewhere between the last flush and what was written, on a batch
        boundary, with exactly the records that were written there."""
        self.sim.crash(random.Random(seed))
        self.manager = LogManager.open(self.sim, "/logs", CFG)
        self.log = self.manager.logs[TP]
        end = self.log.log_end_offset
        assert self.durable.end <= end <= self.model.end
        self.model.truncate(end)
        assert self.model.end == end  # a batch boundary
        self.durable.batches = list(self.model.batches)
        self.start = self.log.log_start_offset
        self.hw = self.log.high_watermark
        for offset in range(self.start, end):
            (record,) = self.log.read_records(offset, 1)[:1]
            assert (record.value, self._epoch_of(offset)) == self.model.record(offset)

    @invariant()
    def offsets_line_up(self) -> None:
        log = self.log
        assert log.log_end_offset == self.model.end
        assert log.log_start_offset == self.start <= log.high_watermark == self.hw <= log.log_end_offset
        assert log.recovery_point <= log.log_end_offset
        bases = [s.base_offset for s in log.segments]
        assert bases == sorted(bases) and bases[0] <= log.log_start_offset
        epochs = [(e.epoch, e.start_offset) for e in log.epoch_cache.entries]
        expected: list[tuple[int, int]] = []
        for base, _values, epoch in self.model.batches:
            if base + len(_values) > self.start and (not expected or expected[-1][0] != epoch):
                expected.append((epoch, max(base, self.start)))
        # An empty log whose prefix was deleted keeps the last epoch at the log start (Kafka's
        # truncateFromStart), which tells a fetcher where that epoch ended.
        assert epochs == expected or (not expected and len(epochs) <= 1
                                      and all(o == self.start == self.model.end for _, o in epochs))


LogMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestLogMachine = LogMachine.TestCase
