"""LogView: the local Raft log as the core sees it within one call, and the high watermark.

The core READS the log through RaftLog and WRITES it only through effects, which the driver runs
in order, before the next input. Within one call the view also holds what the core has asked
for but the driver has not done yet (`end`, `last_epoch`, `pending`); `begin()` resynchronises
it from the log at the start of every call. Every change of the local log's end or of the high
watermark goes through here, so the invariants are enforced in one place (InvariantViolation):

- the high watermark never decreases (`set_hw` only moves it forward);
- a follower never truncates below it (KIP-595, Kafka's truncateToEndOffset check);
- records a leader sends continue our log exactly, with non-decreasing epochs (log matching).
"""

from __future__ import annotations

from typing import Any

from quorum.raft.effects import AppendToLog, CommitAdvanced, Effect, TruncateLog
from quorum.raft.errors import InvariantViolation
from quorum.raft.log import Entry, OffsetAndEpoch, RaftLog


class LogView:
    def __init__(self, log: RaftLog, logger: Any) -> None:
        self.log = log
        self.logger = logger
        snapshot = log.latest_snapshot()
        # Everything in a snapshot is committed; otherwise the HW is unknown until a leader says.
        self.hw = max(log.start_offset, snapshot.offset if snapshot else 0)
        self.end = log.end_offset
        self.last_epoch = log.last_epoch()
        self.pending: list[Entry] = []  # appended in this call, not yet in the log

    def begin(self) -> None:
        """Every effect of the previous call has been executed: re-read the log."""
        log = self.log
        self.end = log.end_offset
        self.last_epoch = log.last_epoch()
        if self.pending:
            self.pending.clear()

    # ------------------------------------------------------------------------------ reads

    def read(self, offset: int, max_bytes: int) -> list[Entry]:
        """Entries from the one holding `offset`, including appends asked for in this call but
        not yet done."""
        if offset < self.log.end_offset:
            entries = self.log.read(offset, max_bytes)
            pending = self.pending
            if pending and entries and entries[-1].next_offset == pending[0].offset:
                # A fetcher behind the log end gets this call's appends too, as far as
                # max_bytes allows (a spare voter's long poll answered one append late).
                size = sum(len(e.data) for e in entries)
                more = []
                for e in pending:
                    size += len(e.data)
                    if size > max_bytes:
                        break
                    more.append(e)
                if more:
                    return entries + more
            return entries
        if self.pending and offset < self.end:
            i = 0
            while self.pending[i].next_offset <= offset:
                i += 1
            return self.pending[i:]
        return []

    def epoch_at(self, end_offset: int) -> int:
        """Epoch of the entry just below `end_offset` (the last_fetched_epoch of a fetch there)."""
        if end_offset == self.end:
            return self.last_epoch
        if end_offset > self.log.start_offset:
            return self.log.read(end_offset - 1, 1)[0].epoch  # the entry holding end_offset - 1
        snapshot = self.log.latest_snapshot()
        return snapshot.epoch if snapshot is not None and snapshot.offset == end_offset else 0

    def is_up_to_date(self, last_epoch: int, end_offset: int) -> bool:
        """Raft 5.4.1: a log ending at (last_epoch, end_offset) is at least as up to date as ours."""
        return (last_epoch, end_offset) >= (self.last_epoch, self.end)

    # ----------------------------------------------------------------------------- writes

    def set_hw(self, hw: int) -> list[Effect]:
        """Move the high watermark forward (never back): CommitAdvanced, or nothing."""
        if hw <= self.hw:
            return []
        self.hw = hw
        return [CommitAdvanced(hw)]

    def append_as_leader(self, entries: list[Entry], epoch: int) -> AppendToLog:
        """The leader's own append. Not flushed here: the caller orders its FlushLog."""
        self.pending.extend(entries)
        self.end = entries[-1].next_offset
        self.last_epoch = epoch
        return AppendToLog(tuple(entries), flush=False)

    def append_fetched(self, records: tuple[Entry, ...], flush: bool) -> list[Effect]:
        """A follower appends what its leader sent for a fetch at our end offset."""
        if records[0].offset != self.end:
            raise InvariantViolation(
                f"leader sent offset {records[0].offset} for fetch at {self.end}"
            )
        for prev, entry in zip(records, records[1:], strict=False):
            if entry.offset != prev.next_offset or entry.epoch < prev.epoch:
                raise InvariantViolation(f"non-contiguous fetch records at {entry.offset}")
        if any(e.count < 1 for e in records):
            raise InvariantViolation(f"an empty span in the fetch records at {records[0].offset}")
        self.end = records[-1].next_offset
        self.last_epoch = records[-1].epoch
        # Flushed before the next Fetch acknowledges them (effects run in order).
        return [AppendToLog(records, flush=flush)]

    def truncate_on_divergence(self, diverging: OffsetAndEpoch, epoch: int) -> list[Effect]:
        """Truncate to min(leader's end of that epoch, our end of it) (Kafka's
        AbstractFetcherThread); repeated fetches walk back through older epochs (KIP-279).
        `epoch` is our current epoch, for the error and the log event."""
        local = self.log.end_offset_for_epoch(diverging.epoch)
        # No epoch <= the leader's known here: nothing of ours can be kept (back to log start).
        target = self.log.start_offset if local.offset < 0 else min(diverging.offset, local.offset)
        target = max(target, self.log.start_offset)
        target = min(target, self.end)
        if target < self.hw:
            raise InvariantViolation(
                f"truncation to {target} below high watermark {self.hw} "
                f"(epoch {epoch}, diverging {diverging})"
            )
        self.logger.info("quorum.truncated", end_offset=target, from_offset=self.end, epoch=epoch)
        last_epoch = self.epoch_at(target)
        self.end = target
        self.last_epoch = last_epoch
        return [TruncateLog(target)]

    def snapshot_installed(self, snapshot: OffsetAndEpoch) -> None:
        """InstallSnapshot resets a log that lacked the snapshot to start at its end offset."""
        self.end = snapshot.offset
        self.last_epoch = snapshot.epoch
