"""GroupCoordinator: a broker's group coordinator, the one object its runtime drives (Kafka's
GroupCoordinatorService + CoordinatorRuntime, without threads or futures).

It holds one GroupCoordinatorShard per `__consumer_offsets` partition this broker leads, routes
each request to the shard of its group (`partition_for`), and answers the requests no shard can:

    group's partition not led here           NOT_COORDINATOR (the client asks FindCoordinator)
    led here, still loading                  COORDINATOR_LOAD_IN_PROGRESS (retriable);
                                             Heartbeat answers NONE (Kafka: "blindly")
    JoinGroup/SyncGroup/Heartbeat/LeaveGroup with group id ""          INVALID_GROUP_ID
    OffsetCommit/OffsetFetch/DescribeGroups/DeleteGroups with a null id INVALID_GROUP_ID
    JoinGroup session timeout outside [group.min, group.max]           INVALID_SESSION_TIMEOUT

Leadership is the driver's to report: `begin_loading` when this broker becomes leader of an
offsets partition, `load` with the partition's records (coordinator.loader), `unload` when it
stops leading it. Appends (AppendRecords effects) carry ids unique across all shards and
leaderships, so a completion for an earlier leadership of a partition is recognised and dropped.

DeleteGroups may span several partitions: each shard answers its part when its tombstones are
committed, and the parts are put back together in request order before the one response goes
out.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import assert_never

from coordinator.config import GroupCoordinatorConfig
from coordinator.effects import AppendCompleted, Effect, SendResponse
from coordinator.errors import CoordinatorUsageError, InvariantViolation
from coordinator.loader import load_shard
from coordinator.messages import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitPartitionResult,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopicResult,
    OffsetFetchGroup,
    OffsetFetchGroupResult,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.partitioning import partition_for
from coordinator.records import CoordinatorRecord
from coordinator.shard import GroupCoordinatorShard
from quorum.metadata.errors import Errors

__all__ = ["GroupCoordinator"]


@dataclass(slots=True)
class _Fanout:
    """One DeleteGroups spread over shards: results by request position, parts outstanding."""

    request_id: int
    results: list[DeletableGroupResult | None]
    outstanding: set[int] = field(default_factory=set)


class GroupCoordinator:
    def __init__(self, config: GroupCoordinatorConfig | None = None, *,
                 member_id_suffix: Callable[[], str]) -> None:  # fmt: skip
        """`member_id_suffix` makes the unique part of new member ids (a real broker: a random
        UUID; a simulation: a seeded or counting source)."""
        self.config = config or GroupCoordinatorConfig()
        self._member_id_suffix = member_id_suffix
        self._shards: dict[int, GroupCoordinatorShard] = {}
        self._loading: dict[int, int] = {}  # partition -> leader epoch being loaded
        self._append_ids = itertools.count(1)
        self._part_ids = itertools.count(1)
        self._parts: dict[int, tuple[_Fanout, list[int]]] = {}  # part id -> (fanout, positions)

    # --------------------------------------------------------------------------- leadership

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def shard(self, partition: int) -> GroupCoordinatorShard | None:
        return self._shards.get(partition)

    def loaded_partitions(self) -> list[int]:
        return sorted(self._shards)

    def begin_loading(self, partition: int, leader_epoch: int) -> list[Effect]:
        """This broker became leader of `partition` at `leader_epoch`; its records are being
        read. Requests for its groups get COORDINATOR_LOAD_IN_PROGRESS meanwhile."""
        self._check_partition(partition)
        effects = self._unload_older(partition, leader_epoch)
        self._loading[partition] = leader_epoch
        return self._absorb(effects)

    def load(self, partition: int, leader_epoch: int, records: Iterable[CoordinatorRecord],
             now_ms: int) -> list[Effect]:  # fmt: skip
        """Build the shard of `partition` from its records (coordinator.loader) and serve it."""
        self._check_partition(partition)
        effects = self._unload_older(partition, leader_epoch)
        current = self._shards.get(partition)
        if current is not None and current.leader_epoch >= leader_epoch:
            raise CoordinatorUsageError(f"partition {partition} already loaded at epoch "
                                        f"{current.leader_epoch}")  # fmt: skip
        self._loading.pop(partition, None)
        shard, started = load_shard(partition, leader_epoch, records, now_ms, self.config,
                                    append_ids=self._append_ids,
                                    member_id_suffix=self._member_id_suffix)  # fmt: skip
        self._shards[partition] = shard
        return self._absorb(effects + started)

    def unload(self, partition: int, leader_epoch: int) -> list[Effect]:
        """This broker no longer leads `partition` (a new leader at `leader_epoch`, or none).
        Pending requests of its groups are answered NOT_COORDINATOR."""
        loading = self._loading.get(partition)
        if loading is not None and loading <= leader_epoch:
            del self._loading[partition]
        shard = self._shards.get(partition)
        if shard is None or shard.leader_epoch > leader_epoch:
            return []
        del self._shards[partition]
        return self._absorb(shard.unload())

    def _unload_older(self, partition: int, leader_epoch: int) -> list[Effect]:
        shard = self._shards.get(partition)
        if shard is not None and shard.leader_epoch < leader_epoch:
            del self._shards[partition]
            return shard.unload()
        return []

    def _check_partition(self, partition: int) -> None:
        if not 0 <= partition < self.config.offsets_topic_num_partitions:
            raise CoordinatorUsageError(f"no __consumer_offsets partition {partition}")

    # ----------------------------------------------------------------------------- requests

    def handle(self, request: GroupRequest, now_ms: int) -> list[Effect]:
        match request:
            case JoinGroupRequest():
                effects = self._join(request, now_ms)
            case SyncGroupRequest() | HeartbeatRequest() | LeaveGroupRequest():
                effects = self._member_request(request, now_ms)
            case OffsetCommitRequest():
                effects = self._commit(request, now_ms)
            case OffsetFetchRequest():
                effects = [SendResponse(OffsetFetchResponse(request.request_id, tuple(
                    self._fetch(g, request.require_stable) for g in request.groups)))]  # fmt: skip
            case ListGroupsRequest():
                effects = [SendResponse(self._list(request))]
            case DescribeGroupsRequest():
                effects = [SendResponse(DescribeGroupsResponse(request.request_id, tuple(
                    self._describe(g) for g in request.groups)))]  # fmt: skip
            case DeleteGroupsRequest():
                return self._delete(request)
            case _:
                assert_never(request)
        return self._absorb(effects)

    def _route(self, group_id: str) -> GroupCoordinatorShard | Errors:
        partition = self.partition_for(group_id)
        shard = self._shards.get(partition)
        if shard is not None:
            return shard
        return Errors.COORDINATOR_LOAD_IN_PROGRESS if partition in self._loading \
            else Errors.NOT_COORDINATOR  # fmt: skip

    def _join(self, req: JoinGroupRequest, now_ms: int) -> list[Effect]:
        error = Errors.NONE
        if not req.group_id:
            error = Errors.INVALID_GROUP_ID
        elif not (self.config.group_min_session_timeout_ms <= req.session_timeout_ms
                  <= self.config.group_max_session_timeout_ms):  # fmt: skip
            error = Errors.INVALID_SESSION_TIMEOUT
        target = self._route(req.group_id) if error is Errors.NONE else error
        if isinstance(target, GroupCoordinatorShard):
            return target.handle(req, now_ms)
        return [SendResponse(JoinGroupResponse(req.request_id, target, member_id=req.member_id))]

    def _member_request(self, req: SyncGroupRequest | HeartbeatRequest | LeaveGroupRequest,
                        now_ms: int) -> list[Effect]:  # fmt: skip
        target = self._route(req.group_id) if req.group_id else Errors.INVALID_GROUP_ID
        if isinstance(target, GroupCoordinatorShard):
            return target.handle(req, now_ms)
        match req:
            case SyncGroupRequest():
                return [SendResponse(SyncGroupResponse(req.request_id, target))]
            case HeartbeatRequest():
                if target is Errors.COORDINATOR_LOAD_IN_PROGRESS:
                    target = Errors.NONE  # the group is loading: keep the member's session
                return [SendResponse(HeartbeatResponse(req.request_id, target))]
            case LeaveGroupRequest():
                return [SendResponse(LeaveGroupResponse(req.request_id, target))]

    def _commit(self, req: OffsetCommitRequest, now_ms: int) -> list[Effect]:
        target = Errors.INVALID_GROUP_ID if req.group_id is None else self._route(req.group_id)
        if isinstance(target, GroupCoordinatorShard):
            return target.handle(req, now_ms)
        return [SendResponse(OffsetCommitResponse(req.request_id, tuple(
            OffsetCommitTopicResult(t.name, tuple(
                OffsetCommitPartitionResult(p.partition_index, target) for p in t.partitions))
            for t in req.topics)))]  # fmt: skip

    def _fetch(self, group: OffsetFetchGroup, require_stable: bool) -> OffsetFetchGroupResult:
        target = Errors.INVALID_GROUP_ID if group.group_id is None else self._route(group.group_id)
        if isinstance(target, GroupCoordinatorShard):
            return target.fetch_offsets(group, require_stable)
        return OffsetFetchGroupResult(group.group_id, target)

    def _list(self, req: ListGroupsRequest) -> ListGroupsResponse:
        if self._loading:
            return ListGroupsResponse(req.request_id, Errors.COORDINATOR_LOAD_IN_PROGRESS)
        groups: list[ListedGroup] = []
        for partition in sorted(self._shards):
            groups += self._shards[partition].list_groups(req.states_filter, req.types_filter)
        return ListGroupsResponse(req.request_id, Errors.NONE, tuple(groups))

    def _describe(self, group_id: str | None) -> DescribedGroup:
        target = Errors.INVALID_GROUP_ID if group_id is None else self._route(group_id)
        if isinstance(target, GroupCoordinatorShard):
            assert group_id is not None
            return target.describe(group_id)
        return DescribedGroup(group_id, target, group_state="")

    def _delete(self, req: DeleteGroupsRequest) -> list[Effect]:
        fanout = _Fanout(req.request_id, [None] * len(req.groups_names))
        by_shard: dict[int, list[int]] = {}
        for position, group_id in enumerate(req.groups_names):
            target = Errors.INVALID_GROUP_ID if group_id is None else self._route(group_id)
            if isinstance(target, GroupCoordinatorShard):
                by_shard.setdefault(target.partition, []).append(position)
            else:
                fanout.results[position] = DeletableGroupResult(group_id, target)
        effects: list[Effect] = []
        for partition, positions in sorted(by_shard.items()):
            part_id = next(self._part_ids)
            fanout.outstanding.add(part_id)
            self._parts[part_id] = (fanout, positions)
            names = tuple(req.groups_names[p] or "" for p in positions)
            effects += self._absorb(self._shards[partition].delete_groups(part_id, names))
        if not by_shard:
            effects.append(_fanout_response(fanout))
        return effects

    def _absorb(self, effects: list[Effect]) -> list[Effect]:
        """Replace the shards' answers to DeleteGroups parts by the whole answer, once every
        part is in. Only for effects straight from shards: a shard's DeleteGroupsResponse is
        always a part (its request id a part id)."""
        out: list[Effect] = []
        for effect in effects:
            response = effect.response if isinstance(effect, SendResponse) else None
            if not isinstance(response, DeleteGroupsResponse):
                out.append(effect)
                continue
            fanout, positions = self._parts.pop(response.request_id)
            for position, result in zip(positions, response.results, strict=True):
                fanout.results[position] = result
            fanout.outstanding.discard(response.request_id)
            if not fanout.outstanding:
                out.append(_fanout_response(fanout))
        return out

    # ---------------------------------------------------------------------- appends, timers

    def append_completed(self, completed: AppendCompleted, now_ms: int) -> list[Effect]:
        shard = self._shards.get(completed.partition)
        if shard is None:
            return []  # unloaded: its requests were answered NOT_COORDINATOR then
        return self._absorb(shard.append_completed(completed.append_id, completed.error, now_ms))

    def tick(self, now_ms: int) -> list[Effect]:
        effects: list[Effect] = []
        for partition in sorted(self._shards):
            effects += self._shards[partition].tick(now_ms)
        return self._absorb(effects)

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for s in self._shards.values() if (d := s.next_deadline_ms()) is not None]
        return min(deadlines, default=None)


def _fanout_response(fanout: _Fanout) -> SendResponse:
    results = tuple(r for r in fanout.results if r is not None)
    if len(results) != len(fanout.results):
        raise InvariantViolation(f"DeleteGroups {fanout.request_id} answered with a gap")
    return SendResponse(DeleteGroupsResponse(fanout.request_id, results))
