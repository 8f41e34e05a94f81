"""The GroupCoordinator service: routing to the leader of the group's offsets partition
(NOT_COORDINATOR elsewhere), loading (COORDINATOR_LOAD_IN_PROGRESS; heartbeats answered NONE),
unloading (everything pending answered NOT_COORDINATOR), and appends across leaderships."""

from __future__ import annotations

import itertools

import pytest

from coordinator import (
    AppendCompleted,
    AppendRecords,
    CoordinatorUsageError,
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    Effect,
    GroupCoordinator,
    GroupCoordinatorConfig,
    GroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetFetchGroup,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SendResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from quorum.metadata.errors import Errors
from tests.coordinator.driver import RANGE

CONFIG = GroupCoordinatorConfig(offsets_topic_num_partitions=3)  # "a", "d" -> 1; "b" -> 2; "c" -> 0


def coordinator() -> GroupCoordinator:
    counter = itertools.count(1)
    return GroupCoordinator(CONFIG, member_id_suffix=lambda: str(next(counter)))


def answers(effects: list[Effect]) -> list[GroupResponse]:
    return [e.response for e in effects if isinstance(e, SendResponse)]


def appends(effects: list[Effect]) -> list[AppendRecords]:
    return [e for e in effects if isinstance(e, AppendRecords)]


def join(rid: int, group: str, member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        rid, 3, group, 10_000, 30_000, member_id, "consumer", RANGE, client_id="c"
    )


def commit(rid: int, group: str | None) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        rid, 8, group, (OffsetCommitTopic("t", (OffsetCommitPartition(0, 5),)),)
    )


def every_request(group: str) -> list[object]:
    return [
        join(1, group),
        SyncGroupRequest(2, 5, group, 1, "m"),
        HeartbeatRequest(3, 4, group, 1, "m"),
        LeaveGroupRequest(4, 4, group, (MemberIdentity("m"),)),
        commit(5, group),
        OffsetFetchRequest(6, 8, (OffsetFetchGroup(group),)),
        DescribeGroupsRequest(7, 5, (group,)),
        DeleteGroupsRequest(8, 2, (group,)),
    ]


def errors_of(response: GroupResponse) -> list[Errors]:
    """Every error code a response carries (top level and per item)."""
    match response:
        case LeaveGroupResponse():
            return [response.error, *(m.error for m in response.members)]
        case OffsetCommitResponse():
            return [p.error for t in response.topics for p in t.partitions]
        case OffsetFetchResponse() | DescribeGroupsResponse():
            return [g.error for g in response.groups]
        case DeleteGroupsResponse():
            return [r.error for r in response.results]
        case ListGroupsResponse() | JoinGroupResponse() | SyncGroupResponse() | HeartbeatResponse():
            return [response.error]


def test_groups_of_partitions_led_elsewhere_are_not_coordinator() -> None:
    c = coordinator()
    c.load(1, 0, [], 0)
    assert c.partition_for("a") == 1 and c.partition_for("b") == 2
    for request in every_request("b"):
        (response,) = answers(c.handle(request, 0))  # type: ignore[arg-type]
        assert set(errors_of(response)) == {Errors.NOT_COORDINATOR}, response
    assert answers(c.handle(join(9, "a"), 0)) == []  # served here: parked for the initial delay


def test_while_loading_requests_wait_and_heartbeats_pass() -> None:
    c = coordinator()
    c.begin_loading(2, 4)
    for request in every_request("b"):
        (response,) = answers(c.handle(request, 0))  # type: ignore[arg-type]
        expected = (
            Errors.NONE
            if isinstance(request, HeartbeatRequest)
            else Errors.COORDINATOR_LOAD_IN_PROGRESS
        )
        assert set(errors_of(response)) == {expected}, response
    (listed,) = answers(c.handle(ListGroupsRequest(10, 5), 0))
    assert listed.error is Errors.COORDINATOR_LOAD_IN_PROGRESS  # type: ignore[union-attr]
    c.load(2, 4, [], 0)
    (listed,) = answers(c.handle(ListGroupsRequest(11, 5), 0))
    assert (listed.error, listed.groups) == (Errors.NONE, ())  # type: ignore[union-attr]


def test_unloading_answers_everything_pending_and_ignores_late_completions() -> None:
    c = coordinator()
    c.load(1, 0, [], 0)
    assert answers(c.handle(join(1, "a"), 0)) == []  # parked: initial rebalance delay
    assert c.partition_for("d") == 1
    (append,) = appends(c.handle(commit(2, "d"), 0))
    effects = c.unload(1, 1)
    assert sorted((r.request_id, errors_of(r)[0]) for r in answers(effects)) == [
        (1, Errors.NOT_COORDINATOR),
        (2, Errors.NOT_COORDINATOR),
    ]
    assert appends(effects) == []
    assert c.append_completed(AppendCompleted(1, append.append_id), 0) == []
    assert c.tick(10_000) == [] and c.next_deadline_ms() is None
    (response,) = answers(c.handle(join(3, "a"), 0))
    assert response.error is Errors.NOT_COORDINATOR


def test_a_new_leadership_ignores_completions_of_the_old_one() -> None:
    c = coordinator()
    c.load(1, 0, [], 0)
    (old,) = appends(c.handle(commit(1, "a"), 0))
    c.unload(1, 1)
    c.load(1, 2, [], 0)
    (new,) = appends(c.handle(commit(2, "a"), 0))
    assert new.leader_epoch == 2 and new.append_id > old.append_id
    assert c.append_completed(AppendCompleted(1, old.append_id), 0) == []
    (response,) = answers(c.append_completed(AppendCompleted(1, new.append_id), 0))
    assert response.request_id == 2
    with pytest.raises(CoordinatorUsageError):
        c.append_completed(AppendCompleted(1, new.append_id), 0)


def test_loading_twice_and_foreign_partitions_are_misuse() -> None:
    c = coordinator()
    c.load(0, 3, [], 0)
    with pytest.raises(CoordinatorUsageError):
        c.load(0, 3, [], 0)
    with pytest.raises(CoordinatorUsageError):
        c.load(3, 0, [], 0)
    # A stale unload (an older epoch than the loaded one) changes nothing.
    c.unload(0, 2)
    assert c.loaded_partitions() == [0]


def test_a_delete_with_a_partition_unloaded_midway_still_answers_once() -> None:
    c = coordinator()
    c.load(1, 0, [], 0)
    c.load(2, 0, [], 0)
    for rid, group in ((1, "a"), (2, "b")):
        (append,) = appends(c.handle(commit(rid, group), 0))
        c.append_completed(AppendCompleted(append.partition, append.append_id), 0)
    effects = c.handle(DeleteGroupsRequest(3, 2, ("a", "b")), 0)
    first, second = appends(effects)
    assert answers(c.append_completed(AppendCompleted(first.partition, first.append_id), 0)) == []
    (response,) = answers(c.unload(2, 1))
    assert response.results == (  # type: ignore[union-attr]
        DeletableGroupResult("a", Errors.NONE),
        DeletableGroupResult("b", Errors.NOT_COORDINATOR),
    )
