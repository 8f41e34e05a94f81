"""Heartbeat, session expiry and LeaveGroup, with explicit times: a session ends exactly at the
last heartbeat + session.timeout.ms."""

from __future__ import annotations

from coordinator import GroupCoordinatorConfig, GroupState, MemberIdentity, decode_key, decode_value
from coordinator.records import GroupMetadataValue
from quorum.metadata.errors import Errors
from tests.coordinator.driver import Broker, stable_group

S = GroupState


def test_heartbeat_answers_by_state() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    assert b.heartbeat("g", ids[1], generation) is Errors.NONE
    assert b.heartbeat("g", ids[1], generation - 1) is Errors.ILLEGAL_GENERATION
    assert b.heartbeat("g", "ghost", generation) is Errors.UNKNOWN_MEMBER_ID
    assert b.heartbeat("nogroup", ids[1], generation) is Errors.UNKNOWN_MEMBER_ID
    assert b.heartbeat("", ids[1], generation) is Errors.INVALID_GROUP_ID
    b.join("g", ids[0])  # the leader rejoins: PreparingRebalance
    assert b.heartbeat("g", ids[1], generation) is Errors.REBALANCE_IN_PROGRESS


def test_a_session_ends_exactly_at_the_last_heartbeat_plus_the_session_timeout() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)  # session.timeout.ms 10000
    start = b.now_ms
    b.advance_to(start + 4_000)
    assert b.heartbeat("g", ids[0], generation) is Errors.NONE
    assert b.heartbeat("g", ids[1], generation) is Errors.NONE
    b.advance_to(start + 8_000)
    assert b.heartbeat("g", ids[0], generation) is Errors.NONE
    b.advance_to(start + 13_999)  # ids[1]: last heartbeat at 4000
    assert b.state("g") is S.STABLE
    b.advance_to(start + 14_000)
    assert b.state("g") is S.PREPARING_REBALANCE
    assert list(b.group("g").members) == [ids[0]]  # type: ignore[union-attr]
    assert b.heartbeat("g", ids[1], generation) is Errors.UNKNOWN_MEMBER_ID


def test_an_offset_commit_counts_as_a_heartbeat() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 1)
    start = b.now_ms
    b.advance_to(start + 9_000)
    _, response = b.commit("g", {("t", 0): 1}, generation=generation, member_id=ids[0])
    assert response.topics[0].partitions[0].error is Errors.NONE
    b.advance_to(start + 18_999)
    assert b.state("g") is S.STABLE
    b.advance_to(start + 19_000)
    # The only member expired: the rebalance finds nobody and the group is Empty, persisted.
    assert b.state("g") is S.EMPTY
    assert b.group("g").generation_id == generation + 1  # type: ignore[union-attr]


def test_the_last_member_expiring_empties_the_group_and_writes_it() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 1)
    b.advance(10_000)
    assert b.state("g") is S.EMPTY
    last = b.logs[b.coord.partition_for("g")][-1]
    value = decode_value(decode_key(last.key), last.value)  # type: ignore[arg-type]
    assert isinstance(value, GroupMetadataValue)
    assert (value.generation, value.members, value.protocol, value.leader) == (
        generation + 1,
        (),
        None,
        None,
    )


def test_a_pending_member_that_never_comes_back_expires_after_its_session() -> None:
    b = Broker()
    _, response = b.join("g", session_ms=7_000)
    assert response.error is Errors.MEMBER_ID_REQUIRED
    b.advance(6_999)
    assert b.group("g").pending_join_members == {response.member_id}  # type: ignore[union-attr]
    b.advance(1)
    assert b.group("g").pending_join_members == set()  # type: ignore[union-attr]
    # Its id no longer works.
    assert b.join("g", response.member_id)[1].error is Errors.UNKNOWN_MEMBER_ID


def test_a_new_member_stuck_in_its_first_join_times_out() -> None:
    config = GroupCoordinatorConfig(
        offsets_topic_num_partitions=1, new_member_join_timeout_ms=20_000
    )
    b = Broker(config)
    ids, generation = stable_group(b, "g", 1)
    start = b.now_ms
    rid, _ = b.join("g", version=3, rebalance_ms=300_000, session_ms=60_000)
    assert b.state("g") is S.PREPARING_REBALANCE
    for t in range(5_000, 20_000, 5_000):  # the old member heartbeats but never rejoins
        b.advance_to(start + t)
        assert b.heartbeat("g", ids[0], generation) is Errors.REBALANCE_IN_PROGRESS
    # The join phase could last the new member's 300 s rebalance timeout, but a new member
    # waits at most group.classic.new.member.join.timeout.ms: at 20 s it is removed.
    b.advance_to(start + 19_999)
    assert rid not in b.responses
    b.advance_to(start + 20_000)
    assert (b.responses[rid].error, b.responses[rid].member_id) == (Errors.UNKNOWN_MEMBER_ID, "")
    assert list(b.group("g").members) == [ids[0]]  # type: ignore[union-attr]
    assert b.state("g") is S.PREPARING_REBALANCE


def test_leave_group_batch() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 3)
    response = b.leave("g", MemberIdentity(ids[1], reason="shutdown"), MemberIdentity("ghost"),
                       MemberIdentity(ids[2]))  # fmt: skip
    assert response.error is Errors.NONE
    assert [(m.member_id, m.error) for m in response.members] == [
        (ids[1], Errors.NONE),
        ("ghost", Errors.UNKNOWN_MEMBER_ID),
        (ids[2], Errors.NONE),
    ]
    # Members left a Stable group: rebalance; the leader is the only one and has not rejoined.
    assert b.state("g") is S.PREPARING_REBALANCE
    assert list(b.group("g").members) == [ids[0]]  # type: ignore[union-attr]


def test_leave_of_everyone_during_the_join_phase_empties_the_group() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    rid, _ = b.join("g", ids[0])
    b.leave("g", MemberIdentity(ids[0]), MemberIdentity(ids[1]))
    assert b.responses[rid].error is Errors.UNKNOWN_MEMBER_ID  # its parked join
    assert b.state("g") is S.EMPTY
    assert b.group("g").generation_id == generation + 1  # type: ignore[union-attr]


def test_leave_errors() -> None:
    b = Broker()
    ids, _ = stable_group(b, "g", 1)
    response = b.leave("nogroup", MemberIdentity("m"))
    assert (response.error, response.members[0].error) == (Errors.NONE, Errors.UNKNOWN_MEMBER_ID)
    assert b.leave("", MemberIdentity("m")).error is Errors.INVALID_GROUP_ID
    # An instance id that is not the member's: fenced.
    response = b.leave("g", MemberIdentity(ids[0], group_instance_id="other"))
    assert response.members[0].error is Errors.UNKNOWN_MEMBER_ID
    assert b.state("g") is S.STABLE


def test_a_pending_member_may_leave() -> None:
    b = Broker()
    _, pending = b.join("g")
    response = b.leave("g", MemberIdentity(pending.member_id))
    assert response.members[0].error is Errors.NONE
    assert b.group("g").pending_join_members == set()  # type: ignore[union-attr]
