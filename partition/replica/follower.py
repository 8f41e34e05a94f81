"""The follower side of a partition replica: fetching from the leader, appending what it
returns, truncating on divergence, following the leader's HW, as functions over the replica's
explicit state (partition.replica.local_replica) and its Follower role. ReplicaCore owns the
role and every transition; nothing here changes the role (the metadata decides who leads).

Rules (each one a test in tests/replica/):
- One fetch in flight, with (fetch_offset = LEO, last_fetched_epoch = the epoch of the last
  batch, current_leader_epoch, replica_id, broker_epoch) (KIP-320, KIP-903). A response is
  matched by request id and fetch offset; anything else is stale and dropped.
- A diverging epoch (E, end) (KIP-320) truncates to min(end, own end offset of E) when this log
  has E, else to own end offset of the largest epoch below E and fetches again, so back-to-back
  elections are resolved over several rounds (KIP-279); no common epoch at all: truncate to the
  log start. Truncation goes to a batch boundary, so the core knows the new LEO exactly.
- With leader.epoch.enable=false (pre-KIP-101) a follower truncates to its own HW whenever it
  becomes a follower and fetches without a last fetched epoch; a fetch beyond the leader's LEO
  (OFFSET_OUT_OF_RANGE) truncates to the leader's LEO. With true (the default) it never truncates
  to its own HW.
- HW = min(own LEO, leader HW), only ever raised here (truncation lowers it, in the log).
- Log start offset = max(own, min(leader's log start, own HW)) after every successful fetch
  (Kafka's ReplicaFetcherThread: log.maybeIncrementLogStartOffset(leaderLogStartOffset)), so a
  follower deletes what the leader's retention (or DeleteRecords) removed.
- FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER: back off
  replica.fetch.backoff.ms and retry; the metadata (MetadataUpdated) decides who leads.
"""

from __future__ import annotations

from partition.log import batch as rb
from partition.log.errors import CorruptRecordError
from partition.replica.effects import (
    AppendAsFollower,
    Effect,
    IncrementLogStartOffset,
    SendFetch,
    TruncateFully,
    TruncateTo,
    UpdateHighWatermark,
)
from partition.replica.local_replica import LocalReplica
from partition.replica.messages import EpochEndOffset, FetchRequest, FetchResponse
from partition.replica.state import Follower
from quorum.metadata.errors import Errors


def send_fetch(r: LocalReplica, follower: Follower, now_ms: int) -> list[Effect]:
    if follower.leader_id < 0:
        return []
    req = FetchRequest(
        r.topic_id, r.partition_id, r.node_id, r.leo,
        last_fetched_epoch=r.latest_epoch if r.config.leader_epoch_enable else -1,
        current_leader_epoch=follower.leader_epoch, broker_epoch=r.broker_epoch,
        max_bytes=r.config.replica_fetch_max_bytes,
        max_wait_ms=r.config.replica_fetch_wait_max_ms, request_id=r.next_fetch_id,
    )  # fmt: skip
    r.next_fetch_id += 1  # never reused, across leaders too
    follower.in_flight = req
    follower.sent_ms = now_ms
    return [SendFetch(follower.leader_id, req)]


def on_fetch_response(
    r: LocalReplica, follower: Follower, resp: FetchResponse, now_ms: int
) -> list[Effect]:
    if follower.in_flight is None:
        return []
    req = follower.in_flight
    if (resp.request_id, resp.fetch_offset) != (req.request_id, req.fetch_offset):
        return []  # stale: an earlier fetch, or one to an earlier leader
    if resp.error is Errors.NONE and resp.leader_epoch != follower.leader_epoch:
        return []  # records from a leader of another epoch: never appended
    follower.in_flight = None
    if req.fetch_offset != r.leo:
        return send_fetch(r, follower, now_ms)  # the log moved under it (cannot happen)
    match resp.error:
        case Errors.NONE:
            if resp.diverging_epoch is not None:
                return _truncate_on_divergence(r, resp.diverging_epoch) + send_fetch(
                    r, follower, now_ms
                )
            appended = _append_fetched(r, resp)
            if appended is None:
                follower.next_fetch_ms = now_ms + r.config.replica_fetch_backoff_ms
                return []
            return (
                appended
                + _update_follower_hw(r, resp.high_watermark)
                + follow_log_start(r, resp.log_start_offset)
                + send_fetch(r, follower, now_ms)
            )
        case Errors.OFFSET_OUT_OF_RANGE:
            return _on_out_of_range(r, resp) + send_fetch(r, follower, now_ms)
        case _:
            r.logger.info(
                "partition.fetch_failed", leader=follower.leader_id, error=resp.error.name
            )
            follower.next_fetch_ms = now_ms + r.config.replica_fetch_backoff_ms
            return []


def _append_fetched(r: LocalReplica, resp: FetchResponse) -> list[Effect] | None:
    """AppendAsFollower for the batches at and after our LEO; None for a bad response."""
    if not resp.records:
        return []
    try:
        headers = list(rb.iter_headers(resp.records, check_crc=False))
    except CorruptRecordError as exc:
        r.logger.warning("partition.fetch_corrupt", error=str(exc))
        return None
    kept = [h for h in headers if h.next_offset > r.leo]
    if not kept:
        return []
    if kept[0].base_offset != r.leo:
        r.logger.warning(
            "partition.fetch_gap", log_end_offset=r.leo, base_offset=kept[0].base_offset
        )
        return None
    r.leo = kept[-1].next_offset
    r.latest_epoch = max(r.latest_epoch, kept[-1].partition_leader_epoch)
    # Quorum mode: flushed before the next fetch reports the new LEO (quorum_mode, limits).
    return [AppendAsFollower(bytes(resp.records[kept[0].position :]),
                             flush=r.config.is_quorum_mode)]  # fmt: skip


def _update_follower_hw(r: LocalReplica, leader_high_watermark: int) -> list[Effect]:
    high_watermark = min(leader_high_watermark, r.leo)
    if high_watermark <= r.hw:
        return []
    r.hw = high_watermark
    return [UpdateHighWatermark(high_watermark)]


def follow_log_start(r: LocalReplica, leader_log_start: int) -> list[Effect]:
    # Never above our HW (Kafka refuses that with OFFSET_OUT_OF_RANGE): what lies above it
    # may still be truncated, and the log start must stay at or below the HW.
    log_start = min(leader_log_start, r.hw)
    if log_start <= r.log_start:
        return []
    r.log_start = log_start
    return [IncrementLogStartOffset(log_start)]


def _truncation_target(r: LocalReplica, diverging: EpochEndOffset) -> int:
    if diverging.epoch < 0:
        return r.log_start  # no common epoch with the leader at all
    own_epoch, own_end = r.log.end_offset_for(diverging.epoch)
    if own_epoch < 0:
        return r.log_start
    # own_epoch == E: done after this; own_epoch < E: we lack E, the next fetch checks again
    # with our epoch at the new end (KIP-279, AbstractFetcherThread.getOffsetTruncationState).
    return min(diverging.end_offset, own_end)


def _truncate_on_divergence(r: LocalReplica, diverging: EpochEndOffset) -> list[Effect]:
    target = _truncation_target(r, diverging)
    r.logger.info("partition.diverged", epoch=diverging.epoch, end_offset=diverging.end_offset,
                  log_end_offset=r.leo, truncate_to=target)  # fmt: skip
    return truncate(r, target)


def truncate(r: LocalReplica, target: int) -> list[Effect]:
    """TruncateTo a batch boundary at or below `target`; updates the in-call view of the log."""
    target = max(target, r.log_start)
    if target >= r.leo:
        return []
    straddling = r.log.batch_containing(target)
    if straddling is not None and straddling.base_offset < target:
        target = straddling.base_offset  # PartitionLog.truncate_to drops a straddling batch whole
    before = r.log.batch_containing(target - 1)
    if target < r.hw:
        # Allowed for data partitions (an unclean election, or the legacy HW truncation);
        # Raft forbids it for the metadata log. Logged, since it may drop committed data.
        r.logger.warning("partition.truncated_below_high_watermark", high_watermark=r.hw,
                         truncate_to=target)  # fmt: skip
        r.hw = target
    r.leo = target
    r.latest_epoch = before.partition_leader_epoch if before is not None else -1
    return [TruncateTo(target)]


def _on_out_of_range(r: LocalReplica, resp: FetchResponse) -> list[Effect]:
    if 0 <= resp.log_end_offset < r.leo:
        # Ahead of the leader (legacy mode, or after an unclean election): cut to its end.
        return truncate(r, resp.log_end_offset)
    if r.leo < resp.log_start_offset:
        r.leo = r.hw = r.log_start = resp.log_start_offset
        r.latest_epoch = -1
        return [TruncateFully(resp.log_start_offset)]
    return []


def tick(r: LocalReplica, follower: Follower, now_ms: int) -> list[Effect]:
    if follower.in_flight is not None:
        if now_ms - follower.sent_ms < r.config.replica_socket_timeout_ms:
            return []
        follower.in_flight = None  # lost: fetch again
    if now_ms < follower.next_fetch_ms:
        return []
    return send_fetch(r, follower, now_ms)


def next_deadline_ms(r: LocalReplica, follower: Follower) -> int | None:
    if follower.leader_id < 0:
        return None
    if follower.in_flight is not None:
        return follower.sent_ms + r.config.replica_socket_timeout_ms
    return follower.next_fetch_ms
