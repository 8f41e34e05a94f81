"""Produce and consume on a raft partition: acks=0/1/all semantics and where their answers sit in
the effect order, Kafka's error codes with leader hints (KIP-951), consumer reads bounded by the
Raft high watermark, long polls, and the checks a produced batch must pass."""

from __future__ import annotations

import pytest
import structlog

from partition.log import Record, encode_batch
from partition.raft import RaftPartitionConfig
from partition.replica import CompleteProduce
from quorum.metadata.errors import Errors
from quorum.raft.effects import AppendToLog, CommitAdvanced, FlushLog
from tests.raftpart.router import Router, batch


@pytest.fixture(autouse=True)
def _quiet() -> None:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())


def kinds(effects: list[object]) -> list[str]:
    return [type(e).__name__ for e in effects]


def test_answers_sit_after_what_they_promise_in_the_effect_order() -> None:
    r = Router(brokers=(1,))  # one voter: the whole story happens in the produce call
    leader = r.wait_for_leader()
    r.produce("one", acks=1)
    one = kinds(r.last_effects[(1, r.keys[0])])
    # acks=1: answered right after the append, before the fsync (Kafka: no fsync for acks=1).
    assert one[:3] == ["AppendToLog", "CompleteProduce", "FlushLog"]
    request = r.produce("all", acks=-1)
    effects = r.last_effects[(1, r.keys[0])]
    assert kinds(effects) == ["AppendToLog", "FlushLog", "CommitAdvanced", "CompleteProduce"]
    commit = effects[2]
    assert isinstance(commit, CommitAdvanced) and commit.high_watermark == 3
    done = effects[3]
    assert isinstance(done, CompleteProduce) and done.response.request_id == request
    assert (done.response.base_offset, done.response.last_offset) == (2, 2)
    assert leader.core.high_watermark == 3


def test_acks_all_waits_for_a_majority() -> None:
    r = Router(seed=1)
    leader = r.wait_for_leader()
    r.advance(100)
    node = leader.node_id
    r.isolate(node)
    request = r.produce("x", "y")
    effects = r.last_effects[(node, r.keys[0])]
    assert isinstance(effects[0], AppendToLog) and FlushLog() in effects
    assert not any(isinstance(e, CompleteProduce) for e in effects)
    r.advance(1000)  # the leader alone: appended and flushed, not committed
    assert request not in r.responses and leader.core.high_watermark == 1
    follower = next(b for b in r.brokers if b != node)
    r.cut -= {(node, follower), (follower, node)}  # one follower back: a majority of 3
    r.run_until(lambda: request in r.responses, 1000, "the acks=all answer")
    answer = r.responses[request]
    assert (answer.error, answer.base_offset, answer.last_offset) == (Errors.NONE, 1, 2)
    assert (answer.leader_id, answer.leader_epoch) == (node, leader.core.leader_epoch)
    assert leader.core.high_watermark == 3


def test_acks_all_times_out_when_no_majority_answers() -> None:
    r = Router(seed=1)
    leader = r.wait_for_leader()
    r.isolate(leader.node_id)
    request = r.produce("x", timeout_ms=500)
    r.advance(499)
    assert request not in r.responses
    r.advance(2)
    assert r.responses[request].error is Errors.REQUEST_TIMED_OUT


def test_acks_1_is_answered_at_once_and_read_only_once_committed() -> None:
    r = Router(seed=1)
    leader = r.wait_for_leader()
    r.advance(100)
    r.isolate(leader.node_id)
    request = r.produce("early", acks=1)
    assert r.responses[request].error is Errors.NONE and r.responses[request].base_offset == 1
    fetched = r.consume(1)  # in (HW, LEO]: no records, and no error (Kafka's LocalLog.read)
    assert fetched is not None and (fetched.error, fetched.records) == (Errors.NONE, b"")
    assert (fetched.high_watermark, fetched.log_end_offset) == (1, 2)
    r.heal()
    r.advance(600)
    fetched = r.consume(1)
    assert fetched is not None and fetched.high_watermark == 2 and fetched.records


def test_acks_0_is_never_answered() -> None:
    r = Router(seed=1)
    leader = r.wait_for_leader()
    follower = next(b for b in r.brokers if b != leader.node_id)
    first = r.produce("to the follower", acks=0, to=follower)
    second = r.produce("to the leader", acks=0)
    r.advance(500)
    assert first not in r.responses and second not in r.responses
    assert leader.core.high_watermark == 2  # the leader's one was written and committed


def test_non_leaders_answer_not_leader_with_the_leader_hint() -> None:
    r = Router(seed=1)
    leader = r.wait_for_leader()
    node, epoch = leader.node_id, leader.core.leader_epoch
    follower = next(b for b in r.brokers if b != node)
    answer = r.responses[r.produce("x", to=follower)]
    assert (answer.error, answer.leader_id, answer.leader_epoch) == (
        Errors.NOT_LEADER_OR_FOLLOWER, node, epoch)  # fmt: skip
    fetched = r.consume(0, to=follower)
    assert fetched is not None
    assert (fetched.error, fetched.leader_id, fetched.leader_epoch) == (
        Errors.NOT_LEADER_OR_FOLLOWER, node, epoch)  # fmt: skip


def test_consumer_epoch_fencing_comes_first_as_in_kafka() -> None:
    r = Router(seed=1)
    leader = r.wait_for_leader()
    epoch = leader.core.leader_epoch
    follower = next(b for b in r.brokers if b != leader.node_id)
    cases = [
        (None, epoch - 1, Errors.FENCED_LEADER_EPOCH),  # the consumer's metadata is older
        (None, epoch + 1, Errors.UNKNOWN_LEADER_EPOCH),  # the leader's is (it does not know yet)
        (follower, epoch - 1, Errors.FENCED_LEADER_EPOCH),  # checked before "not the leader"
        (None, epoch, Errors.NONE),
        (None, -1, Errors.NONE),  # -1: no check
    ]
    for to, current, expected in cases:
        fetched = r.consume(0, to=to, current_leader_epoch=current)
        assert fetched is not None and fetched.error is expected, (to, current)
    fetched = r.consume(5)
    assert fetched is not None and fetched.error is Errors.OFFSET_OUT_OF_RANGE


def test_a_long_poll_is_answered_when_the_high_watermark_moves() -> None:
    r = Router(seed=1)
    r.wait_for_leader()
    assert r.consume(1, max_wait_ms=500) is None  # parked: nothing below the HW from 1
    r.advance(10)
    r.produce("late", acks=1)
    r.advance(20)
    fetched = r.consumer_responses[-1]
    assert fetched.fetch_offset == 1 and fetched.high_watermark == 2 and fetched.records
    assert r.consume(2, max_wait_ms=300) is None
    r.advance(299)
    assert r.consumer_responses[-1] is fetched
    r.advance(2)
    expired = r.consumer_responses[-1]
    assert (expired.fetch_offset, expired.error, expired.records) == (2, Errors.NONE, b"")


def test_a_leader_change_fails_parked_long_polls() -> None:
    r = Router(seed=1)
    leader = r.wait_for_leader()
    assert r.consume(1, max_wait_ms=5000) is None
    r.resign(leader.node_id)
    failed = r.consumer_responses[-1]
    assert (failed.fetch_offset, failed.error) == (1, Errors.NOT_LEADER_OR_FOLLOWER)


@pytest.mark.parametrize(
    "records, acks, error, message",
    [
        (batch("x" * 200), -1, Errors.MESSAGE_TOO_LARGE, "max.message.bytes 150"),
        (encode_batch([Record(b"m")], is_control=True), -1, Errors.INVALID_REQUEST, "control"),
        (batch("a", producer=(1, 0, 0)) + batch("b", producer=(1, 0, 1)), -1,
         Errors.INVALID_REQUEST, "one idempotent batch"),
        (batch("a"), 2, Errors.INVALID_REQUIRED_ACKS, "acks=2"),
        (batch("a")[:-1], -1, Errors.CORRUPT_MESSAGE, "torn"),
    ],
)  # fmt: skip
def test_bad_batches_are_refused_and_nothing_is_written(
    records: bytes, acks: int, error: Errors, message: str
) -> None:
    r = Router(seed=1, config=RaftPartitionConfig(max_message_bytes=150))
    leader = r.wait_for_leader()
    end = leader.store.end_offset
    answer = r.responses[r.produce(records=records, acks=acks)]
    assert answer.error is error and message in answer.message
    assert leader.store.end_offset == end
