"""No message storms: the two rules that keep a node from answering (or asking) at once, forever.
Both storms were found by the simulator (harness/sim; tests/sim/test_found_bugs.py pins them).

1. A node names a leader only if it knows one for the epoch, and itself only while it leads
   (KIP-595). A former leader keeps leader_id = itself in its persisted ElectionState through
   Resigned and Prospective; naming itself in NOT_LEADER_OR_FOLLOWER sent fetchers straight back.
   A fetcher also ignores the contradictory hint "not the leader, and the leader is me".
2. An observer whose Fetch is refused, or answered NOT_LEADER without a usable hint, waits
   (controller.quorum.retry.backoff.ms, observer_bootstrap_backoff_ms) before asking the next
   voter; with every voter down it never spins. A voter keeps its fast pre-vote on a refused
   leader connection (the kill -9 failover path).
"""

from __future__ import annotations

from quorum.raft.config import RaftConfig
from quorum.raft.core import NotLeader, RaftCore
from quorum.raft.effects import Effect, ElectionState, Send
from quorum.raft.messages import ErrorCode, FetchRequest, FetchResponse, VoteRequest, VoteResponse
from tests.raft.cluster import Cluster
from tests.raft.memlog import MemLog

CONFIG = RaftConfig(election_timeout_ms=100, fetch_timeout_ms=300)
OBSERVER = 101


def _core(node_id: int, state: ElectionState | None = None, now_ms: int = 0) -> RaftCore:
    return RaftCore(CONFIG, node_id, (1, 2, 3), MemLog(), state, 7, now_ms)


def _sends(effects: list[Effect]) -> list[tuple[int, object]]:
    return [(e.to, e.message) for e in effects if isinstance(e, Send)]


def _until_role(core: RaftCore, role: str, limit_ms: int = 2000) -> int:
    now_ms = 0
    while core.role_name != role:
        now_ms = max(now_ms + 1, core.next_deadline_ms())
        assert now_ms < limit_ms, f"still {core.role_name} at {now_ms} ms"
        core.tick(now_ms)
    return now_ms


# ------------------------------------------------------------ rule 1: whom a node names


def test_a_restarted_former_leader_names_no_leader_while_resigned_or_prospective() -> None:
    core = _core(3, ElectionState(5, voted_id=3, leader_id=3))
    assert core.role_name == "resigned" and core.leader_id is None
    now_ms = _until_role(core, "prospective")
    assert core.election_state.leader_id == 3  # still persisted: the epoch was ours
    assert core.leader_id is None and core.status().leader_id is None
    [(to, answer)] = _sends(core.handle(OBSERVER, FetchRequest(OBSERVER, 5, 0, 0), now_ms))
    assert to == OBSERVER and isinstance(answer, FetchResponse)
    assert (answer.error, answer.leader_id, answer.leader_epoch) == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        None,
        5,
    )
    # Nor does it name itself to a prospective peer or a client.
    pre_vote = VoteRequest(6, 1, 0, 0, True)
    [(_, vote)] = _sends(core.handle(1, pre_vote, now_ms))
    assert isinstance(vote, VoteResponse) and vote.leader_id is None
    result, _ = core.propose([b"x"], now_ms)
    assert result == NotLeader(None, 5)


def test_a_follower_whose_leader_timed_out_names_no_leader() -> None:
    core = _core(2, ElectionState(4, leader_id=1))
    assert core.leader_id == 1
    now_ms = _until_role(core, "prospective")  # no fetch answered within fetch_timeout_ms
    [(_, answer)] = _sends(core.handle(OBSERVER, FetchRequest(OBSERVER, 4, 0, 0), now_ms))
    assert isinstance(answer, FetchResponse)
    assert answer.error == ErrorCode.NOT_LEADER_OR_FOLLOWER and answer.leader_id is None


def test_the_leader_names_itself_in_epoch_errors() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    epoch = leader.core.epoch
    stale = FetchRequest(OBSERVER, epoch - 1, 0, 0)
    [(_, answer)] = _sends(leader.core.handle(OBSERVER, stale, c.now))
    assert isinstance(answer, FetchResponse)
    assert (answer.error, answer.leader_id, answer.leader_epoch) == (
        ErrorCode.FENCED_LEADER_EPOCH,
        leader.node_id,
        epoch,
    )


def test_an_observer_ignores_a_not_leader_answer_that_names_its_sender() -> None:
    core = RaftCore(CONFIG, OBSERVER, (1, 2, 3), MemLog(), None, 7, 0)
    [(first, _)] = _sends(core.tick(0))  # bootstrap: ask a voter
    answer = FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, first, 5, 0)
    assert _sends(core.handle(first, answer, 10)) == []  # not "fetch from `first` again, now"
    assert core.role_name == "unattached" and core.epoch == 5 and core.leader_id is None
    assert core.next_deadline_ms() == 10 + CONFIG.observer_bootstrap_backoff_ms
    [(second, _)] = _sends(core.tick(core.next_deadline_ms()))
    assert second != first  # the next voter, after the backoff
    # A hint naming another node is usable: follow it at once.
    hinted = FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, 3 if second != 3 else 1, 5, 0)
    [(to, request)] = _sends(core.handle(second, hinted, 120))
    assert to == hinted.leader_id and isinstance(request, FetchRequest)
    assert core.role_name == "follower" and core.leader_id == hinted.leader_id


# ------------------------------------------------------- rule 2: backoff before the next voter


def test_an_observer_with_every_voter_refusing_asks_once_per_retry_backoff() -> None:
    core = RaftCore(CONFIG, OBSERVER, (1, 2, 3), MemLog(), None, 7, 0)
    now_ms = 0
    asked: list[tuple[int, int]] = []  # (time, voter)
    pending = core.tick(now_ms)
    for _ in range(200):  # bounded: the old code asked again at once, at the same instant
        refused = []
        for to, message in _sends(pending):
            assert isinstance(message, FetchRequest)
            asked.append((now_ms, to))
            refused.append(to)
        pending = []
        for voter in refused:  # the connection is refused at once, by every voter
            pending += core.peer_unreachable(voter, now_ms)
        assert _sends(pending) == [], "a refusal made the observer ask again at once"
        now_ms = core.next_deadline_ms()
        if now_ms >= 1000:
            break
        pending = core.tick(now_ms)
    times = [t for t, _ in asked]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= CONFIG.retry_backoff_ms
    assert len(asked) <= 1000 // CONFIG.retry_backoff_ms + 1
    assert [v for _, v in asked[:6]] == [1, 2, 3, 1, 2, 3]  # still round-robin over the voters


def test_an_observer_refused_by_its_leader_waits_before_asking_another_voter() -> None:
    core = RaftCore(CONFIG, OBSERVER, (1, 2, 3), MemLog(), ElectionState(4, leader_id=1), 7, 0)
    assert core.role_name == "follower"
    core.tick(0)
    assert core.peer_unreachable(1, 5) == []
    assert core.role_name == "unattached" and core.leader_id is None
    assert core.next_deadline_ms() == 5 + CONFIG.retry_backoff_ms
    [(to, request)] = _sends(core.tick(core.next_deadline_ms()))
    assert isinstance(request, FetchRequest) and to in (1, 2, 3)


def test_a_voter_refused_by_its_leader_still_starts_a_pre_vote_at_once() -> None:
    core = _core(2, ElectionState(4, leader_id=1))
    core.tick(0)
    sends = _sends(core.peer_unreachable(1, 5))
    assert core.role_name == "prospective"
    assert sorted(to for to, m in sends if isinstance(m, VoteRequest) and m.pre_vote) == [1, 3]


def test_an_observer_outlives_every_voter_down_without_a_storm_and_rejoins() -> None:
    c = Cluster(observers=(OBSERVER,))
    c.refuse_down = True
    leader = c.wait_for_leader()
    c.commit(leader.node_id, b"before")
    c.advance(200)
    for v in c.voters:
        c.stop(v)
    mark = len(c.effect_log)
    c.advance(2000)  # Cluster.advance fails on a storm (no quiescence)
    fetches = [e for nid, e in c.effect_log[mark:] if nid == OBSERVER and isinstance(e, Send)]
    assert 2000 // 600 <= len(fetches) <= 2000 // c.config.retry_backoff_ms + 2
    for v in c.voters:
        c.restart(v)
    new = c.wait_for_leader()
    result = c.commit(new.node_id, b"after")
    observer = c.nodes[OBSERVER]
    deadline = c.now + 2000
    while observer.core.high_watermark <= result.last_offset:
        assert c.now < deadline, "observer did not catch up after the voters came back"
        c.advance(10)
    assert observer.core.leader_id == new.node_id
