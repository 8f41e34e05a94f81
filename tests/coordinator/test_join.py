"""JoinGroup: member ids (KIP-394), the initial rebalance delay (KIP-134), protocol selection,
leader election and the errors Kafka answers, with exact times."""

from __future__ import annotations

from coordinator import (
    GroupCoordinatorConfig,
    GroupState,
    JoinGroupProtocol,
    JoinGroupResponseMember,
)
from quorum.metadata.errors import Errors
from tests.coordinator.driver import CONFIG, Broker, stable_group

S = GroupState
DELAY = CONFIG.group_initial_rebalance_delay_ms  # 3000


def test_new_member_first_gets_its_id_then_waits_out_the_initial_delay() -> None:
    b = Broker()
    _, first = b.join("g", version=4, client="app")
    # KIP-394: v4+ hands out the id and asks to come back with it; nothing joined yet.
    assert (first.error, first.member_id) == (Errors.MEMBER_ID_REQUIRED, "app-1")
    assert b.state("g") is S.EMPTY
    group = b.group("g")
    assert group is not None and group.pending_join_members == {"app-1"} and not group.members

    rid, parked = b.join("g", "app-1", version=4)
    assert parked is None  # parked in PreparingRebalance
    assert b.state("g") is S.PREPARING_REBALANCE
    b.advance(DELAY - 1)
    assert rid not in b.responses
    b.advance(1)  # t = 3000: the initial delay is over, nobody else came
    response = b.responses[rid]
    assert (response.error, response.generation_id, response.leader) == (Errors.NONE, 1, "app-1")
    assert response.protocol_type == "consumer" and response.protocol_name == "range"
    assert response.members == (JoinGroupResponseMember("app-1", None, b"sub-range"),)
    assert b.state("g") is S.COMPLETING_REBALANCE


def test_old_clients_join_without_a_member_id_round() -> None:
    b = Broker()
    rid, response = b.join("g", version=3, client="old")
    assert response is None
    b.advance(DELAY)
    assert (b.responses[rid].error, b.responses[rid].member_id) == (Errors.NONE, "old-1")


def test_members_arriving_during_the_initial_delay_extend_it_up_to_the_rebalance_timeout() -> None:
    b = Broker()
    r1, _ = b.join("g", version=3, rebalance_ms=10_000)
    b.advance(2_000)
    r2, _ = b.join("g", version=3, rebalance_ms=10_000)
    # At 3000 a member was added: wait min(delay, remaining = 10000 - 3000) = 3000 more.
    b.advance_to(5_999)
    assert r1 not in b.responses and r2 not in b.responses
    b.advance_to(6_000)
    assert b.responses[r1].generation_id == b.responses[r2].generation_id == 1
    assert b.state("g") is S.COMPLETING_REBALANCE


def test_the_delay_never_outlasts_the_rebalance_timeout() -> None:
    b = Broker()
    first, _ = b.join("g", version=3, rebalance_ms=5_000)  # delay 3000, remaining 2000
    b.advance_to(1_000)
    b.join("g", version=3, rebalance_ms=5_000)
    b.advance_to(3_500)  # at 3000: extended by min(3000, 2000) = 2000, nothing remains after
    b.join("g", version=3, rebalance_ms=5_000)
    b.advance_to(4_999)
    assert first not in b.responses
    b.advance_to(5_000)  # a member came at 3500, but no time remains: complete
    assert b.responses[first].error is Errors.NONE
    assert len(b.responses[first].members) == 3


def test_a_rejoin_completes_at_once_when_everybody_is_back() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    r_leader, _ = b.join("g", ids[0])  # the leader asks for a rebalance
    assert b.state("g") is S.PREPARING_REBALANCE
    assert b.heartbeat("g", ids[1], generation) is Errors.REBALANCE_IN_PROGRESS
    r_follower, _ = b.join("g", ids[1])
    # Not an initial rebalance: no delay once everyone has rejoined.
    leader, follower = b.responses[r_leader], b.responses[r_follower]
    assert leader.generation_id == follower.generation_id == generation + 1
    assert leader.leader == follower.leader == ids[0]
    assert [m.member_id for m in leader.members] == ids and follower.members == ()


def test_protocol_most_members_prefer_among_those_all_support() -> None:
    b = Broker()
    rr, rg, sticky = (JoinGroupProtocol(n, n.encode()) for n in ("roundrobin", "range", "sticky"))
    r1, _ = b.join("g", version=3, protocols=(sticky, rr, rg))
    b.join("g", version=3, protocols=(rr, rg))
    b.join("g", version=3, protocols=(rg, rr))
    b.join("g", version=3, protocols=(rr, rg, sticky))
    b.advance(3 * DELAY)
    # Candidates: roundrobin, range (sticky lacks support). Votes: rr 3, range 1.
    response = b.responses[r1]
    assert response.protocol_name == "roundrobin"
    assert {m.metadata for m in response.members} == {b"roundrobin"}


def test_join_errors() -> None:
    b = Broker()
    assert b.join("", version=3)[1].error is Errors.INVALID_GROUP_ID
    assert b.join("g", session_ms=5_999)[1].error is Errors.INVALID_SESSION_TIMEOUT
    assert b.join("g", session_ms=1_800_001)[1].error is Errors.INVALID_SESSION_TIMEOUT
    # A member id for a group that does not exist.
    _, unknown = b.join("g", "ghost-9")
    assert (unknown.error, unknown.member_id) == (Errors.UNKNOWN_MEMBER_ID, "ghost-9")
    assert b.join("g", version=3, protocol_type="")[1].error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert b.group("g") is None  # failed joins leave no group behind
    assert b.join("g", version=3, protocols=())[1].error is Errors.INCONSISTENT_GROUP_PROTOCOL
    ids, _ = stable_group(b, "h", 1)
    # Another protocol type, or no protocol in common with the members.
    assert (
        b.join("h", version=3, protocol_type="connect")[1].error
        is Errors.INCONSISTENT_GROUP_PROTOCOL
    )
    other = (JoinGroupProtocol("sticky", b""),)
    assert b.join("h", version=3, protocols=other)[1].error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert b.join("h", ids[0], protocols=other)[1].error is Errors.INCONSISTENT_GROUP_PROTOCOL


def test_a_member_id_the_group_does_not_know() -> None:
    b = Broker()
    stable_group(b, "g", 1)
    _, response = b.join("g", "c0-99")
    assert (response.error, response.member_id) == (Errors.UNKNOWN_MEMBER_ID, "c0-99")
    assert b.state("g") is S.STABLE


def test_a_follower_rejoining_a_stable_group_unchanged_gets_the_generation_back() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    _, response = b.join("g", ids[1])
    assert (response.error, response.generation_id, response.leader) == (
        Errors.NONE,
        generation,
        ids[0],
    )
    assert response.members == () and b.state("g") is S.STABLE


def test_changed_metadata_rebalances() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    rid, parked = b.join("g", ids[1], protocols=(JoinGroupProtocol("range", b"new-topics"),))
    assert parked is None and b.state("g") is S.PREPARING_REBALANCE
    b.join("g", ids[0])
    assert b.responses[rid].generation_id == generation + 1
    leader = b.group("g")
    assert leader is not None and leader.members[ids[1]].metadata("range") == b"new-topics"


def test_a_leader_that_does_not_rejoin_is_replaced_and_removed() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 3)
    # A follower's subscription changed: rebalance. The leader stays silent.
    r2, _ = b.join("g", ids[1], protocols=(JoinGroupProtocol("range", b"more-topics"),))
    r3, _ = b.join("g", ids[2])
    b.advance(9_999)
    assert b.state("g") is S.PREPARING_REBALANCE
    # The leader's session (10 s from its last sync) expires; the waiting members' do not
    # (they are awaiting join). Everyone left has rejoined: complete, with a new leader.
    b.advance(1)
    assert b.state("g") is S.COMPLETING_REBALANCE
    assert b.responses[r2].leader == b.responses[r3].leader == ids[1]
    assert b.responses[r2].generation_id == generation + 1
    assert list(b.group("g").members) == ids[1:]  # type: ignore[union-attr]


def test_a_silent_member_is_dropped_when_its_session_expires_during_the_join_phase() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    rid, _ = b.join("g", ids[0], rebalance_ms=5_000, session_ms=60_000)
    start = b.now_ms  # the follower's last heartbeat (its sync) was now: session timeout 10 s
    b.advance_to(start + 9_999)
    assert rid not in b.responses
    b.advance_to(start + 10_000)
    assert b.responses[rid].generation_id == generation + 1
    assert list(b.group("g").members) == [ids[0]]  # type: ignore[union-attr]


def test_a_member_heartbeating_but_not_rejoining_is_dropped_at_the_rebalance_timeout() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    rid, _ = b.join("g", ids[0], rebalance_ms=5_000)
    start = b.now_ms
    for t in range(2_000, 30_000, 2_000):  # heartbeats keep the follower's session alive
        b.advance_to(start + t)
        assert b.heartbeat("g", ids[1], generation) is Errors.REBALANCE_IN_PROGRESS
    # The rebalance timeout is the longest of the members' (the follower's 30 s).
    b.advance_to(start + 29_999)
    assert rid not in b.responses
    b.advance_to(start + 30_000)
    assert b.responses[rid].generation_id == generation + 1
    assert list(b.group("g").members) == [ids[0]]  # type: ignore[union-attr]
    # The dropped member learns it on its next heartbeat.
    assert b.heartbeat("g", ids[1], generation) is Errors.UNKNOWN_MEMBER_ID


def test_group_max_size() -> None:
    b = Broker(GroupCoordinatorConfig(offsets_topic_num_partitions=1, group_max_size=2))
    stable_group(b, "g", 2)
    _, response = b.join("g", version=3)
    assert (response.error, response.member_id) == (Errors.GROUP_MAX_SIZE_REACHED, "")
    assert len(b.group("g").members) == 2  # type: ignore[union-attr]


def test_a_superseded_parked_join_is_still_answered_once() -> None:
    b = Broker()
    ids, _ = stable_group(b, "g", 2)
    first, _ = b.join("g", ids[0])
    second, _ = b.join("g", ids[0])  # the client retried on another connection
    assert b.responses[first].error is Errors.REBALANCE_IN_PROGRESS
    assert second not in b.responses
    b.join("g", ids[1])
    assert b.responses[second].error is Errors.NONE
