"""Static membership (KIP-345): a group.instance.id keeps its place across restarts. A rejoin
without member id takes over the old member id (no rebalance when nothing changed), the old id is
fenced (FENCED_INSTANCE_ID), and static members are not dropped for missing a join phase."""

from __future__ import annotations

from coordinator import GroupState, JoinGroupProtocol, MemberIdentity, decode_key, decode_value
from coordinator.records import GroupMetadataValue
from quorum.metadata.errors import Errors
from tests.coordinator.driver import Broker, stable_group

S = GroupState


def last_group_record(b: Broker, group: str) -> GroupMetadataValue:
    record = b.logs[b.coord.partition_for(group)][-1]
    key = decode_key(record.key)
    assert key is not None
    value = decode_value(key, record.value)
    assert isinstance(value, GroupMetadataValue)
    return value


def test_static_member_ids_come_from_the_instance_id_without_a_member_id_round() -> None:
    b = Broker()
    ids, _ = stable_group(b, "g", 2, instances=("alpha", "beta"))
    assert sorted(ids) == ["alpha-1", "beta-2"]
    assert {m.group_instance_id for m in last_group_record(b, "g").members} == {"alpha", "beta"}


def test_a_restarted_static_follower_takes_over_without_a_rebalance() -> None:
    b = Broker(auto_commit=False)
    ids, generation = stable_group_manual(b, ("alpha", "beta"))
    follower = ids[1]
    rid, parked = b.join("g", instance="beta", version=5)
    new_id = "beta-3"
    # Nothing the assignment depends on changed: the new member id is persisted, no rebalance,
    # and the answer waits for the record to be committed.
    assert parked is None and b.state("g") is S.STABLE
    group = b.group("g")
    assert group is not None and group.static_members["beta"] == new_id
    assert (
        follower not in group.members
        and group.members[new_id].assignment == f"a-{follower}".encode()
    )
    b.complete()
    response = b.responses[rid]
    assert (response.error, response.member_id, response.generation_id) == (
        Errors.NONE,
        new_id,
        generation,
    )
    assert response.members == () and response.leader == ids[0]
    assert {m.member_id for m in last_group_record(b, "g").members} == {ids[0], new_id}
    # The old incarnation is a zombie: fenced.
    assert b.heartbeat("g", follower, generation, instance="beta") is Errors.FENCED_INSTANCE_ID
    assert b.heartbeat("g", new_id, generation, instance="beta") is Errors.NONE
    assert (
        b.sync("g", new_id, generation, instance="beta")[1].assignment == f"a-{follower}".encode()
    )


def test_a_restarted_static_leader_on_v9_skips_the_assignment() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2, instances=("alpha", "beta"))
    _, response = b.join("g", instance="alpha", version=9)
    # KIP-814: it is told it leads, with the members, but must not reassign.
    assert (response.error, response.leader, response.skip_assignment) == (
        Errors.NONE,
        response.member_id,
        True,
    )
    assert {m.group_instance_id for m in response.members} == {"alpha", "beta"}
    assert b.state("g") is S.STABLE and b.group("g").generation_id == generation  # type: ignore[union-attr]


def test_a_restarted_static_leader_before_v9_is_not_told_it_leads() -> None:
    b = Broker()
    ids, _ = stable_group(b, "g", 2, instances=("alpha", "beta"))
    _, response = b.join("g", instance="alpha", version=8)
    assert response.error is Errors.NONE
    assert response.leader == ids[0] != response.member_id  # the old leader id
    assert response.members == ()


def test_a_static_rejoin_with_another_protocol_rebalances() -> None:
    b = Broker()
    _, generation = stable_group(b, "g", 1, instances=("alpha",))
    prefers_rr = (JoinGroupProtocol("roundrobin", b"rr"), JoinGroupProtocol("range", b""))
    _, response = b.join("g", instance="alpha", protocols=prefers_rr)
    # The only member now prefers roundrobin: the protocol would change, so rebalance (and as
    # everyone has rejoined, the join phase completes at once).
    assert (response.generation_id, response.protocol_name) == (generation + 1, "roundrobin")
    assert b.state("g") is S.COMPLETING_REBALANCE


def test_failed_write_puts_the_old_member_id_back() -> None:
    b = Broker(auto_commit=False)
    ids, generation = stable_group_manual(b, ("alpha", "beta"))
    rid, _ = b.join("g", instance="beta")
    b.complete(error=Errors.NOT_ENOUGH_REPLICAS)
    response = b.responses[rid]
    assert (response.error, response.member_id) == (Errors.COORDINATOR_NOT_AVAILABLE, "")
    group = b.group("g")
    assert group is not None and group.static_members["beta"] == ids[1]
    assert b.heartbeat("g", ids[1], generation, instance="beta") is Errors.NONE


def test_a_static_rejoin_during_completing_rebalance_rebalances_again() -> None:
    b = Broker()
    rids = [b.join("g", instance=i)[0] for i in ("alpha", "beta")]
    b.advance(6_000)
    assert b.state("g") is S.COMPLETING_REBALANCE
    generation = b.responses[rids[0]].generation_id
    r_sync, _ = b.sync("g", b.responses[rids[1]].member_id, generation, instance="beta")
    rid, _ = b.join("g", instance="beta")  # restarted before the assignment came
    assert b.responses[r_sync].error is Errors.FENCED_INSTANCE_ID
    assert b.state("g") is S.PREPARING_REBALANCE
    assert rid not in b.responses


def test_static_members_stay_through_a_join_phase_they_miss() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2, instances=("alpha", "beta"))
    rid, _ = b.join("g", ids[0], instance="alpha", session_ms=60_000)
    start = b.now_ms
    for t in range(5_000, 30_000, 5_000):  # beta heartbeats but does not rejoin
        b.advance_to(start + t)
        assert b.heartbeat("g", ids[1], generation, instance="beta") is Errors.REBALANCE_IN_PROGRESS
    b.advance_to(start + 30_000)  # the rebalance timeout: beta stays (static), with its metadata
    response = b.responses[rid]
    assert response.generation_id == generation + 1
    assert {m.member_id for m in response.members} == set(ids)


def test_a_static_leader_missing_the_join_phase_hands_leadership_to_a_member_that_joined() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2, instances=("alpha", "beta"))
    rid, _ = b.join("g", ids[1], instance="beta", protocols=(JoinGroupProtocol("range", b"x"),),
                    session_ms=60_000)  # fmt: skip
    start = b.now_ms
    for t in range(5_000, 30_001, 5_000):
        b.advance_to(start + t)
        b.heartbeat("g", ids[0], generation, instance="alpha")
    assert b.responses[rid].leader == ids[1]
    assert set(b.group("g").members) == set(ids)  # type: ignore[union-attr]


def test_admin_removes_a_static_member_by_instance_id() -> None:
    b = Broker()
    ids, _ = stable_group(b, "g", 2, instances=("alpha", "beta"))
    response = b.leave(
        "g",
        MemberIdentity("", group_instance_id="beta"),
        MemberIdentity("", group_instance_id="nope"),
    )
    assert [m.error for m in response.members] == [Errors.NONE, Errors.UNKNOWN_MEMBER_ID]
    assert list(b.group("g").members) == [ids[0]]  # type: ignore[union-attr]
    # A member with the wrong member id for an instance: FENCED_INSTANCE_ID.
    response = b.leave("g", MemberIdentity("alpha-99", group_instance_id="alpha"))
    assert response.members[0].error is Errors.FENCED_INSTANCE_ID


def test_static_commit_with_a_fenced_member_id() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 1, instances=("alpha",))
    _, response = b.commit(
        "g", {("t", 0): 5}, generation=generation, member_id="alpha-0", instance="alpha"
    )
    assert response.topics[0].partitions[0].error is Errors.FENCED_INSTANCE_ID
    _, response = b.commit(
        "g", {("t", 0): 5}, generation=generation, member_id=ids[0], instance="alpha"
    )
    assert response.topics[0].partitions[0].error is Errors.NONE


def stable_group_manual(b: Broker, instances: tuple[str, ...]) -> tuple[list[str], int]:
    """stable_group for a broker that commits appends only when told (it commits the sync)."""
    rids = [b.join("g", instance=i, client=f"c{n}")[0] for n, i in enumerate(instances)]
    while not all(r in b.responses for r in rids):
        b.advance(3_000)
    leader = b.responses[rids[0]].leader
    generation = b.responses[rids[0]].generation_id
    ids = [leader] + [b.responses[r].member_id for r in rids if b.responses[r].member_id != leader]
    b.sync("g", leader, generation, {m: f"a-{m}".encode() for m in ids}, instance=instances[0])
    b.complete()
    for member, instance in zip(ids[1:], instances[1:], strict=True):
        b.sync("g", member, generation, instance=instance)
    assert b.state("g") is S.STABLE
    return ids, generation
