"""Group commit on a raft partition: the produce requests of one event-loop round reach the core
in ONE call (ProducesReceived) and become one Raft append and one fsync, each answered as if it
had come alone, idempotent producers' pipelined batches included (partition/raft/idempotence.py).
"""

from __future__ import annotations

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from partition.log import PartitionLog
from partition.log import batch as rb
from partition.replica import CompleteProduce
from quorum.metadata.errors import Errors
from quorum.raft.effects import AppendToLog, FlushLog
from tests.raftpart.router import Router, batch

PID = 9


@pytest.fixture(autouse=True)
def _quiet() -> None:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())


def data_values(plog: PartitionLog) -> list[bytes]:
    """Values of the records of every data batch in the log (control batches skipped)."""
    data = plog.read(plog.log_start_offset, 1 << 30)
    return [rec.value or b"" for h in rb.iter_headers(data) if not h.is_control
            for rec in rb.decode_records(data, h)]  # fmt: skip


def kinds(effects: list[object]) -> list[str]:
    return [type(e).__name__ for e in effects]


def test_a_round_of_produce_requests_is_one_append_and_one_fsync() -> None:
    r = Router(seed=3)
    leader = r.wait_for_leader()
    r.advance(100)
    node = leader.node_id
    fsyncs = leader.store.flush_count
    ids = r.produce_together([(batch("a", "b"), 1), (batch("c"), -1), (batch("d"), 0),
                              (batch("e", "f", "g"), 1)])  # fmt: skip
    effects = r.last_effects[(node, r.keys[0])]
    assert kinds(effects).count("AppendToLog") == 1 and effects.count(FlushLog()) == 1
    append = effects[0]
    assert isinstance(append, AppendToLog)  # one entry per batch, spanning its offsets
    assert [(e.offset, e.count) for e in append.entries] == [(1, 2), (3, 1), (4, 1), (5, 3)]
    # Both acks=1 answers right after the one append, before its fsync, in request order.
    answers = [e.response for e in effects[1:3] if isinstance(e, CompleteProduce)]
    assert [(a.request_id, a.base_offset, a.last_offset) for a in answers] == [
        (ids[0], 1, 2), (ids[3], 5, 7)]  # fmt: skip
    assert leader.store.flush_count == fsyncs + 1
    r.run_until(lambda: ids[1] in r.responses, 1000, "the acks=all answer")
    assert (r.responses[ids[1]].base_offset, r.responses[ids[1]].error) == (3, Errors.NONE)
    assert ids[2] not in r.responses  # acks=0: never answered
    got = r.consume(1)
    assert got is not None and got.high_watermark == 8


def test_pipelined_idempotent_batches_in_one_call() -> None:
    r = Router(seed=4)
    r.wait_for_leader()
    r.commit("first", producer=(PID, 0, 0))  # seq 0 at offset 1, appended before the call
    ids = r.produce_together([
        (batch("a", "b", producer=(PID, 0, 1)), 1),  # continues the log's batch
        (batch("c", producer=(PID, 0, 3)), 1),  # continues the call's batch before it
        (batch("a", "b", producer=(PID, 0, 1)), 1),  # a retry of the call's first batch
        (batch("first", producer=(PID, 0, 0)), 1),  # a retry of the batch before the call
        (batch("z", producer=(PID, 0, 9)), 1),  # a gap
        (batch("x", producer=(PID, 1, 0)), 1),  # a new producer epoch starts at 0
        (batch("y", producer=(PID, 0, 4)), 1),  # the old epoch is fenced now
    ])  # fmt: skip
    got = [(r.responses[i].error, r.responses[i].base_offset, r.responses[i].last_offset)
           for i in ids]  # fmt: skip
    assert got == [
        (Errors.NONE, 2, 3),
        (Errors.NONE, 4, 4),
        (Errors.NONE, 2, 3),
        (Errors.NONE, 1, 1),
        (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1, -1),
        (Errors.NONE, 5, 5),
        (Errors.INVALID_PRODUCER_EPOCH, -1, -1),
    ]
    r.advance(1000)
    leader = r.leader()
    assert leader.core.high_watermark == 6
    assert data_values(leader.plog) == [b"first", b"a", b"b", b"c", b"x"]


# (producer epoch, first sequence, records) per request; acks=1, one voter: answered at once.
Req = tuple[int, int, int]
requests = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 6), st.integers(1, 3)),
                    min_size=1, max_size=12)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(reqs=requests, cuts=st.lists(st.booleans(), min_size=12, max_size=12))
def test_grouping_never_changes_an_answer(reqs: list[Req], cuts: list[bool]) -> None:
    """The same idempotent requests, one per call or grouped into calls at random cuts: the same
    errors and offsets for every request, and the same log."""

    def run(groups: list[list[Req]]) -> tuple[list[tuple[Errors, int, int]], list[bytes]]:
        r = Router(brokers=(1,))
        leader = r.wait_for_leader()
        answers = []
        for group in groups:
            writes = [(batch(*(f"{e}.{s + i}" for i in range(n)), producer=(PID, e, s)), 1)
                      for e, s, n in group]  # fmt: skip
            for i in r.produce_together(writes):
                a = r.responses[i]
                answers.append((a.error, a.base_offset, a.last_offset))
        return answers, data_values(leader.plog)

    grouped: list[list[Req]] = [[]]
    for req, cut in zip(reqs, cuts, strict=False):
        grouped[-1].append(req)
        if cut:
            grouped.append([])
    assert run([[q] for q in reqs]) == run([g for g in grouped if g])
