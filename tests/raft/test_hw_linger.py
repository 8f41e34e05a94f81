"""RaftConfig.hw_linger_ms: a Fetch that lacks only the newest high watermark is parked up to the
linger, so the next append's answer carries records and HW together (one message per follower
per commit under load); idle followers still learn the HW within the linger. Commits never wait
for it: the leader's HW moves on the acks alone."""

from __future__ import annotations

from dataclasses import replace

import structlog

from quorum.raft.config import RaftConfig
from quorum.raft.effects import Send
from quorum.raft.messages import FetchResponse
from tests.raft.cluster import Cluster

LINGER_MS = 20


def fetch_answers(c: Cluster, since: int) -> list[tuple[int, FetchResponse]]:
    return [
        (e.to, e.message)
        for _, e in c.effect_log[since:]
        if isinstance(e, Send) and isinstance(e.message, FetchResponse)
    ]


def settled(config: RaftConfig) -> tuple[Cluster, int]:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    c = Cluster(config=config, seed=3)
    leader = c.wait_for_leader().node_id
    c.advance(2 * config.fetch_max_wait_ms)  # every follower knows the HW, its fetch is parked
    return c, leader


def test_sequential_commits_cost_one_answer_per_follower_each() -> None:
    c, leader = settled(RaftConfig(hw_linger_ms=LINGER_MS, max_idle_interval_ms=0))
    followers = [n for n in c.nodes if n != leader]
    mark = len(c.effect_log)
    results = [c.commit(leader, b"r%d" % i) for i in range(10)]  # each committed on its acks
    answers = fetch_answers(c, mark)
    for f in followers:
        mine = [a for to, a in answers if to == f]
        assert len(mine) == len(results)  # records only: no answer just for the HW
        assert all(a.records for a in mine)
        # Each one names the HW the previous record reached (it rode along with the records).
        for a, prev in zip(mine[1:], results, strict=False):
            assert a.high_watermark == prev.last_offset + 1


def test_an_idle_follower_learns_the_hw_within_the_linger() -> None:
    c, leader = settled(RaftConfig(hw_linger_ms=LINGER_MS, max_idle_interval_ms=0))
    result = c.commit(leader, b"a")
    committed_at = c.now
    hw = result.last_offset + 1
    followers = [c.nodes[n] for n in c.nodes if n != leader]
    while any(f.core.high_watermark < hw for f in followers):
        c.advance(1)
    assert c.now - committed_at <= LINGER_MS + 2 * c.latency_ms


def test_without_linger_the_hw_is_answered_at_once() -> None:
    """Kafka's behaviour, the core's default: the ack that moves the HW is answered with it."""
    c, leader = settled(replace(RaftConfig(), max_idle_interval_ms=0))
    result = c.commit(leader, b"a")
    hw = result.last_offset + 1
    c.advance(3 * c.latency_ms)
    assert all(c.nodes[n].core.high_watermark == hw for n in c.nodes)


def test_observers_learn_the_hw_at_once() -> None:
    """Brokers serve metadata to clients: a write committed on the controllers is visible on a
    broker one round trip later, linger or not (only voters wait for the next append)."""
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    config = RaftConfig(hw_linger_ms=LINGER_MS, max_idle_interval_ms=0)
    c = Cluster(config=config, seed=3, observers=(10,))
    leader = c.wait_for_leader().node_id
    c.advance(2 * config.fetch_max_wait_ms)
    result = c.commit(leader, b"a")
    hw = result.last_offset + 1
    c.advance(3 * c.latency_ms)
    assert c.nodes[10].core.high_watermark == hw
