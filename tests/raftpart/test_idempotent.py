"""Idempotent producers on a raft partition (KIP-98): a retried batch is written once, also when
the retry reaches a new leader after a failover, whether or not the new leader holds the
original; and the sequence and epoch checks answer as Kafka does."""

from __future__ import annotations

import pytest
import structlog

from partition.log import batch as rb
from partition.log.producer_state import SequenceCheck
from quorum.metadata.errors import Errors
from tests.raftpart.router import Replica, Router

PID = 7


@pytest.fixture(autouse=True)
def _quiet() -> None:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())


def producer_batches(replica: Replica) -> list[tuple[int, int, int]]:
    """(base offset, producer id, base sequence) of every producer batch in the log."""
    return [(h.base_offset, h.producer_id, h.base_sequence)
            for h in replica.plog.batch_headers(0) if h.has_producer_id]  # fmt: skip


def test_a_retry_on_the_same_leader_gets_the_original_offsets() -> None:
    r = Router(seed=1)
    leader = r.wait_for_leader()
    first = r.commit("a", "b", producer=(PID, 0, 0))
    assert (first.error, first.base_offset, first.last_offset) == (Errors.NONE, 1, 2)
    end = leader.store.end_offset
    again = r.commit("a", "b", producer=(PID, 0, 0))
    assert (again.error, again.base_offset, again.last_offset) == (Errors.NONE, 1, 2)
    assert leader.store.end_offset == end  # nothing appended
    after = r.commit("c", producer=(PID, 0, 2))
    assert (after.error, after.base_offset) == (Errors.NONE, 3)
    assert producer_batches(leader) == [(1, PID, 0), (3, PID, 2)]


def test_a_retry_after_failover_finds_the_batch_the_new_leader_holds() -> None:
    r = Router(seed=2)
    old = r.wait_for_leader()
    r.advance(100)
    request = r.produce("x", producer=(PID, 0, 0))
    r.advance(1)  # the followers appended (and flushed) it; their next fetches are in flight
    r.kill(old.node_id)  # before those fetches reach it: never answered
    assert request not in r.responses
    new = r.wait_for_leader()
    assert new is not old and producer_batches(new) == [(1, PID, 0)]
    retry = r.commit("x", producer=(PID, 0, 0))  # the producer's retry, to the new leader
    assert (retry.error, retry.base_offset, retry.last_offset) == (Errors.NONE, 1, 1)
    assert r.commit("y", producer=(PID, 0, 1)).error is Errors.NONE
    r.restart(old.node_id)
    # It learns the new epoch from BeginQuorumEpoch (resent every fetch.timeout/2) or from the
    # answers to its own pre-vote, then fetches.
    r.advance(2000)
    for broker in r.brokers.values():
        assert producer_batches(broker.replicas[r.keys[0]]) == [(1, PID, 0), (3, PID, 1)]


def test_a_retry_after_failover_rewrites_a_batch_only_the_old_leader_had() -> None:
    r = Router(seed=3)
    old = r.wait_for_leader()
    r.advance(100)
    r.isolate(old.node_id)
    request = r.produce("x", producer=(PID, 0, 0), timeout_ms=1000)
    assert producer_batches(old) == [(1, PID, 0)]  # on the old leader only
    r.advance(1001)
    assert r.responses[request].error is Errors.REQUEST_TIMED_OUT
    others = [b.replicas[r.keys[0]] for b in r.brokers.values() if b.node_id != old.node_id]
    r.run_until(lambda: any(x.core.is_leader for x in others), 5000, "a majority-side leader")
    new = next(x for x in others if x.core.is_leader)
    assert producer_batches(new) == []
    request = r.produce("x", producer=(PID, 0, 0), to=new.node_id)  # the retry
    r.run_until(lambda: request in r.responses, 1000, "the retry's answer")
    retry = r.responses[request]
    assert retry.error is Errors.NONE
    r.heal()
    r.advance(4000)  # the old leader resigns (check-quorum), follows, truncates its copy
    assert producer_batches(old) == producer_batches(new) == [(retry.base_offset, PID, 0)]
    dup = old.store.check_producer(PID, 0, 0, 0)  # its producer state is the new leader's
    assert dup.outcome is SequenceCheck.DUPLICATE and dup.duplicate_of is not None
    assert dup.duplicate_of.first_offset == retry.base_offset


def test_sequence_gaps_and_fenced_producer_epochs_are_refused() -> None:
    r = Router(seed=1)
    leader = r.wait_for_leader()
    assert r.commit("a", producer=(PID, 1, 0)).error is Errors.NONE
    gap = r.commit("c", producer=(PID, 1, 2))
    assert gap.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    fenced = r.commit("z", producer=(PID, 0, 1))
    assert (fenced.error, fenced.message) == (Errors.INVALID_PRODUCER_EPOCH, "PRODUCER_FENCED")
    new_epoch = r.commit("n", producer=(PID, 2, 5))  # a new producer epoch starts at 0
    assert new_epoch.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert [h.base_sequence for h in leader.plog.batch_headers(0)
            if h.producer_id == PID] == [0]  # fmt: skip
    assert all(h.base_sequence == rb.NO_SEQUENCE for h in leader.plog.batch_headers(0)
               if not h.has_producer_id)  # fmt: skip
