"""OffsetCommit and OffsetFetch: who may commit (generation checks, simple commits with
generation -1), what the records look like, and when an offset becomes visible (once its record
is committed in `__consumer_offsets`)."""

from __future__ import annotations

import pytest

from coordinator import (
    GroupState,
    JoinGroupProtocol,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetFetchGroup,
    OffsetFetchPartitionResult,
    OffsetFetchRequest,
    OffsetFetchTopic,
    decode_key,
    decode_value,
)
from quorum.metadata.errors import Errors
from tests.coordinator.driver import Broker, stable_group

S = GroupState


def errors(response: object) -> list[Errors]:
    return [p.error for t in response.topics for p in t.partitions]  # type: ignore[attr-defined]


def test_a_member_commits_at_its_generation_and_the_record_is_kafkas() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    b.advance(123)
    _, response = b.commit("g", {("orders", 0): 42, ("orders", 1): 7}, generation=generation,
                           member_id=ids[1], metadata="m")  # fmt: skip
    assert errors(response) == [Errors.NONE, Errors.NONE]
    records = b.logs[b.coord.partition_for("g")][-2:]
    decoded = [(decode_key(r.key), r.value) for r in records]
    assert decoded[0][0] == OffsetCommitKey("g", "orders", 0)
    assert decode_value(decoded[0][0], decoded[0][1]) == OffsetCommitValue(42, "m", b.now_ms, 1)  # type: ignore[arg-type]
    assert b.fetch("g") == {("orders", 0): 42, ("orders", 1): 7}


@pytest.mark.parametrize(
    ("generation", "member", "instance", "expected"),
    [
        (0, "c1-2", None, Errors.ILLEGAL_GENERATION),  # a past generation
        (2, "c1-2", None, Errors.ILLEGAL_GENERATION),  # a future one
        (1, "nobody", None, Errors.UNKNOWN_MEMBER_ID),
        (1, "c1-2", "inst", Errors.UNKNOWN_MEMBER_ID),  # an instance id the group does not know
        (-1, "", None, Errors.UNKNOWN_MEMBER_ID),  # a simple commit to a group with members
        (-1, "c1-2", None, Errors.ILLEGAL_GENERATION),
    ],
)
def test_commit_validation(
    generation: int, member: str, instance: str | None, expected: Errors
) -> None:
    b = Broker()
    ids, current = stable_group(b, "g", 2)
    assert (ids[1], current) == ("c1-2", 1)
    _, response = b.commit(
        "g", {("t", 0): 1}, generation=generation, member_id=member, instance=instance
    )
    assert errors(response) == [expected]
    assert b.fetch("g") == {}


def test_commits_during_completing_rebalance_are_told_to_wait() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    b.join("g", ids[0])
    b.join("g", ids[1])  # everyone rejoined: CompletingRebalance of generation + 1
    assert b.state("g") is S.COMPLETING_REBALANCE
    _, response = b.commit("g", {("t", 0): 1}, generation=generation + 1, member_id=ids[1])
    assert errors(response) == [Errors.REBALANCE_IN_PROGRESS]


def test_commits_of_the_current_generation_are_accepted_while_preparing_a_rebalance() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    b.join("g", ids[1], protocols=(JoinGroupProtocol("range", b"more"),))
    assert b.state("g") is S.PREPARING_REBALANCE
    # The leader commits what it processed before giving its partitions up.
    _, response = b.commit("g", {("t", 0): 9}, generation=generation, member_id=ids[0])
    assert errors(response) == [Errors.NONE]
    assert b.fetch("g") == {("t", 0): 9}


def test_simple_commits_create_a_group_that_only_holds_offsets() -> None:
    b = Broker()
    _, response = b.commit("manual", {("t", 0): 3})
    assert errors(response) == [Errors.NONE]
    group = b.group("manual")
    assert group is not None and group.state is S.EMPTY and group.protocol_type is None
    assert b.fetch("manual") == {("t", 0): 3}
    # An Empty group (no members) takes more simple commits.
    _, response = b.commit("manual", {("t", 0): 4})
    assert errors(response) == [Errors.NONE]
    assert b.fetch("manual") == {("t", 0): 4}


def test_a_generation_for_a_group_that_does_not_exist() -> None:
    b = Broker()
    assert errors(b.commit("g", {("t", 0): 1}, generation=1, member_id="m")[1]) == [
        Errors.ILLEGAL_GENERATION
    ]
    # OffsetCommit v9+ says what is wrong.
    assert errors(b.commit("g", {("t", 0): 1}, generation=1, member_id="m", version=9)[1]) == [
        Errors.GROUP_ID_NOT_FOUND
    ]
    assert errors(b.commit(None, {("t", 0): 1})[1]) == [Errors.INVALID_GROUP_ID]


def test_too_long_metadata_fails_only_that_partition() -> None:
    b = Broker()
    _, response = b.commit("g", {("t", 0): 1}, metadata="x" * 4097)
    assert errors(response) == [Errors.OFFSET_METADATA_TOO_LARGE]
    assert b.group("g") is None  # nothing written, no group
    _, response = b.commit("g", {("t", 0): 1}, metadata="x" * 4096)
    assert errors(response) == [Errors.NONE]


def test_offsets_become_visible_when_their_record_is_committed() -> None:
    b = Broker(auto_commit=False)
    rid, parked = b.commit("g", {("t", 0): 10})
    assert parked is None
    assert b.fetch("g") == {}
    assert b.fetch("g", require_stable=True) == {}  # fetch-all lists committed offsets only
    stable_fetch = fetch_partitions(b, "g", {"t": (0, 1)}, require_stable=True)
    assert [p.error for p in stable_fetch] == [Errors.UNSTABLE_OFFSET_COMMIT, Errors.NONE]
    b.complete()
    assert errors(b.responses[rid]) == [Errors.NONE]
    assert b.fetch("g", require_stable=True) == {("t", 0): 10}


@pytest.mark.parametrize(
    ("append_error", "client_error"),
    [
        (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_COORDINATOR),
        (Errors.NOT_ENOUGH_REPLICAS, Errors.COORDINATOR_NOT_AVAILABLE),
        (Errors.REQUEST_TIMED_OUT, Errors.COORDINATOR_NOT_AVAILABLE),
        (Errors.MESSAGE_TOO_LARGE, Errors.UNKNOWN_SERVER_ERROR),
    ],
)
def test_a_failed_write_fails_the_commit(append_error: Errors, client_error: Errors) -> None:
    b = Broker(auto_commit=False)
    b.commit("g", {("t", 0): 10})
    b.complete()
    rid, _ = b.commit("g", {("t", 0): 11, ("t", 1): 5}, metadata="y" * 5000)
    assert b.pending == []  # every partition too large: nothing to write
    assert errors(b.responses[rid]) == [Errors.OFFSET_METADATA_TOO_LARGE] * 2
    rid, _ = b.commit("g", {("t", 0): 11})
    b.complete(error=append_error)
    assert errors(b.responses[rid]) == [client_error]
    assert b.fetch("g") == {("t", 0): 10}


def test_fetch_of_named_partitions_and_unknown_groups() -> None:
    b = Broker()
    b.commit("g", {("t", 0): 5})
    parts = fetch_partitions(b, "g", {"t": (0, 1), "u": (0,)})
    assert parts == [OffsetFetchPartitionResult(0, 5, 1, ""), OffsetFetchPartitionResult(1),
                     OffsetFetchPartitionResult(0)]  # fmt: skip
    assert fetch_partitions(b, "nogroup", {"t": (0,)}) == [OffsetFetchPartitionResult(0)]
    assert b.fetch("nogroup") == {}


def test_fetch_of_several_groups_at_once() -> None:
    b = Broker()
    b.commit("a", {("t", 0): 1})
    b.commit("b", {("t", 0): 2})
    _, response = b.send(OffsetFetchRequest, api_version=8,
                         groups=(OffsetFetchGroup("a"), OffsetFetchGroup(None), OffsetFetchGroup("b")))  # fmt: skip
    assert [(g.group_id, g.error) for g in response.groups] == [
        ("a", Errors.NONE),
        (None, Errors.INVALID_GROUP_ID),
        ("b", Errors.NONE),
    ]
    assert response.groups[2].topics[0].partitions[0].committed_offset == 2


def fetch_partitions(b: Broker, group: str, topics: dict[str, tuple[int, ...]], *,
                     require_stable: bool = False) -> list[OffsetFetchPartitionResult]:  # fmt: skip
    wanted = tuple(OffsetFetchTopic(t, ps) for t, ps in topics.items())
    _, response = b.send(OffsetFetchRequest, api_version=7, groups=(OffsetFetchGroup(group, wanted),),
                         require_stable=require_stable)  # fmt: skip
    return [p for t in response.groups[0].topics for p in t.partitions]
