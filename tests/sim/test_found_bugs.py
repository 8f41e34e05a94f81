"""Bugs the simulator found in other modules, pinned as small deterministic tests (a seed's
trajectory moves whenever the core changes; these do not). Both were message storms in the Raft
core, now fixed (quorum/raft; core-level tests in tests/raft/test_liveness.py):

- self-named-leader-fetch-storm (seeds 20194, 40139, 40242 with 3 voters; 30247, 30256 with 5):
  a former leader in Prospective named itself leader in NOT_LEADER_OR_FOLLOWER answers;
- observer-refused-bootstrap-storm (seed 40218, 3 voters): an observer whose Fetch was refused
  asked the next voter at once, forever, when every voter was down."""

from __future__ import annotations

from harness.sim.actors.raft_disk import SimQuorumStateStore
from harness.sim.actors.raft_node import RaftNode
from harness.sim.checks.invariants import SafetyChecker
from quorum.raft.config import RaftConfig
from quorum.raft.effects import ElectionState
from quorum.raft.messages import ErrorCode, FetchRequest, FetchResponse


def test_a_voter_that_does_not_lead_never_names_itself_leader() -> None:
    config = RaftConfig(election_timeout_ms=100, fetch_timeout_ms=300)
    node = RaftNode(3, (1, 2, 3), config, SafetyChecker())
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


def test_an_observer_backs_off_when_every_voter_refuses() -> None:
    config = RaftConfig(election_timeout_ms=100, fetch_timeout_ms=300)
    node = RaftNode(101, (1, 2, 3), config, SafetyChecker())
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
