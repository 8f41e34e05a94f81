"""SyncGroup: the leader's assignment is stored before anyone gets it; followers wait for it;
REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID and INCONSISTENT_GROUP_PROTOCOL as
Kafka answers them; the sync deadline."""

from __future__ import annotations

from coordinator import GroupState, JoinGroupProtocol, decode_key, decode_value
from coordinator.records import GroupMetadataKey, GroupMetadataValue
from quorum.metadata.errors import Errors
from tests.coordinator.driver import CONFIG, Broker

S = GroupState
NEW_SUBSCRIPTION = (JoinGroupProtocol("range", b"more-topics"),)


def completing(b: Broker, n: int) -> tuple[list[str], int]:
    """`n` members through the join phase: CompletingRebalance, nobody synced yet."""
    rids = [b.join("g", version=3, client=f"c{i}")[0] for i in range(n)]
    while not all(r in b.responses for r in rids):  # now: the moment the join phase completed
        b.advance(CONFIG.group_initial_rebalance_delay_ms)
    leader = b.responses[rids[0]].leader
    ids = [leader] + [b.responses[r].member_id for r in rids if b.responses[r].member_id != leader]
    assert b.state("g") is S.COMPLETING_REBALANCE
    return ids, b.responses[rids[0]].generation_id


def test_followers_wait_for_the_leaders_assignment_and_it_is_stored_first() -> None:
    b = Broker(auto_commit=False)
    (leader, follower), generation = completing(b, 2)
    r_follower, parked = b.sync("g", follower, generation)
    assert parked is None
    r_leader, _ = b.sync("g", leader, generation, {leader: b"L", follower: b"F"})
    # The assignment is being written: nobody has it, the group is not Stable yet.
    assert b.state("g") is S.COMPLETING_REBALANCE
    assert r_leader not in b.responses and r_follower not in b.responses
    (append,) = b.pending
    (record,) = append.records
    key = decode_key(record.key)
    assert key == GroupMetadataKey("g")
    value = decode_value(key, record.value)
    assert isinstance(value, GroupMetadataValue)
    assert (value.generation, value.leader, value.protocol) == (generation, leader, "range")
    assert {m.member_id: m.assignment for m in value.members} == {leader: b"L", follower: b"F"}

    b.complete()
    assert b.state("g") is S.STABLE
    assert (b.responses[r_leader].error, b.responses[r_leader].assignment) == (Errors.NONE, b"L")
    assert (b.responses[r_follower].error, b.responses[r_follower].assignment) == (
        Errors.NONE,
        b"F",
    )
    assert b.responses[r_follower].protocol_name == "range"
    # Stable: a late SyncGroup gets its assignment at once.
    assert b.sync("g", follower, generation)[1].assignment == b"F"


def test_members_the_leader_left_out_get_an_empty_assignment() -> None:
    b = Broker()
    (leader, follower), generation = completing(b, 2)
    r_follower, _ = b.sync("g", follower, generation)
    b.sync("g", leader, generation, {leader: b"L"})
    assert (b.responses[r_follower].error, b.responses[r_follower].assignment) == (Errors.NONE, b"")


def test_a_failed_write_tells_every_waiting_member_and_rebalances() -> None:
    b = Broker(auto_commit=False)
    (leader, follower), generation = completing(b, 2)
    r_follower, _ = b.sync("g", follower, generation)
    r_leader, _ = b.sync("g", leader, generation, {leader: b"L", follower: b"F"})
    b.complete(error=Errors.NOT_LEADER_OR_FOLLOWER)
    for rid in (r_leader, r_follower):
        assert (b.responses[rid].error, b.responses[rid].assignment) == (
            Errors.NOT_COORDINATOR,
            b"",
        )
    assert b.state("g") is S.PREPARING_REBALANCE
    assert b.group("g").generation_id == generation  # type: ignore[union-attr]


def test_a_timed_out_write_is_coordinator_not_available() -> None:
    b = Broker(auto_commit=False)
    (leader,), generation = completing(b, 1)
    rid, _ = b.sync("g", leader, generation, {leader: b"L"})
    b.complete(error=Errors.REQUEST_TIMED_OUT)
    assert b.responses[rid].error is Errors.COORDINATOR_NOT_AVAILABLE


def test_a_write_finishing_after_the_group_moved_on_changes_nothing() -> None:
    b = Broker(auto_commit=False)
    (leader, follower), generation = completing(b, 2)
    r_leader, _ = b.sync("g", leader, generation, {leader: b"L", follower: b"F"})
    # The follower rejoins with a new subscription while the assignment is being written: the
    # leader, waiting for its assignment, is told to rejoin.
    r_join, _ = b.join("g", follower, protocols=NEW_SUBSCRIPTION)
    assert b.responses[r_leader].error is Errors.REBALANCE_IN_PROGRESS
    b.complete()
    assert b.state("g") is S.PREPARING_REBALANCE
    assert r_join not in b.responses
    assert b.group("g").members[leader].assignment == b""  # type: ignore[union-attr]


def test_sync_errors() -> None:
    b = Broker()
    (leader, follower), generation = completing(b, 2)
    assert b.sync("g", follower, generation + 1)[1].error is Errors.ILLEGAL_GENERATION
    assert b.sync("g", "nobody", generation)[1].error is Errors.UNKNOWN_MEMBER_ID
    assert b.sync("nogroup", leader, generation)[1].error is Errors.UNKNOWN_MEMBER_ID
    assert b.sync("", leader, generation)[1].error is Errors.INVALID_GROUP_ID
    _, wrong = b.sync("g", follower, generation, protocol_name="roundrobin")
    assert wrong.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    # A rebalance is preparing: REBALANCE_IN_PROGRESS.
    b.join("g", leader, protocols=NEW_SUBSCRIPTION)
    assert b.sync("g", follower, generation)[1].error is Errors.REBALANCE_IN_PROGRESS


def test_sync_to_an_empty_group_is_unknown_member() -> None:
    b = Broker()
    b.commit("simple", {("t", 0): 1})  # an Empty group that only holds offsets
    assert b.state("simple") is S.EMPTY
    assert b.sync("simple", "m", 0)[1].error is Errors.UNKNOWN_MEMBER_ID


def test_a_member_that_missed_its_join_answer_gets_it_again() -> None:
    b = Broker()
    (leader, follower), generation = completing(b, 2)
    _, again = b.join("g", follower)
    assert (again.error, again.generation_id, again.leader) == (Errors.NONE, generation, leader)
    _, leader_again = b.join("g", leader)
    assert [m.member_id for m in leader_again.members] == [leader, follower]
    assert b.state("g") is S.COMPLETING_REBALANCE


def test_members_that_never_sync_are_removed_at_the_rebalance_timeout() -> None:
    b = Broker()
    (leader, follower), generation = completing(b, 2)
    start = b.now_ms
    r_follower, _ = b.sync("g", follower, generation)
    for t in range(5_000, 30_000, 5_000):  # both keep their sessions alive
        b.advance_to(start + t)
        assert b.heartbeat("g", leader, generation) is Errors.NONE
    b.advance_to(start + 29_999)
    assert b.state("g") is S.COMPLETING_REBALANCE
    b.advance_to(start + 30_000)
    # The leader never sent SyncGroup: removed; the follower is told to rejoin.
    assert b.responses[r_follower].error is Errors.REBALANCE_IN_PROGRESS
    assert list(b.group("g").members) == [follower]  # type: ignore[union-attr]
    assert b.state("g") is S.PREPARING_REBALANCE


def test_a_retried_sync_supersedes_the_parked_one() -> None:
    b = Broker()
    (leader, follower), generation = completing(b, 2)
    first, _ = b.sync("g", follower, generation)
    second, _ = b.sync("g", follower, generation)
    assert b.responses[first].error is Errors.REBALANCE_IN_PROGRESS
    b.sync("g", leader, generation, {follower: b"F"})
    assert b.responses[second].assignment == b"F"
