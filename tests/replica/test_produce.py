"""Produce and consume rules: acks=0/1/all, min.insync.replicas (before and after append, strict
min ISR), timeouts, NOT_LEADER_OR_FOLLOWER with the leader hint, idempotent producers (KIP-98),
consumers below the HW only."""

from __future__ import annotations

from partition.log.batch import decode_records, iter_headers
from partition.replica import (
    AppendAsLeader,
    CompleteProduce,
    ReplicaConfig,
    UpdateHighWatermark,
)
from quorum.metadata.errors import Errors
from tests.replica.router import Cluster, batch


def _cfg(**kw: object) -> ReplicaConfig:
    return ReplicaConfig(replica_fetch_wait_max_ms=0, **kw)  # type: ignore[arg-type]


def test_acks_0_1_all_answer_at_the_right_moment() -> None:
    c = Cluster(replicas=(1, 2))
    r0 = c.produce("a", acks=0)
    effects = c.effects[1]
    assert any(isinstance(e, AppendAsLeader) and e.base_offset == 0 for e in effects)
    assert r0 not in c.responses  # acks=0: never answered
    r1 = c.produce("b", acks=1)
    assert (
        c.responses[r1].error is Errors.NONE and c.responses[r1].base_offset == 1
    )  # after the append
    append_index = max(i for i, e in enumerate(c.effects[1]) if isinstance(e, AppendAsLeader))
    reply_index = max(i for i, e in enumerate(c.effects[1]) if isinstance(e, CompleteProduce))
    assert append_index < reply_index  # the durability order: the append before the answer
    r2 = c.produce("c", "d", acks=-1)
    assert r2 not in c.responses and c.nodes[1].core.high_watermark == 0
    c.fetch(2)
    c.fetch(2)  # follower at LEO 4: HW 4
    assert c.responses[r2].error is Errors.NONE
    assert (c.responses[r2].base_offset, c.responses[r2].last_offset) == (2, 3)
    assert c.nodes[1].core.high_watermark == 4


def test_not_enough_replicas_before_append_writes_nothing() -> None:
    c = Cluster(replicas=(1, 2, 3), isr=(1,), config=_cfg(min_insync_replicas=2))
    leo = c.nodes[1].core.log_end_offset
    r = c.produce("x", acks=-1)
    assert c.responses[r].error is Errors.NOT_ENOUGH_REPLICAS and c.responses[r].error.retriable
    assert c.nodes[1].core.log_end_offset == leo and c.nodes[1].log.log_end_offset == leo


def test_strict_min_isr_acks_1_accepted_but_not_visible() -> None:
    c = Cluster(replicas=(1, 2, 3), isr=(1,), config=_cfg(min_insync_replicas=2))
    r = c.produce("x", acks=1)
    assert c.responses[r].error is Errors.NONE
    assert c.nodes[1].core.log_end_offset == 1 and c.nodes[1].core.high_watermark == 0
    c.advance(100)
    assert c.nodes[1].core.high_watermark == 0  # frozen while ISR < min ISR (KAFKA-15583)
    resp = c.consume(0)
    assert resp is not None and resp.error is Errors.NONE and resp.records == b""
    c.fetch(2)
    c.fetch(2)  # 2 catches up and rejoins: ISR {1,2} >= 2, the HW moves
    assert c.partition.isr == (1, 2) and c.nodes[1].core.high_watermark == 1


def test_min_isr_larger_than_replication_factor_uses_rf() -> None:
    c = Cluster(replicas=(1,), config=_cfg(min_insync_replicas=3))
    r = c.produce("x", acks=-1)
    assert c.responses[r].error is Errors.NONE  # effective min ISR = min(3, RF 1)
    assert c.nodes[1].core.high_watermark == 1


def test_not_enough_replicas_after_append_when_isr_shrinks_while_waiting() -> None:
    c = Cluster(replicas=(1, 2, 3), config=_cfg(min_insync_replicas=3))
    r = c.produce("x", acks=-1, timeout_ms=120_000)
    c.fetch(2)
    c.fetch(2)  # 3 never fetches
    assert r not in c.responses
    c.advance(15_000)
    c.advance(15_000)
    c.advance(15_000)  # 3 is out of sync: ISR {1,2} < 3
    assert c.partition.isr == (1, 2)
    assert c.responses[r].error is Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert c.nodes[1].log.log_end_offset == 1  # the data is written (a retry may duplicate it)


def test_request_timed_out() -> None:
    c = Cluster(replicas=(1, 2))
    r = c.produce("x", acks=-1, timeout_ms=500)
    c.advance(499)
    assert r not in c.responses
    assert c.nodes[1].core.next_deadline_ms() == c.now_ms + 1
    c.advance(1)
    assert c.responses[r].error is Errors.REQUEST_TIMED_OUT and c.responses[r].base_offset == 0


def test_not_leader_or_follower_with_hint_and_pending_fail_on_leader_change() -> None:
    c = Cluster(replicas=(1, 2))
    waiting = c.produce("x", acks=-1)
    r = c.produce("y", acks=1, to=2)
    assert c.responses[r].error is Errors.NOT_LEADER_OR_FOLLOWER
    assert (c.responses[r].leader_id, c.responses[r].leader_epoch) == (1, 0)
    c.elect(2, isr=(1, 2))
    assert c.responses[waiting].error is Errors.NOT_LEADER_OR_FOLLOWER
    assert (c.responses[waiting].leader_id, c.responses[waiting].leader_epoch) == (2, 1)


def test_idempotent_retry_is_not_written_twice() -> None:
    c = Cluster(replicas=(1,))
    first = c.produce(records=batch("a", "b", producer_id=7, producer_epoch=0, base_sequence=0))
    retry = c.produce(records=batch("a", "b", producer_id=7, producer_epoch=0, base_sequence=0))
    assert c.responses[first].error is c.responses[retry].error is Errors.NONE
    assert (c.responses[retry].base_offset, c.responses[retry].last_offset) == (
        0,
        1,
    )  # original offsets
    assert c.nodes[1].values() == ["a", "b"]
    gap = c.produce(records=batch("c", producer_id=7, producer_epoch=0, base_sequence=5))
    assert c.responses[gap].error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    nxt = c.produce(records=batch("c", producer_id=7, producer_epoch=1, base_sequence=0))
    assert c.responses[nxt].error is Errors.NONE and c.responses[nxt].base_offset == 2
    fenced = c.produce(records=batch("d", producer_id=7, producer_epoch=0, base_sequence=2))
    assert c.responses[fenced].error is Errors.INVALID_PRODUCER_EPOCH  # PRODUCER_FENCED
    assert c.nodes[1].values() == ["a", "b", "c"]


def test_idempotent_retry_of_unreplicated_batch_waits_for_hw() -> None:
    c = Cluster(replicas=(1, 2))
    first = c.produce(
        records=batch("a", producer_id=3, producer_epoch=0, base_sequence=0), timeout_ms=100
    )
    c.advance(100)
    assert c.responses[first].error is Errors.REQUEST_TIMED_OUT
    retry = c.produce(records=batch("a", producer_id=3, producer_epoch=0, base_sequence=0))
    assert retry not in c.responses  # acks=all: the original offset is not committed yet
    c.fetch(2)
    c.fetch(2)
    assert c.responses[retry].error is Errors.NONE and c.responses[retry].base_offset == 0
    assert c.nodes[1].values() == c.nodes[2].values() == ["a"]


def test_corrupt_batch_and_bad_acks_rejected() -> None:
    c = Cluster(replicas=(1,))
    data = bytearray(batch("a"))
    data[-1] ^= 0xFF
    r = c.produce(records=bytes(data))
    assert c.responses[r].error is Errors.CORRUPT_MESSAGE
    r = c.produce("a", acks=2)
    assert c.responses[r].error is Errors.INVALID_REQUIRED_ACKS
    assert c.nodes[1].log.log_end_offset == 0


def test_consumers_read_below_hw_only() -> None:
    c = Cluster(replicas=(1, 2))
    c.produce("a", acks=1)
    c.fetch(2)
    c.fetch(2)  # HW 1
    c.produce("b", acks=1)  # LEO 2, HW 1
    resp = c.consume(0)
    assert resp is not None and resp.error is Errors.NONE and resp.high_watermark == 1
    values = [r.value for h in iter_headers(resp.records) for r in decode_records(resp.records, h)]
    assert values == [b"a"]
    assert c.consume(1) is not None and c.consumer_responses[-1].records == b""  # at the HW: empty
    # In (HW, LEO]: no records, not an error (Kafka's LocalLog.read); beyond the LEO: out of range.
    above_hw = c.consume(2)
    assert above_hw is not None and above_hw.error is Errors.NONE and above_hw.records == b""
    assert above_hw.high_watermark == 1
    assert c.consume(3).error is Errors.OFFSET_OUT_OF_RANGE  # type: ignore[union-attr]
    assert c.consume(-1).error is Errors.OFFSET_OUT_OF_RANGE  # type: ignore[union-attr]
    follower_read = c.consume(0, node=2)
    assert follower_read is not None and follower_read.error is Errors.NOT_LEADER_OR_FOLLOWER


def test_consumer_long_poll_answered_when_hw_moves() -> None:
    c = Cluster(replicas=(1,))
    assert c.consume(0, max_wait_ms=500) is None  # parked
    c.produce("a", acks=1)
    assert c.nodes[1].core.next_deadline_ms() == c.now_ms  # wake now
    c.advance(0)
    resp = c.consumer_responses[-1]
    assert resp.error is Errors.NONE and resp.high_watermark == 1 and resp.records
    assert c.consume(1, max_wait_ms=500) is None
    c.advance(500)
    assert c.consumer_responses[-1].records == b"" and c.consumer_responses[-1].fetch_offset == 1


def test_single_replica_acks_all_commits_in_the_same_call() -> None:
    c = Cluster(replicas=(1,))
    r = c.produce("a", acks=-1)
    assert c.responses[r].error is Errors.NONE
    kinds = [type(e) for e in c.effects[1][-3:]]
    assert kinds == [AppendAsLeader, UpdateHighWatermark, CompleteProduce]
