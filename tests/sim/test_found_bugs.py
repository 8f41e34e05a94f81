"""Bugs the simulator found in other modules and that are still open, pinned as small
deterministic tests (a seed's trajectory moves whenever the core changes; these do not). Each is
`xfail(strict=True)`: it fails loudly once the bug is fixed, so whoever fixes it removes the mark
and the matching entry of harness.sim.simulation.KNOWN_CORE_BUGS."""

from __future__ import annotations

import pytest

from harness.sim.invariants import SafetyChecker
from harness.sim.node import SimNode
from harness.sim.quorum_state import SimQuorumStateStore
from quorum.raft.config import RaftConfig
from quorum.raft.effects import ElectionState
from quorum.raft.messages import ErrorCode, FetchRequest, FetchResponse


@pytest.mark.xfail(
    strict=True,
    reason="quorum/raft: a former leader in Prospective names ITSELF as leader in its "
    "NOT_LEADER_OR_FOLLOWER fetch answers (KNOWN_CORE_BUGS self-named-leader-fetch-storm)",
)
def test_a_voter_that_does_not_lead_never_names_itself_leader() -> None:
    config = RaftConfig(election_timeout_ms=100, fetch_timeout_ms=300)
    node = SimNode(3, (1, 2, 3), config, SafetyChecker())
    # It led epoch 5 before a restart: the quorum-state file says so.
    SimQuorumStateStore(node.storage).write(ElectionState(5, voted_id=3, leader_id=3))
    node.start(0, seed=7)
    now_ms = 0
    while node.core.role_name != "prospective" and now_ms < 2000:
        now_ms = max(now_ms + 1, node.next_deadline_ms() or 0)
        node.tick(now_ms)
    assert node.core.role_name == "prospective"
    node.outbox.clear()
    node.handle(101, FetchRequest(101, 5, 0, 0), now_ms)
    answers = [m for to, m in node.outbox if to == 101 and isinstance(m, FetchResponse)]
    assert answers and answers[0].error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert answers[0].leader_id != 3  # it does not lead: "the leader is me" sends 101 back here


@pytest.mark.xfail(
    strict=True,
    reason="quorum/raft: an observer whose Fetch is refused asks the next voter at once, forever, "
    "with no backoff, when every voter is down (KNOWN_CORE_BUGS observer-refused-bootstrap-storm)",
)
def test_an_observer_backs_off_when_every_voter_refuses() -> None:
    config = RaftConfig(election_timeout_ms=100, fetch_timeout_ms=300)
    node = SimNode(101, (1, 2, 3), config, SafetyChecker())
    node.start(0, seed=7)
    now_ms = node.next_deadline_ms() or 0
    node.tick(now_ms)
    sent = 0
    for _ in range(20):  # every voter's process is down: each Fetch is refused at once
        fetches = [to for to, m in node.outbox if isinstance(m, FetchRequest)]
        node.outbox.clear()
        if not fetches:
            break
        sent += len(fetches)
        for voter in fetches:
            node.peer_unreachable(voter, now_ms)
    # One round over the voters is fine; more at the same instant is a busy loop.
    assert sent <= 3
