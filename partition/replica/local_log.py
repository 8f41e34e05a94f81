"""The replica core's view of its local log, and the adapter that executes its log effects on a
partition.log.PartitionLog.

The core only READS through `ReplicaLog` (a small Protocol, like quorum.raft.log.RaftLog) and
WRITES only through effects; `LocalReplicaLog.execute` is what a driver (harness/node,
harness/sim, the tests) calls for the log effects, in order, before the core's next input.

Invariant checked here: an AppendAsLeader lands exactly at the offsets the core assigned (the
core's view of the LEO and the log's never drift apart); a violation raises InvariantViolation.
"""

from __future__ import annotations

from typing import Protocol, assert_never

from partition.log import batch as rb
from partition.log.log import PartitionLog
from partition.log.producer_state import CheckResult
from partition.replica.effects import (
    AppendAsFollower,
    AppendAsLeader,
    IncrementLogStartOffset,
    LogEffect,
    TruncateFully,
    TruncateTo,
    UpdateHighWatermark,
)
from partition.replica.errors import InvariantViolation


class ReplicaLog(Protocol):
    """Read-only view of one partition's local log, as the replica core sees it."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    def latest_epoch(self) -> int:
        """Epoch of the last batch (the epoch cache's latest), -1 for an empty cache."""
        ...

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """(largest known epoch <= `epoch`, its end offset), or (-1, -1) (KIP-101/279)."""
        ...

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """Raw bytes of whole batches from the one containing `offset` (at least one batch),
        none reaching `max_offset`. `offset` must lie in [log_start_offset, log_end_offset]."""
        ...

    def batch_containing(self, offset: int) -> rb.BatchHeader | None:
        """Header of the batch holding `offset`, None outside [log_start_offset, LEO)."""
        ...

    def check_producer(self, producer_id: int, producer_epoch: int, first_seq: int,
                       last_seq: int) -> CheckResult:  # fmt: skip
        """The idempotence check of a batch before it is appended (KIP-98)."""
        ...


class LocalReplicaLog:
    """`ReplicaLog` over a PartitionLog, plus `execute` for the core's log effects."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def latest_epoch(self) -> int:
        return self.log.epoch_cache.latest_epoch()

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        return self.log.epoch_cache.end_offset_for(epoch, self.log.log_end_offset)

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        return self.log.read(offset, max_bytes, max_offset=max_offset)

    def batch_containing(self, offset: int) -> rb.BatchHeader | None:
        if not self.log.log_start_offset <= offset < self.log.log_end_offset:
            return None
        data = self.log.read(offset, 1)
        return rb.read_header(data) if data else None

    def check_producer(self, producer_id: int, producer_epoch: int, first_seq: int,
                       last_seq: int) -> CheckResult:  # fmt: skip
        return self.log.producer_state.check(producer_id, producer_epoch, first_seq, last_seq)

    def execute(self, effect: LogEffect) -> None:
        """Apply one log effect (the caller keeps the core's order)."""
        match effect:
            case AppendAsLeader(records, base_offset, last_offset, leader_epoch, flush):
                if self.log.log_end_offset != base_offset:
                    raise InvariantViolation(
                        f"AppendAsLeader at {base_offset} but the log end offset is "
                        f"{self.log.log_end_offset}"
                    )
                # The core validated these bytes (CRC included) before emitting the effect.
                info = self.log.append_as_leader(records, leader_epoch, check_crc=False)
                if info.duplicate or (info.first_offset, info.last_offset) != (
                    base_offset,
                    last_offset,
                ):
                    raise InvariantViolation(
                        f"AppendAsLeader assigned [{info.first_offset}, {info.last_offset}], the "
                        f"core expected [{base_offset}, {last_offset}]"
                    )
                if flush:
                    self.log.flush()
            case AppendAsFollower(records, flush):
                self.log.append_as_follower(records)
                if flush:
                    self.log.flush()
            case TruncateTo(offset):
                self.log.truncate_to(offset)
            case TruncateFully(start_offset):
                self.log.truncate_fully(start_offset)
            case UpdateHighWatermark(high_watermark):
                self.log.update_high_watermark(high_watermark)
            case IncrementLogStartOffset(log_start_offset):
                self.log.delete_prefix(log_start_offset)
            case _:
                assert_never(effect)
