"""ListGroups, DescribeGroups and DeleteGroups (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND; a delete
spanning offsets partitions answers once, when every partition's tombstones are committed)."""

from __future__ import annotations

from coordinator import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    GroupState,
    ListedGroup,
    ListGroupsRequest,
    decode_key,
)
from coordinator.records import GroupMetadataKey, OffsetCommitKey
from quorum.metadata.errors import Errors
from tests.coordinator.driver import Broker, stable_group

S = GroupState


def listed(
    b: Broker, states: tuple[str, ...] = (), types: tuple[str, ...] = ()
) -> set[ListedGroup]:
    _, response = b.send(ListGroupsRequest, api_version=5, states_filter=states, types_filter=types)
    assert response.error is Errors.NONE
    return set(response.groups)


def test_list_groups_with_filters() -> None:
    b = Broker()
    stable_group(b, "a", 1)  # partitions: "a" -> 1, "b" -> 2, "c" -> 0 of 3
    b.commit("b", {("t", 0): 1})
    b.join("c", version=3)
    everything = {ListedGroup("a", "consumer", "Stable"), ListedGroup("b", "", "Empty"),
                  ListedGroup("c", "consumer", "PreparingRebalance")}  # fmt: skip
    assert listed(b) == everything
    assert listed(b, states=("stable", " EMPTY ")) == everything - {
        ListedGroup("c", "consumer", "PreparingRebalance")
    }
    assert listed(b, types=("Classic",)) == everything
    assert listed(b, types=("consumer",)) == set()  # KIP-848 groups: none here


def test_describe_groups() -> None:
    b = Broker()
    ids, _ = stable_group(b, "a", 2)
    b.join("c", version=3, client="x")
    _, response = b.send(DescribeGroupsRequest, api_version=5, groups=("a", "c", "nope", None))
    a, c, nope, null = response.groups
    assert (a.error, a.group_state, a.protocol_type, a.protocol_data) == (
        Errors.NONE,
        "Stable",
        "consumer",
        "range",
    )
    assert [
        (m.member_id, m.client_id, m.member_metadata, m.member_assignment) for m in a.members
    ] == [
        (ids[0], "c0", b"sub-range", f"a-{ids[0]}".encode()),
        (ids[1], "c1", b"sub-range", f"a-{ids[1]}".encode()),
    ]
    # Not Stable: no protocol, no metadata.
    assert (c.group_state, c.protocol_data, c.members[0].member_metadata) == (
        "PreparingRebalance",
        "",
        b"",
    )
    assert (nope.error, nope.group_state, nope.members) == (Errors.NONE, "Dead", ())
    assert null.error is Errors.INVALID_GROUP_ID


def test_delete_groups_across_partitions_answers_once_every_tombstone_is_committed() -> None:
    b = Broker(auto_commit=False)
    b.commit("a", {("t", 0): 1, ("t", 1): 2})
    b.commit("b", {("t", 0): 3})
    b.complete()
    b.auto_commit = True
    stable_group(b, "g", 1)
    b.auto_commit = False
    rid, response = b.send(
        DeleteGroupsRequest, api_version=2, groups_names=("a", "g", "nope", None, "b")
    )
    assert response is None
    assert b.state("a") is b.state("b") is S.DEAD
    # While being deleted, the groups take nothing new.
    assert (
        b.commit("a", {("t", 0): 9})[1].topics[0].partitions[0].error
        is Errors.COORDINATOR_NOT_AVAILABLE
    )
    assert b.join("a", version=3)[1].error is Errors.COORDINATOR_NOT_AVAILABLE
    assert len(b.pending) == 2  # one append per offsets partition
    b.complete(1)
    assert rid not in b.responses
    b.complete(1)
    assert b.responses[rid].results == (
        DeletableGroupResult("a", Errors.NONE), DeletableGroupResult("g", Errors.NON_EMPTY_GROUP),
        DeletableGroupResult("nope", Errors.GROUP_ID_NOT_FOUND),
        DeletableGroupResult(None, Errors.INVALID_GROUP_ID), DeletableGroupResult("b", Errors.NONE),
    )  # fmt: skip
    assert b.group("a") is None and b.group("b") is None and b.fetch("a") == {}
    tombstones = [(decode_key(r.key), r.value) for r in b.logs[b.coord.partition_for("a")][-3:]]
    assert tombstones == [(OffsetCommitKey("a", "t", 0), None), (OffsetCommitKey("a", "t", 1), None),
                          (GroupMetadataKey("a"), None)]  # fmt: skip
    reloaded = b.reloaded()
    assert reloaded.group("a") is None and reloaded.group("b") is None
    assert reloaded.state("g") is S.STABLE


def test_a_failed_delete_leaves_the_group_and_its_offsets() -> None:
    b = Broker(auto_commit=False)
    b.commit("a", {("t", 0): 1})
    b.complete()
    rid, _ = b.send(DeleteGroupsRequest, api_version=2, groups_names=("a",))
    b.complete(error=Errors.NOT_LEADER_OR_FOLLOWER)
    assert b.responses[rid].results == (DeletableGroupResult("a", Errors.NOT_COORDINATOR),)
    assert b.state("a") is S.EMPTY and b.fetch("a") == {("t", 0): 1}


def test_delete_covers_a_commit_still_being_written() -> None:
    b = Broker(auto_commit=False)
    b.commit("a", {("t", 0): 1})
    b.complete()
    b.commit("a", {("t", 5): 7})  # in flight: its record lands before the tombstones
    rid, _ = b.send(DeleteGroupsRequest, api_version=2, groups_names=("a",))
    b.complete()
    assert b.responses[rid].results == (DeletableGroupResult("a", Errors.NONE),)
    assert b.group("a") is None
    assert b.reloaded().group("a") is None  # no offset of the group survives in the log
