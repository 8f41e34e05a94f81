"""peer_unreachable(leader) while a pre-vote round runs (the hung-leader probe reports every
timeout while the leader stays silent): a round that a voter refused is asked again, since that
voter may only now have lost the leader too; a round nobody refused is left alone."""

from __future__ import annotations

import structlog

from quorum.raft.effects import Send
from quorum.raft.messages import ErrorCode, VoteRequest, VoteResponse
from tests.raft.cluster import Cluster


def _pre_votes(effects: list[object]) -> list[int]:
    return [e.to for e in effects
            if isinstance(e, Send) and isinstance(e.message, VoteRequest) and e.message.pre_vote]


def test_a_refused_pre_vote_round_is_asked_again_while_the_leader_stays_unreachable() -> None:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    c = Cluster(seed=2)
    leader = c.wait_for_leader().node_id
    c.advance(100)
    a, b = [n for n in c.nodes if n != leader]
    core = c.nodes[a].core
    first = core.peer_unreachable(leader, c.now)
    assert core.role_name == "prospective" and sorted(_pre_votes(first)) == sorted([b, leader])
    # Nobody answered yet: a second report does not restart the round.
    assert _pre_votes(core.peer_unreachable(leader, c.now + 1)) == []
    # b still fetches from the leader, so it refuses (KIP-996) ...
    refusal = VoteResponse(ErrorCode.NONE, leader, core.epoch, False, core.epoch + 1, True)
    c.run(c.nodes[a], core.handle(b, refusal, c.now + 2))
    assert core.role_name == "prospective"
    # ... and once the leader is still unreachable at the next report, a asks again at once.
    again = core.peer_unreachable(leader, c.now + 200)
    assert core.role_name == "prospective" and sorted(_pre_votes(again)) == sorted([b, leader])
