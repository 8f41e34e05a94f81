"""RaftMux and TickGrid (partition/raft/mux.py): one envelope per broker pair per round, through
the codec and back; timers rounded up, never early; and idle partitions between two brokers
exchanging a bounded number of envelopes, however many partitions, once phases are merged."""

from __future__ import annotations

import pytest
import structlog

from partition.raft import RaftEnvelope, RaftItem, RaftMux, TickGrid, unbundle
from quorum import codec
from quorum.raft.log import Entry
from quorum.raft.messages import ErrorCode, FetchRequest, FetchResponse, VoteRequest
from tests.raftpart.router import Router

T = ("topic-a", 0)
U = ("topic-b", 3)


@pytest.fixture(autouse=True)
def _quiet() -> None:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())


def test_one_envelope_per_destination_in_queue_order() -> None:
    mux = RaftMux(1)
    fetch = FetchRequest(1, 4, 10, 4)
    vote = VoteRequest(5, 1, 4, 10, pre_vote=True)
    answer = FetchResponse(ErrorCode.NONE, 1, 4, 7, 9, 0, (Entry(7, 4, b"batch"), Entry(8, 4, b"")))
    mux.add(2, T, fetch)
    mux.add(3, U, vote)
    mux.add(2, U, answer)
    mux.add(2, T, vote)
    assert mux.pending_items == 4 and mux.fetch_answers_to() == [2]
    envelopes = mux.drain()
    assert [(e.src, e.dst, len(e.items)) for e in envelopes] == [(1, 2, 3), (1, 3, 1)]
    assert mux.drain() == [] and mux.pending_items == 0
    assert (mux.envelopes_sent, mux.items_sent) == (2, 4)
    to_2 = codec.decode(codec.encode(envelopes[0]))  # the wire: msgpack, nested records
    assert to_2 == envelopes[0] and to_2.partition_keys() == (T, U)
    assert unbundle(to_2, 2) == [(T, 1, fetch), (U, 1, answer), (T, 1, vote)]


def test_a_bad_envelope_is_a_decode_error_at_the_edge() -> None:
    envelope = RaftEnvelope(1, 2, (RaftItem("t", 0, VoteRequest(1, 1, 0, 0)),))
    with pytest.raises(codec.DecodeError, match="delivered to 3"):
        unbundle(envelope, 3)
    junk = RaftEnvelope(1, 2, (RaftItem("t", 0, "not a raft message"),))
    with pytest.raises(codec.DecodeError, match="not a Raft message"):
        unbundle(codec.decode(codec.encode(junk)), 2)
    with pytest.raises(ValueError, match="to itself"):
        RaftMux(1).add(1, T, VoteRequest(1, 1, 0, 0))


def test_tick_grid_rounds_future_deadlines_up_never_down() -> None:
    grid: TickGrid[str] = TickGrid(10)
    now = 1000
    assert [grid.aligned(d, now) for d in (990, 1000, 1001, 1009, 1010, 1011)] == [
        1000, 1000, 1010, 1010, 1010, 1020]  # fmt: skip
    grid.set("a", 1003, now)
    grid.set("b", 1009, now)
    grid.set("c", 1011, now)
    grid.set("d", 1500, now)
    grid.set("d", 1004, now)  # re-armed: the old deadline no longer counts
    grid.set("c", None, now)  # disarmed
    assert grid.next_tick_ms() == 1010
    assert grid.pop_due(1009) == []
    assert grid.pop_due(1010) == ["a", "b", "d"]  # due within one quantum: one round
    assert grid.next_tick_ms() is None and grid.pop_due(10_000) == []
    with pytest.raises(ValueError):
        TickGrid(0)


def idle_per_cycle(partitions: int, merge_phases: bool) -> tuple[float, float]:
    """(envelopes per ordered broker pair, core calls per partition) per idle long-poll cycle."""
    r = Router(partitions=partitions, quantum_ms=10, seed=1, merge_phases=merge_phases)
    r.keep_effect_log = False
    for p in range(partitions):
        r.wait_for_leader(partition=p)
    for p in range(partitions):  # a write each, spread in time: the cycles get other phases
        r.produce(f"v{p}", partition=p, acks=1)
        r.advance(7)
    r.advance(3000)
    before = sum(b.host.mux.envelopes_sent for b in r.brokers.values())
    items = sum(b.host.mux.items_sent for b in r.brokers.values())
    calls = sum(b.host.core_calls for b in r.brokers.values())
    r.advance(5000)  # idle
    envelopes = sum(b.host.mux.envelopes_sent for b in r.brokers.values()) - before
    items = sum(b.host.mux.items_sent for b in r.brokers.values()) - items
    calls = sum(b.host.core_calls for b in r.brokers.values()) - calls
    # Per idle cycle (~510 ms: the 500 ms long poll, a round trip, the grid's rounding) each
    # partition's two followers send a Fetch and get an answer: 4 items.
    cycles = items / (partitions * 4)
    assert 9 <= cycles <= 10
    return envelopes / 6 / cycles, calls / partitions / cycles  # 3 brokers: 6 ordered pairs


def test_idle_partitions_merge_into_two_envelopes_per_pair_and_period() -> None:
    # Led by each broker in turn, so every broker pair carries both directions of groups.
    assert idle_per_cycle(12, merge_phases=True)[0] == pytest.approx(2, abs=0.1)
    assert idle_per_cycle(36, merge_phases=True)[0] == pytest.approx(2, abs=0.1)
    # Without merging, bundling per round alone leaves about one envelope per partition cycle.
    assert idle_per_cycle(36, merge_phases=False)[0] > 8


def test_phase_merging_asks_only_the_cores_holding_a_long_poll() -> None:
    # Per idle partition and cycle: each follower's Fetch and the answer to it (4 calls), and
    # the leader's one tick that answers both long polls. Merging adds no call: it asks only a
    # partition that holds the follower's Fetch unanswered, never one whose fetch was answered
    # in the same round (that AnswerLongPolls would be a no-op call per partition and peer).
    assert idle_per_cycle(12, merge_phases=True)[1] == pytest.approx(5, abs=0.1)
