"""Elections: vote rules (KIP-595), durable state ordering, pre-vote (KIP-996), randomized
timeouts, recovery from the persisted ElectionState."""

from __future__ import annotations

from quorum import codec
from quorum.raft.config import RaftConfig
from quorum.raft.core import RaftCore
from quorum.raft.effects import ElectionState, LeaderChanged, PersistElectionState, Send
from quorum.raft.log import Entry
from quorum.raft.messages import (
    ErrorCode,
    FetchResponse,
    LeaderChangeRecord,
    VoteRequest,
    VoteResponse,
)
from tests.raft.cluster import Cluster
from tests.raft.memlog import MemLog


def make_core(
    node_id: int = 1,
    voters: tuple[int, ...] = (1, 2, 3),
    log: MemLog | None = None,
    state: ElectionState | None = None,
    config: RaftConfig | None = None,
    seed: int = 0,
) -> RaftCore:
    return RaftCore(config or RaftConfig(), node_id, voters, log or MemLog(), state, seed, 0)


def log_with(*epochs: int) -> MemLog:
    log = MemLog()
    log.append([Entry(i, e, b"r%d" % i) for i, e in enumerate(epochs)])
    log.flush()
    return log


def responses(effects: list) -> list[VoteResponse]:
    return [
        e.message for e in effects if isinstance(e, Send) and isinstance(e.message, VoteResponse)
    ]


def test_three_voters_elect_one_leader_and_commit_its_leader_change() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    assert leader.core.epoch == 1
    c.advance(100)
    for n in c.nodes.values():
        assert n.core.epoch == 1 and n.core.leader_id == leader.node_id
        epoch, data, control = n.committed[0]
        assert control and epoch == 1
        record = codec.decode(data, LeaderChangeRecord)
        assert record.leader_id == leader.node_id and record.voters == (1, 2, 3)
        assert n.persisted is not None and n.persisted.epoch == 1
    changes = [e for e in leader.leader_changes if e.is_self]
    assert changes == [LeaderChanged(1, leader.node_id, True)]


def test_single_voter_elects_itself_at_once() -> None:
    c = Cluster(voters=1)
    c.advance(1)
    assert c.nodes[1].core.is_leader
    result = c.commit(1, b"x")
    assert (result.first_offset, result.epoch) == (1, 1)
    assert c.nodes[1].committed[1] == (1, b"x", False)


def test_vote_needs_a_log_at_least_as_up_to_date() -> None:
    core = make_core(log=log_with(1, 1, 1))  # last epoch 1, end offset 3
    shorter = core.handle(2, VoteRequest(2, 2, 1, 2), 0)
    assert [r.vote_granted for r in responses(shorter)] == [False]
    # The epoch still moved to 2 (a higher epoch always wins) but no vote was recorded.
    assert core.election_state == ElectionState(2)
    newer_epoch = core.handle(3, VoteRequest(2, 3, 2, 1), 0)
    assert [r.vote_granted for r in responses(newer_epoch)] == [True]
    assert core.election_state == ElectionState(2, voted_id=3)


def test_equal_log_is_up_to_date_enough() -> None:
    core = make_core(log=log_with(1, 1, 1))
    assert responses(core.handle(2, VoteRequest(2, 2, 1, 3), 0))[0].vote_granted


def test_one_vote_per_epoch() -> None:
    core = make_core()
    first = core.handle(2, VoteRequest(4, 2, 0, 0), 0)
    assert responses(first)[0].vote_granted
    other = core.handle(3, VoteRequest(4, 3, 0, 0), 1)
    assert not responses(other)[0].vote_granted
    assert not [e for e in other if isinstance(e, PersistElectionState)]
    again = core.handle(2, VoteRequest(4, 2, 0, 0), 2)  # a retry of the same candidate
    assert responses(again)[0].vote_granted
    assert not [e for e in again if isinstance(e, PersistElectionState)]


def test_vote_is_persisted_before_it_is_sent() -> None:
    core = make_core()
    effects = core.handle(2, VoteRequest(1, 2, 0, 0), 0)
    persist = [i for i, e in enumerate(effects) if isinstance(e, PersistElectionState)]
    sends = [i for i, e in enumerate(effects) if isinstance(e, Send)]
    assert effects[persist[-1]] == PersistElectionState(ElectionState(1, voted_id=2))
    assert persist and sends and persist[-1] < sends[0]


def test_stale_epoch_vote_is_fenced() -> None:
    core = make_core(state=ElectionState(5))
    (resp,) = responses(core.handle(2, VoteRequest(4, 2, 9, 99), 0))
    assert (resp.error, resp.vote_granted, resp.leader_epoch) == (
        ErrorCode.FENCED_LEADER_EPOCH,
        False,
        5,
    )


def test_observer_refuses_votes() -> None:
    core = make_core(node_id=101)
    (resp,) = responses(core.handle(2, VoteRequest(1, 2, 0, 0), 0))
    assert resp.error is ErrorCode.INCONSISTENT_VOTER_SET and not resp.vote_granted


def test_pre_vote_changes_no_durable_state_then_candidacy_is_persisted_first() -> None:
    core = make_core()
    deadline = core.next_deadline_ms()
    effects = core.tick(deadline)
    assert not [e for e in effects if isinstance(e, PersistElectionState)]
    requests = [e.message for e in effects if isinstance(e, Send)]
    assert {(r.candidate_epoch, r.pre_vote) for r in requests} == {(1, True)}
    assert core.epoch == 0 and core.role_name == "prospective"
    # One pre-vote grant makes a majority of 3 with our own: now the real candidacy.
    effects = core.handle(2, VoteResponse(ErrorCode.NONE, None, 0, True, 1, True), deadline + 1)
    assert effects[0] == PersistElectionState(ElectionState(1, voted_id=1))
    votes = [e for e in effects if isinstance(e, Send)]
    assert {(v.message.candidate_epoch, v.message.pre_vote) for v in votes} == {(1, False)}
    assert effects.index(votes[0]) > 0


def test_pre_vote_grants_change_nothing_on_the_voter() -> None:
    core = make_core(state=ElectionState(3, voted_id=2))
    (resp,) = responses(core.handle(3, VoteRequest(4, 3, 0, 0, pre_vote=True), 0))
    assert resp.vote_granted and resp.pre_vote
    assert core.election_state == ElectionState(3, voted_id=2)


def test_follower_that_fetched_recently_rejects_pre_votes() -> None:
    core = make_core(node_id=2, state=ElectionState(1, leader_id=1))
    core.tick(0)  # sends its first fetch
    fetched = FetchResponse(ErrorCode.NONE, 1, 1, 0, 0, 0, ())
    core.handle(1, fetched, 10)
    (resp,) = responses(core.handle(3, VoteRequest(2, 3, 0, 0, pre_vote=True), 20))
    assert not resp.vote_granted and resp.leader_id == 1 and resp.leader_epoch == 1
    # After a fetch timeout without hearing from the leader it grants (KIP-996).
    later = 10 + RaftConfig().fetch_timeout_ms
    (resp,) = responses(core.handle(3, VoteRequest(2, 3, 0, 0, pre_vote=True), later))
    assert resp.vote_granted


def test_election_timeouts_are_uniform_in_t_to_2t() -> None:
    timeouts = [make_core(seed=s).next_deadline_ms() for s in range(300)]
    assert all(1000 <= t < 2000 for t in timeouts)
    assert min(timeouts) < 1100 and max(timeouts) > 1900


def test_restarted_voter_never_votes_twice_in_an_epoch() -> None:
    log = MemLog()
    core = make_core(node_id=3, log=log)
    effects = core.handle(1, VoteRequest(7, 1, 0, 0), 0)
    persisted = [e.state for e in effects if isinstance(e, PersistElectionState)][-1]
    assert persisted == ElectionState(7, voted_id=1)
    # kill -9; restart from the persisted state and the flushed log.
    log.crash()
    restarted = make_core(node_id=3, log=log, state=persisted, seed=1)
    (resp,) = responses(restarted.handle(2, VoteRequest(7, 2, 5, 50), 0))
    assert not resp.vote_granted
    assert restarted.election_state == ElectionState(7, voted_id=1)


def test_restarted_candidate_keeps_its_self_vote() -> None:
    state = ElectionState(4, voted_id=1)
    core = make_core(node_id=1, state=state)
    (resp,) = responses(core.handle(2, VoteRequest(4, 2, 9, 9), 0))
    assert not resp.vote_granted


def test_restarted_leader_comes_back_resigned_and_rejoins_the_new_leader() -> None:
    c = Cluster()
    old = c.wait_for_leader()
    c.commit(old.node_id, b"a")
    c.stop(old.node_id)
    new = c.wait_for_leader()
    assert new.core.epoch >= 2
    back = c.restart(old.node_id)
    assert back.core.role_name == "resigned" and back.core.leader_id is None
    c.advance(3000)
    assert back.core.leader_id == new.node_id and back.core.epoch == new.core.epoch
    assert c.leader() is new
    assert back.committed[1] == (1, b"a", False)
