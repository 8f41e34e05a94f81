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
    read_committed,
)
from partition.replica.local_replica import LocalReplica
from partition.replica.messages import FetchRequest
from partition.replica.state import Follower, ParkedFetch
from quorum.metadata.errors import Errors


def on_consumer_fetch(r: LocalReplica, follower: Follower, req: FetchRequest,
                      now_ms: int) -> list[Effect]:  # fmt: skip
    error = check_fetch_epoch(req, follower.leader_epoch)
    if error is not Errors.NONE:
        return fetch_error(r, req, error)
    return consumer_read(r, req, follower.parked_reads, now_ms)


def _ready(r: LocalReplica, parked: ParkedFetch, now_ms: int) -> bool:
    offset = parked.request.fetch_offset
    return (offset < r.hw or not r.log_start <= offset <= r.leo
            or parked.deadline_ms <= now_ms)  # fmt: skip


def answer_parked_reads(r: LocalReplica, follower: Follower, now_ms: int) -> list[Effect]:
    effects: list[Effect] = []
    kept: list[ParkedFetch] = []
    for parked in follower.parked_reads:
        if not _ready(r, parked, now_ms):
            kept.append(parked)
            continue
        req = parked.request
        if not r.log_start <= req.fetch_offset <= r.leo:
            effects += fetch_error(r, req, Errors.OFFSET_OUT_OF_RANGE)
        else:
            effects.append(fetch_answer(r, req, read_committed(r, req), r.hw))
    follower.parked_reads = kept
    return effects


def next_deadline_ms(r: LocalReplica, follower: Follower) -> int | None:
    """Now if a parked read can be answered, else the earliest wait's end (None: none)."""
    if not follower.parked_reads:
        return None
    if any(_ready(r, p, r.now_ms) for p in follower.parked_reads):
        return r.now_ms
    return min(p.deadline_ms for p in follower.parked_reads)


def release_parked_reads(r: LocalReplica, follower: Follower) -> list[Effect]:
    """Leaving this Follower role: every parked read answered with what is here now."""
    parked, follower.parked_reads = follower.parked_reads, []
    return [fetch_answer(r, p.request, read_committed(r, p.request), r.hw)
            if r.log_start <= p.request.fetch_offset <= r.leo
            else fetch_error(r, p.request, Errors.OFFSET_OUT_OF_RANGE)[0] for p in parked]
