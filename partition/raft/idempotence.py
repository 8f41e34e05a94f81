"""The idempotence check (KIP-98) of produce requests that one RaftReplica call appends together
(ProducesReceived: one Raft append, one fsync, for every request of an event-loop round).

The log's producer state knows every batch appended BEFORE the call; a batch accepted earlier in
the same call is not in it yet (the append is an effect, run after the call). An idempotent
producer pipelines up to 5 requests per partition, so its next batch often sits in the same call
as the one before it. `CallProducers` answers as the producer state would after the earlier
batches of the call were appended (partition.log.producer_state rules, in Kafka's order):

- a producer not seen earlier in the call: the log's answer;
- an older epoch than its batch earlier in the call: FENCED;
- the same epoch: DUPLICATE of a batch of the call with the same (first, last) sequence; OK if
  it continues the call's last batch; else the log's DUPLICATE (a retry of a batch appended before
  the call), else OUT_OF_ORDER;
- a newer epoch: OK only from sequence 0.

Invariant: a batch answered OK here would be answered OK by the producer state once the call's
earlier batches are appended, and a DUPLICATE names the offsets the original got.
"""

from __future__ import annotations

from collections.abc import Callable

from partition.log.producer_state import BatchMetadata, CheckResult, SequenceCheck

__all__ = ["CallProducers"]

_SEQ_MOD = 1 << 31
LogCheck = Callable[[int, int, int, int], CheckResult]


class CallProducers:
    """Producers' batches accepted earlier in one call, over the log's producer state."""

    def __init__(self, log_check: LogCheck) -> None:
        self._log_check = log_check
        self._seen: dict[int, tuple[int, list[BatchMetadata]]] = {}  # pid -> (epoch, batches)

    def check(self, producer_id: int, producer_epoch: int, first_seq: int,
              last_seq: int) -> CheckResult:  # fmt: skip
        seen = self._seen.get(producer_id)
        if seen is None:
            return self._log_check(producer_id, producer_epoch, first_seq, last_seq)
        epoch, batches = seen
        if producer_epoch < epoch:
            return CheckResult(SequenceCheck.FENCED)
        if producer_epoch > epoch:
            return CheckResult(SequenceCheck.OK if first_seq == 0 else SequenceCheck.OUT_OF_ORDER)
        for meta in batches:
            if (meta.first_seq, meta.last_seq) == (first_seq, last_seq):
                return CheckResult(SequenceCheck.DUPLICATE, meta)
        if first_seq == (batches[-1].last_seq + 1) % _SEQ_MOD:
            return CheckResult(SequenceCheck.OK)
        earlier = self._log_check(producer_id, producer_epoch, first_seq, last_seq)
        if earlier.outcome is SequenceCheck.DUPLICATE:
            return earlier
        return CheckResult(SequenceCheck.OUT_OF_ORDER)

    def record(self, producer_id: int, producer_epoch: int, batch: BatchMetadata) -> None:
        """A batch accepted in this call at `batch`'s offsets."""
        seen = self._seen.get(producer_id)
        if seen is None or producer_epoch > seen[0]:
            self._seen[producer_id] = (producer_epoch, [batch])
        else:
            seen[1].append(batch)
