"""The leader side of a partition replica: produce, serving fetches, the high watermark and
ISR changes, as functions over the replica's explicit state (partition.replica.local_replica)
and its Leader role (partition.replica.state). partition.replica.core.ReplicaCore owns the role
and every transition; nothing here changes the role.

Rules (each one a test in tests/replica/):
- Produce: batches get offsets from the LEO and this leader's epoch (AppendAsLeader); acks=0
  is never answered, acks=1 after the append, acks=all once the HW passes the batch's last
  offset. acks=all with ISR < min(min.insync.replicas, RF): NOT_ENOUGH_REPLICAS and nothing is
  written; an ISR that shrinks below it while a produce waits: NOT_ENOUGH_REPLICAS_AFTER_APPEND;
  timeout_ms passed: REQUEST_TIMED_OUT. Idempotence (KIP-98): a retried batch is not written
  again and gets its original offsets; a gap OUT_OF_ORDER_SEQUENCE_NUMBER; an old producer epoch
  INVALID_PRODUCER_EPOCH (Kafka 2.7+ calls the fencing case PRODUCER_FENCED).
- Fetch: current_leader_epoch fences (KIP-320); last_fetched_epoch is checked against the epoch
  cache and a diverging epoch answered (KIP-320/595) before anything is read; the follower's fetch
  state is updated after the read (Replica.updateFetchStateOrThrow), so the HW a response carries
  is the one from before this fetch, as in Kafka: a follower learns a HW one fetch later.
- HW (ISR mode) = min LEO over the maximal ISR (ISR | an in-flight expansion, KIP-497) and over
  followers caught up and eligible but not yet in it; frozen while ISR < min(min.insync.replicas,
  RF) (strict min ISR, KAFKA-15583). A new leader starts with every follower LEO unknown
  (Kafka's Replica.resetReplicaState), so its HW moves only once every ISR member has fetched at
  its epoch (after truncating any divergent tail): the way Kafka never exposes an offset of an
  earlier epoch that the ISR does not all hold. HW (quorum mode) = the LEO held by a majority of
  the replicas, and never past entries of an earlier epoch unless it also covers one of this
  leader's epoch (the Raft "figure 8" rule, Raft thesis 3.6.2; the new leader appends an epoch
  marker for it). Both: never backwards.
- ISR: shrink every replica.lag.time.max.ms/2 for followers with LEO != leader LEO and not caught
  up within replica.lag.time.max.ms; expand a follower whose LEO reaches max(HW, epoch start) and
  whose broker is registered, unfenced, not shutting down, at the broker epoch it fetched with
  (KIP-841, KIP-903). Both only through AlterPartition, one in flight (KIP-497).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from partition.log import batch as rb
from partition.log.errors import CorruptRecordError, InvalidRecordError
from partition.log.producer_state import SequenceCheck
from partition.purgatory import Purgatory
from partition.replica.effects import (
    AppendAsLeader,
    CompleteProduce,
    Effect,
    SendAlterPartition,
    SendFetchResponse,
    UpdateHighWatermark,
)
from partition.replica.local_replica import LocalReplica
from partition.replica.messages import (
    ACKS_ALL,
    ACKS_LEADER,
    ACKS_NONE,
    CONSUMER_REPLICA_ID,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    ProduceRequest,
    ProduceResponse,
)
from partition.replica.state import UNKNOWN_OFFSET, InFlightAlterPartition, Leader, PendingProduce
from quorum.controller.messages import AlterPartitionRequest, AlterPartitionResponse, BrokerState
from quorum.metadata.errors import Errors
from quorum.metadata.records import LeaderRecoveryState

# The controller's state moved past ours (partition epoch, or a new leader): an earlier copy of
# our request may even have been committed. Wait for the records instead of retrying.
_WAIT_FOR_METADATA = frozenset({
    Errors.INVALID_UPDATE_VERSION, Errors.FENCED_LEADER_EPOCH, Errors.NEW_LEADER_ELECTED,
    Errors.NOT_LEADER_OR_FOLLOWER,
})  # fmt: skip


# ------------------------------------------------------------------------------ produce


def produce_error(
    r: LocalReplica, req: ProduceRequest, error: Errors, message: str = ""
) -> list[Effect]:
    if req.acks == ACKS_NONE:
        return []  # acks=0: the client does not wait for anything (Kafka closes instead)
    leader_id, leader_epoch = r.leader_hint()
    return [CompleteProduce(ProduceResponse(req.request_id, error, log_start_offset=r.log_start,
                                            leader_id=leader_id, leader_epoch=leader_epoch,
                                            message=message))]  # fmt: skip


def parse_produce_batches(
    req: ProduceRequest, max_message_bytes: int
) -> tuple[list[rb.BatchHeader], Errors, str]:
    """The checks every mode makes on a produced partition before writing anything (Kafka's
    LogValidator and ReplicaManager): valid acks, whole batches with good CRCs, one batch if
    idempotent, none over max.message.bytes. The headers, or the error to answer with."""
    if req.acks not in (ACKS_NONE, ACKS_LEADER, ACKS_ALL):
        return [], Errors.INVALID_REQUIRED_ACKS, f"acks={req.acks}"
    try:
        headers = list(rb.iter_headers(req.records))
    except CorruptRecordError as exc:
        return [], Errors.CORRUPT_MESSAGE, str(exc)
    except InvalidRecordError as exc:
        return [], Errors.INVALID_REQUEST, f"INVALID_RECORD: {exc}"
    if not headers:
        return [], Errors.INVALID_REQUEST, "INVALID_RECORD: no batch"
    if len(headers) > 1 and any(h.has_producer_id for h in headers):
        return [], Errors.INVALID_REQUEST, "INVALID_RECORD: one idempotent batch per partition"
    for h in headers:  # Kafka LogValidator: per batch, RecordTooLargeException
        if h.batch_length + rb.LOG_OVERHEAD > max_message_bytes:
            return [], Errors.MESSAGE_TOO_LARGE, (
                f"batch of {h.batch_length + rb.LOG_OVERHEAD} bytes > max.message.bytes "
                f"{max_message_bytes}")  # fmt: skip
    return headers, Errors.NONE, ""


def _parse_produce(
    r: LocalReplica, req: ProduceRequest
) -> tuple[list[rb.BatchHeader], Errors, str]:
    """The batches' headers, or the error to answer with (nothing is written then)."""
    headers, error, message = parse_produce_batches(req, r.config.max_message_bytes)
    if error is not Errors.NONE:
        return headers, error, message
    if req.acks == ACKS_ALL and r.is_under_min_isr():
        # Checked before the append: nothing is written (Partition.appendRecordsToLeader).
        isr = sorted(r.isr())
        return [], Errors.NOT_ENOUGH_REPLICAS, f"ISR {isr} < {r.effective_min_isr()}"
    return headers, Errors.NONE, ""


def on_produce(r: LocalReplica, leader: Leader, req: ProduceRequest, now_ms: int) -> list[Effect]:
    headers, error, message = _parse_produce(r, req)
    if error is not Errors.NONE:
        return produce_error(r, req, error, message)
    first = headers[0]
    if first.has_producer_id:
        check = r.log.check_producer(first.producer_id, first.producer_epoch,
                                     first.base_sequence, first.last_sequence)  # fmt: skip
        match check.outcome:
            case SequenceCheck.DUPLICATE:
                assert check.duplicate_of is not None
                dup = check.duplicate_of  # KIP-98: the original offsets; nothing written
                return _acknowledge(r, leader, req, dup.first_offset, dup.last_offset, now_ms)
            case SequenceCheck.OUT_OF_ORDER:
                return produce_error(r, req, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER)
            case SequenceCheck.FENCED:
                return produce_error(r, req, Errors.INVALID_PRODUCER_EPOCH, "PRODUCER_FENCED")
            case SequenceCheck.OK:
                pass
    base = offset = r.leo
    for h in headers:
        offset += h.last_offset_delta + 1
    # The producer's bytes as they came: the log stamps base offset and leader epoch as it writes
    # them (no copy of the batch here), and the executor checks it assigned [base, offset - 1].
    effects: list[Effect] = [
        AppendAsLeader(req.records, base, offset - 1, leader.leader_epoch,
                       flush=r.config.is_quorum_mode)  # fmt: skip
    ]
    r.leo = offset
    r.latest_epoch = leader.leader_epoch
    leader.fetches.wake()  # parked follower fetches get the new batches on the next tick
    effects += maybe_advance_hw(r, leader, now_ms)
    effects += _acknowledge(r, leader, req, base, offset - 1, now_ms)
    return effects


def _acknowledge(
    r: LocalReplica, leader: Leader, req: ProduceRequest, base: int, last: int, now_ms: int
) -> list[Effect]:
    match req.acks:
        case 0:
            return []
        case 1:
            return [_produce_done(r, req.request_id, base, last, Errors.NONE)]
        case _:
            pending = PendingProduce(req.request_id, base, last)
            if r.hw >= pending.required_offset:
                return [_produce_done(r, req.request_id, base, last, _acks_all_outcome(r))]
            leader.produces.park(pending, now_ms + req.timeout_ms)
            return []


def _acks_all_outcome(r: LocalReplica) -> Errors:
    # Kafka checkEnoughReplicasReachOffset: replicated, but the ISR is below min ISR now.
    return Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND if r.is_under_min_isr() else Errors.NONE


def _produce_done(
    r: LocalReplica, request_id: int, base: int, last: int, error: Errors
) -> CompleteProduce:
    leader_id, leader_epoch = r.leader_hint()
    return CompleteProduce(ProduceResponse(request_id, error, base, last, r.log_start,
                                           leader_id, leader_epoch))  # fmt: skip


def _answer_produces(r: LocalReplica, done: list[PendingProduce], error: Errors) -> list[Effect]:
    return [_produce_done(r, p.request_id, p.base_offset, p.last_offset, error) for p in done]


def _complete_produces(r: LocalReplica, leader: Leader) -> list[Effect]:
    done = leader.produces.complete(lambda p: r.hw >= p.required_offset)
    return _answer_produces(r, done, _acks_all_outcome(r)) if done else []


def fail_produces(r: LocalReplica, leader: Leader, error: Errors) -> list[Effect]:
    return _answer_produces(r, leader.produces.fail_all(), error)


def expire_produces(r: LocalReplica, leader: Leader, now_ms: int) -> list[Effect]:
    return _answer_produces(r, leader.produces.expire(now_ms), Errors.REQUEST_TIMED_OUT)


# ------------------------------------------------------------------------ high watermark


def _hw_candidate(r: LocalReplica, leader: Leader, now_ms: int) -> int | None:
    if r.config.is_quorum_mode:
        replicas = r.partition.replicas if r.partition is not None else (r.node_id,)
        leos = sorted((r.leo if b == r.node_id else leader.followers[b].log_end_offset
                       for b in replicas), reverse=True)  # fmt: skip
        return leos[len(replicas) // 2]  # the LEO a majority holds (Raft; KRaft LeaderState)
    if r.is_under_min_isr():
        return None  # strict min ISR (KAFKA-15583, KIP-966): the HW freezes
    hw = r.leo
    maximal = r.maximal_isr(leader)
    lag = r.config.replica_lag_time_max_ms
    for f in leader.followers.values():
        joining = (f.log_end_offset != UNKNOWN_OFFSET and r.is_eligible(f)
                   and f.is_caught_up(r.leo, now_ms, lag))  # fmt: skip
        if f.replica_id in maximal or joining:
            hw = min(hw, f.log_end_offset)
    return hw


def maybe_advance_hw(r: LocalReplica, leader: Leader, now_ms: int) -> list[Effect]:
    candidate = _hw_candidate(r, leader, now_ms)
    if candidate is None or candidate <= r.hw:
        return []  # never backwards
    if (r.config.is_quorum_mode and r.hw < leader.epoch_start_offset
            and candidate <= leader.epoch_start_offset):  # fmt: skip
        # Raft figure 8 (quorum mode only): an earlier epoch's tail is exposed only together
        # with an entry of our own epoch (the epoch marker, core._append_epoch_marker). ISR
        # mode needs no such rule (Kafka has none): the HW waits until every ISR member has
        # fetched at this epoch (follower LEOs start unknown), so the whole ISR, the only
        # possible future leaders, holds whatever the HW passes.
        return []
    r.logger.debug("partition.hw_advanced", high_watermark=candidate, previous=r.hw)
    r.hw = candidate
    leader.fetches.wake()  # parked consumers may now read more
    return [UpdateHighWatermark(candidate), *_complete_produces(r, leader)]


# --------------------------------------------------------------------------------- fetch


def fetch_error(r: LocalReplica, req: FetchRequest, error: Errors, **fields: Any) -> list[Effect]:
    return [fetch_error_answer(r, req, error, **fields)]


def fetch_error_answer(
    r: LocalReplica, req: FetchRequest, error: Errors, **fields: Any
) -> SendFetchResponse:
    leader_id, leader_epoch = r.leader_hint()
    resp = FetchResponse(req.topic_id, req.partition, error, req.fetch_offset, req.request_id,
                         high_watermark=r.hw, log_start_offset=r.log_start,
                         log_end_offset=r.leo, leader_id=leader_id, leader_epoch=leader_epoch,
                         **fields)  # fmt: skip
    return SendFetchResponse(req.replica_id, resp)


def fetch_answer(
    r: LocalReplica, req: FetchRequest, records: bytes, high_watermark: int
) -> SendFetchResponse:
    leader_id, leader_epoch = r.leader_hint()
    resp = FetchResponse(req.topic_id, req.partition, Errors.NONE, req.fetch_offset, req.request_id,
                         high_watermark, r.log_start, r.leo, records, None,
                         leader_id, leader_epoch)  # fmt: skip
    return SendFetchResponse(req.replica_id, resp)


def _diverging_epoch(r: LocalReplica, req: FetchRequest) -> EpochEndOffset | None:
    """KIP-320 (Kafka ReplicatedLog.validateOffsetAndEpoch): the follower's last fetched epoch
    ends earlier here, or is unknown here, so its log has diverged from ours."""
    if not r.config.leader_epoch_enable or req.last_fetched_epoch < 0:
        return None
    if req.fetch_offset <= r.log_start:
        return None  # nothing of ours below the fetch offset to diverge from
    epoch, end = r.log.end_offset_for(req.last_fetched_epoch)
    if epoch < 0:
        return EpochEndOffset(-1, -1)
    if epoch < req.last_fetched_epoch or end < req.fetch_offset:
        return EpochEndOffset(epoch, end)
    return None


def check_fetch_epoch(req: FetchRequest, leader_epoch: int) -> Errors:
    """KIP-320: a fetch naming a leader epoch must name the one this replica knows."""
    if req.current_leader_epoch < 0 or req.current_leader_epoch == leader_epoch:
        return Errors.NONE
    if req.current_leader_epoch < leader_epoch:
        return Errors.FENCED_LEADER_EPOCH  # the fetcher is behind (KIP-320)
    return Errors.UNKNOWN_LEADER_EPOCH  # we are behind


def on_fetch_request(
    r: LocalReplica, leader: Leader, req: FetchRequest, now_ms: int
) -> list[Effect]:
    error = check_fetch_epoch(req, leader.leader_epoch)
    if error is not Errors.NONE:
        return fetch_error(r, req, error)
    if req.replica_id == CONSUMER_REPLICA_ID:
        return _on_consumer_fetch(r, leader, req, now_ms)
    follower = leader.followers.get(req.replica_id)
    if follower is None:
        return fetch_error(r, req, Errors.NOT_LEADER_OR_FOLLOWER)  # not a replica of ours
    diverging = _diverging_epoch(r, req)
    if diverging is not None:
        # Answered before any read and without updating the follower's fetch state (Kafka).
        return fetch_error(r, req, Errors.NONE, diverging_epoch=diverging)
    if not r.log_start <= req.fetch_offset <= r.leo:
        return fetch_error(r, req, Errors.OFFSET_OUT_OF_RANGE)
    high_watermark = r.hw  # before this fetch's effect on it, as Kafka's LogReadInfo
    records = r.log.read(req.fetch_offset, req.max_bytes) if req.fetch_offset < r.leo else b""
    follower.update_fetch_state(req.fetch_offset, req.last_fetched_epoch, r.leo, now_ms,
                                req.broker_epoch)  # fmt: skip
    effects = maybe_expand_isr(r, leader, now_ms)
    effects += maybe_advance_hw(r, leader, now_ms)
    if not records and req.max_wait_ms > 0:
        leader.fetches.park(req, now_ms + req.max_wait_ms)
    else:
        effects.append(fetch_answer(r, req, records, high_watermark))
    return effects


def _on_consumer_fetch(
    r: LocalReplica, leader: Leader, req: FetchRequest, now_ms: int
) -> list[Effect]:
    return consumer_read(r, req, leader.fetches, now_ms)


def consumer_read(r: LocalReplica, req: FetchRequest, parked: Purgatory[FetchRequest],
                  now_ms: int) -> list[Effect]:  # fmt: skip
    """A consumer's read of this replica (the leader, or a follower: follower_reads.py).
    Consumers read below the HW only, but the range check is Kafka's LocalLog.read one,
    [log start, LEO]: a position in (HW, LEO] is not out of range, it gets no records (a new
    leader's HW may lag what consumers already read from the old one; an error there would
    reset them to the start: a non-monotonic poll). Nothing to return and a wait: parked."""
    if not r.log_start <= req.fetch_offset <= r.leo:
        return fetch_error(r, req, Errors.OFFSET_OUT_OF_RANGE)
    records = read_committed(r, req)
    if not records and req.max_wait_ms > 0:
        parked.park(req, now_ms + req.max_wait_ms)
        return []
    return [fetch_answer(r, req, records, r.hw)]


def read_committed(r: LocalReplica, req: FetchRequest) -> bytes:
    if req.fetch_offset >= r.hw:
        return b""
    return r.log.read(req.fetch_offset, req.max_bytes, max_offset=r.hw)


def answer_parked_fetches(r: LocalReplica, leader: Leader, now_ms: int) -> list[Effect]:
    """Long polls (DelayedFetch): answer those with data now, or whose wait is over. Data is
    looked for only after a wake (new batches, or the HW moved): the read runs on the tick
    after the call that moved them, once the driver executed its effects."""

    def settle(req: FetchRequest, woken: bool, expired: bool) -> SendFetchResponse | None:
        if not r.log_start <= req.fetch_offset <= r.leo:
            return fetch_error_answer(r, req, Errors.OFFSET_OUT_OF_RANGE)
        if not woken:
            records = b""
        elif req.replica_id == CONSUMER_REPLICA_ID:
            records = read_committed(r, req)
        else:
            records = r.log.read(req.fetch_offset, req.max_bytes) if req.fetch_offset < r.leo else b""
        return fetch_answer(r, req, records, r.hw) if records or expired else None

    return list(leader.fetches.sweep(now_ms, settle))


def fail_parked_fetches(r: LocalReplica, leader: Leader) -> list[Effect]:
    return [fetch_error_answer(r, req, Errors.NOT_LEADER_OR_FOLLOWER)
            for req in leader.fetches.fail_all()]  # fmt: skip


# ----------------------------------------------------------------------------------- ISR


def _can_alter_isr(leader: Leader, now_ms: int) -> bool:
    return leader.in_flight is None and now_ms >= leader.alter_retry_ms


def maybe_expand_isr(r: LocalReplica, leader: Leader, now_ms: int) -> list[Effect]:
    if not _can_alter_isr(leader, now_ms) or r.partition is None:
        return []
    if r.partition.leader_recovery_state == LeaderRecoveryState.RECOVERING:
        # KIP-704: the ISR cannot grow until the leader reports itself RECOVERED.
        return _send_alter_partition(r, leader, r.isr(), now_ms)
    isr = r.isr()
    floor = max(r.hw, leader.epoch_start_offset)
    lag = r.config.replica_lag_time_max_ms
    # Kafka expands only on a follower's fetch (Partition.updateFollowerFetchState): a
    # follower that has not fetched within the lag time is not rejoined on stale state
    # (found by the data-plane simulation: cut followers re-added right after a shrink).
    joining = {f.replica_id for f in leader.followers.values()
               if f.replica_id not in isr and f.log_end_offset >= floor and r.is_eligible(f)
               and now_ms - f.last_fetch_time_ms <= lag}  # fmt: skip
    return _send_alter_partition(r, leader, isr | joining, now_ms) if joining else []


def maybe_resend_alter_partition(r: LocalReplica, leader: Leader, now_ms: int) -> list[Effect]:
    """No answer within the timeout: send the same request again. The proposal is never
    dropped on a timeout (Kafka's AlterPartitionManager retries too): the first copy may
    still commit, and the HW must keep counting the member it adds until we know."""
    in_flight = leader.in_flight
    if in_flight is None or leader.awaiting_metadata:
        return []
    if now_ms - in_flight.sent_ms < r.config.alter_partition_timeout_ms:
        return []
    leader.in_flight = dataclasses.replace(in_flight, sent_ms=now_ms)
    r.logger.info("partition.isr_change_resent", proposed=sorted(in_flight.proposed_isr))
    return [SendAlterPartition(in_flight.request)]


def maybe_shrink_isr(r: LocalReplica, leader: Leader, now_ms: int) -> list[Effect]:
    if not _can_alter_isr(leader, now_ms):
        return []
    isr = r.isr()
    lag = r.config.replica_lag_time_max_ms
    out = {f.replica_id for f in leader.followers.values()
           if f.replica_id in isr and not f.is_caught_up(r.leo, now_ms, lag)}  # fmt: skip
    return _send_alter_partition(r, leader, isr - out, now_ms) if out else []


def _send_alter_partition(
    r: LocalReplica, leader: Leader, new_isr: frozenset[int], now_ms: int
) -> list[Effect]:
    assert r.partition is not None
    members = tuple(
        BrokerState(b, r.broker_epoch if b == r.node_id else leader.followers[b].broker_epoch)
        for b in sorted(new_isr))  # fmt: skip
    req = AlterPartitionRequest(r.node_id, r.broker_epoch, r.topic_id, r.partition_id,
                                leader.leader_epoch, members, r.partition.partition_epoch,
                                LeaderRecoveryState.RECOVERED)  # fmt: skip
    leader.in_flight = InFlightAlterPartition(req, frozenset(new_isr), now_ms)
    r.logger.info("partition.isr_change_proposed", isr=sorted(r.isr()), proposed=sorted(new_isr),
                  partition_epoch=r.partition.partition_epoch)  # fmt: skip
    return [SendAlterPartition(req)]


def on_alter_partition_response(
    r: LocalReplica, leader: Leader, resp: AlterPartitionResponse, now_ms: int
) -> list[Effect]:
    if leader.in_flight is None or r.partition is None:
        return []
    if resp.error is Errors.NONE and (resp.topic_id, resp.partition) != (
        r.topic_id,
        r.partition_id,
    ):
        return []
    if resp.error is not Errors.NONE:
        r.logger.info("partition.isr_change_failed", error=resp.error.name)
        if resp.error in _WAIT_FOR_METADATA:
            # The outcome is unknown to us (an earlier copy of this request may have been
            # committed): keep counting the proposal in the maximal ISR, which only holds the
            # HW back, until the metadata tells what the controller committed.
            leader.awaiting_metadata = True
            return []
        leader.in_flight = (
            None  # INELIGIBLE_REPLICA, NOT_CONTROLLER, INVALID_REQUEST...: not applied
        )
        leader.alter_retry_ms = now_ms + r.config.alter_partition_backoff_ms
        return maybe_advance_hw(r, leader, now_ms)  # the maximal ISR shrank back
    leader.in_flight = None
    if resp.leader != r.node_id or resp.leader_epoch != leader.leader_epoch:
        leader.awaiting_metadata = True
        return []
    if resp.partition_epoch <= r.partition.partition_epoch:
        return maybe_advance_hw(r, leader, now_ms)  # the records got here first
    old = r.partition
    r.partition = dataclasses.replace(old, isr=resp.isr, partition_epoch=resp.partition_epoch,
                                      leader_recovery_state=resp.leader_recovery_state)  # fmt: skip
    return after_isr_change(r, leader, frozenset(old.isr), now_ms)


def after_isr_change(
    r: LocalReplica, leader: Leader, old_isr: frozenset[int], now_ms: int
) -> list[Effect]:
    isr = r.isr()
    if isr != old_isr:
        event = "partition.isr_shrunk" if isr < old_isr else "partition.isr_expanded"
        r.logger.info(event, isr=sorted(isr), previous=sorted(old_isr),
                      partition_epoch=r.partition.partition_epoch if r.partition else -1)  # fmt: skip
    effects: list[Effect] = []
    if r.is_under_min_isr():
        effects += fail_produces(r, leader, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    effects += maybe_advance_hw(r, leader, now_ms)
    effects += maybe_expand_isr(r, leader, now_ms)
    return effects
