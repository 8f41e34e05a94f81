"""RaftCore.answer_long_polls: a driver may answer a peer's parked Fetch before its max wait (the
multi-group mux uses it to put every group's next fetch from that peer in one message)."""

from __future__ import annotations

import structlog

from quorum.raft.effects import Send
from quorum.raft.messages import FetchResponse
from tests.raft.cluster import Cluster


def test_a_parked_fetch_is_answered_early_only_when_due_by_the_bound() -> None:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    c = Cluster(seed=1)
    leader = c.wait_for_leader()
    c.advance(100)  # both followers' fetches are parked (long poll, fetch_max_wait_ms = 500)
    follower, other = [n for n in c.nodes if n != leader.node_id]
    now = c.now
    assert leader.core.answer_long_polls(follower, now + 10, now) == []  # not due that soon
    effects = leader.core.answer_long_polls(follower, now + 500, now)
    assert len(effects) == 1 and isinstance(effects[0], Send) and effects[0].to == follower
    answer = effects[0].message
    assert isinstance(answer, FetchResponse) and answer.records == ()
    assert answer.fetch_offset == leader.core.status().log_end_offset
    assert leader.core.answer_long_polls(follower, now + 500, now) == []  # answered once
    assert len(leader.core.answer_long_polls(other, now + 500, now)) == 1  # still parked
    not_leader = c.nodes[follower].core
    assert not_leader.answer_long_polls(leader.node_id, now + 500, now) == []
