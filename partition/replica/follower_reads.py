"""Consumer reads at a follower (KIP-392), as functions over the replica's state and its
Follower role. ReplicaCore routes a consumer FetchRequest here when this replica follows and the
request carries `follower_read` (a Kafka Fetch of v11+, whose client metadata makes Kafka's
ReplicaManager serve it from any replica: FetchParams.fetchOnlyLeader is false then).

Rules (tests/replica/test_follower_reads.py):
- The leader epoch a consumer names is checked against the one this follower knows (KIP-320):
  FENCED_LEADER_EPOCH if the consumer is behind, UNKNOWN_LEADER_EPOCH if we are.
- The range check is the leader's, [log start, LEO]; records are read below this follower's own
  high watermark only, which may lag the leader's (it learns the leader's on its next fetch), so a
  follower never shows a record the leader has not committed.
- With nothing to return and max_wait_ms > 0 the read is parked (Kafka's DelayedFetch at a
  follower, completed when its HW moves: ReplicaFetcherThread's completeDelayedFetchRequests) and
  answered on the first tick after this follower's HW passes its offset, or its offset leaves the
  log's range, or its wait is over.
- A follower that stops following this leader (a new leader epoch, leadership, offline) answers
  its parked reads at once with what it has; the consumer's next fetch meets the new epoch.
"""

from __future__ import annotations

from partition.replica.effects import Effect
from partition.replica.leader import (
    check_fetch_epoch,
    consumer_read,
    fetch_answer,
    fetch_error,
    fetch_error_answer,
    read_committed,
)
from partition.replica.local_replica import LocalReplica
from partition.replica.messages import FetchRequest
from partition.replica.state import Follower
from quorum.metadata.errors import Errors


def on_consumer_fetch(r: LocalReplica, follower: Follower, req: FetchRequest,
                      now_ms: int) -> list[Effect]:  # fmt: skip
    error = check_fetch_epoch(req, follower.leader_epoch)
    if error is not Errors.NONE:
        return fetch_error(r, req, error)
    return consumer_read(r, req, follower.parked_reads, now_ms)


def _has_answer(r: LocalReplica, req: FetchRequest) -> bool:
    """Records below this follower's HW, or an offset out of the log's range (a truncation, a
    moved log start): known from the offsets alone, so no wake is needed."""
    offset = req.fetch_offset
    return offset < r.hw or not r.log_start <= offset <= r.leo


def _answer(r: LocalReplica, req: FetchRequest) -> Effect:
    """What is here now."""
    if not r.log_start <= req.fetch_offset <= r.leo:
        return fetch_error_answer(r, req, Errors.OFFSET_OUT_OF_RANGE)
    return fetch_answer(r, req, read_committed(r, req), r.hw)


def answer_parked_reads(r: LocalReplica, follower: Follower, now_ms: int) -> list[Effect]:
    def settle(req: FetchRequest, _woken: bool, expired: bool) -> Effect | None:
        return _answer(r, req) if expired or _has_answer(r, req) else None

    return follower.parked_reads.sweep(now_ms, settle)


def next_deadline_ms(r: LocalReplica, follower: Follower) -> int | None:
    """Now if a parked read can be answered, else the earliest wait's end (None: none)."""
    parked = follower.parked_reads
    if any(_has_answer(r, p.op) or p.deadline_ms <= r.now_ms for p in parked):
        return r.now_ms
    return parked.next_deadline_ms(r.now_ms)


def release_parked_reads(r: LocalReplica, follower: Follower) -> list[Effect]:
    """Leaving this Follower role: every parked read answered with what is here now."""
    return [_answer(r, req) for req in follower.parked_reads.fail_all()]
