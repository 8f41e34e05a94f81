"""GroupCoordinatorShard: the groups and offsets of ONE `__consumer_offsets` partition, owned by
the broker that leads it (Kafka's GroupCoordinatorShard.java: one state machine per partition, so
a group's state moves with its partition's leadership).

Driven like the other cores: request in, `tick(now_ms)`, `append_completed(...)`, each returning
the effects to execute in order, and `next_deadline_ms()`. No I/O, no clock, no randomness.

State is rebuilt from the partition's records by `replay` (coordinator.loader) and after that
changes only here. What the log holds and what the shard holds agree at every committed point:
- offsets enter `OffsetStore.committed` only when their record is committed, in log order; a
  replay of the same records gives the same offsets;
- a group's Stable assignment is applied only once its GroupMetadata record is committed; the
  other group changes (members joining, leaving, expiring) are soft state, persisted at the next
  generation's record, as in Kafka;
- DeleteGroups marks its groups Dead at once (nothing may write to them) and removes them and
  their offsets when the tombstones are committed; a failed write puts them back as Empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import assert_never

import structlog

from coordinator.config import GroupCoordinatorConfig
from coordinator.effects import Effect
from coordinator.errors import CoordinatorUsageError, append_error_to_response_error
from coordinator.group import ClassicGroup, GroupState
from coordinator.membership import GroupMembership
from coordinator.messages import (
    DeletableGroupResult,
    DeleteGroupsResponse,
    DescribedGroup,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListedGroup,
    OffsetCommitRequest,
    OffsetFetchGroup,
    OffsetFetchGroupResult,
    SyncGroupRequest,
)
from coordinator.offsets import OffsetStore
from coordinator.outbox import (
    DeleteGroupsWrite,
    GroupMetadataWrite,
    OffsetCommitWrite,
    Outbox,
    PendingWrite,
    StaticMemberWrite,
    SyncAssignmentWrite,
)
from coordinator.rebalance import Rebalancer
from coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    group_metadata_tombstone,
)
from coordinator.timers import (
    HeartbeatExpiry,
    InitialRebalanceDelay,
    JoinDeadline,
    SyncDeadline,
    Timers,
)
from quorum.metadata.errors import Errors

__all__ = ["GroupCoordinatorShard", "ShardRequest"]

log = structlog.get_logger("coordinator")

ShardRequest = (
    JoinGroupRequest | SyncGroupRequest | HeartbeatRequest | LeaveGroupRequest | OffsetCommitRequest
)


class GroupCoordinatorShard:
    def __init__(self, partition: int, leader_epoch: int, config: GroupCoordinatorConfig, *,
                 append_ids: Iterator[int], member_id_suffix: Callable[[], str]) -> None:  # fmt: skip
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}
        self.timers = Timers()
        self.outbox = Outbox(partition, leader_epoch, append_ids)
        self.rebalancer = Rebalancer(config, self.groups, self.timers, self.outbox)
        self.membership = GroupMembership(config, self.rebalancer, member_id_suffix)
        self.offsets = OffsetStore(config, self.rebalancer)

    # ------------------------------------------------------------------------------ loading

    def replay(self, record: CoordinatorRecord, now_ms: int) -> None:
        """Apply one committed record of this partition (loading, in log order). Records of
        types this coordinator does not know are skipped."""
        key = decode_key(record.key)
        if key is None:
            log.warning("coordinator.unknown_record_skipped", partition=self.partition)
            return
        value = decode_value(key, record.value)
        if isinstance(key, OffsetCommitKey):
            assert value is None or isinstance(value, OffsetCommitValue)
            self.offsets.apply(key, value)
        elif value is None:
            self.groups.pop(key.group, None)
        else:
            assert isinstance(value, GroupMetadataValue)
            self.groups[key.group] = ClassicGroup.from_record(key.group, value, now_ms)

    def on_loaded(self, now_ms: int) -> list[Effect]:
        """Loading is over: every loaded member gets a full session to show up (Kafka's
        onLoaded), and a group above group.max.size rebalances."""
        for group in self.groups.values():
            for member in group.members.values():
                self.rebalancer.reschedule_heartbeat(group, member, now_ms)
            if len(group.members) > self.config.group_max_size:
                self.rebalancer.prepare_rebalance(group, now_ms)
        log.info("coordinator.loaded", partition=self.partition, epoch=self.leader_epoch,
                 groups=len(self.groups))  # fmt: skip
        return self.outbox.drain()

    def unload(self) -> list[Effect]:
        """This broker no longer leads the partition: every pending write fails as
        NOT_LEADER_OR_FOLLOWER would (clients are told NOT_COORDINATOR and look for the new
        coordinator), every parked JoinGroup and SyncGroup too, and nothing more is written."""
        self.outbox.closed = True
        for append_id in sorted(self.outbox.pending):
            self._complete(self.outbox.pending.pop(append_id), Errors.NOT_LEADER_OR_FOLLOWER, 0)
        for group in self.groups.values():
            self.rebalancer.fail_parked(group, Errors.NOT_COORDINATOR)
        self.groups.clear()
        return self.outbox.drain()

    # ----------------------------------------------------------------------------- requests

    def handle(self, request: ShardRequest, now_ms: int) -> list[Effect]:
        match request:
            case JoinGroupRequest():
                self.membership.join(request, now_ms)
            case SyncGroupRequest():
                self.membership.sync(request, now_ms)
            case HeartbeatRequest():
                self.membership.heartbeat(request, now_ms)
            case LeaveGroupRequest():
                self.membership.leave(request, now_ms)
            case OffsetCommitRequest():
                self.offsets.commit(request, now_ms)
            case _:
                assert_never(request)
        return self.outbox.drain()

    def fetch_offsets(
        self, group: OffsetFetchGroup, require_stable: bool
    ) -> OffsetFetchGroupResult:
        return self.offsets.fetch(group, require_stable)

    def describe(self, group_id: str) -> DescribedGroup:
        return self.membership.describe(group_id)

    def list_groups(self, states: tuple[str, ...], types: tuple[str, ...]) -> list[ListedGroup]:
        return self.membership.listed(states, types)

    def delete_groups(self, request_id: int, group_ids: tuple[str, ...]) -> list[Effect]:
        """DeleteGroups for groups of this partition; answered (DeleteGroupsResponse with
        `request_id`) once the tombstones are committed. Only an Empty group can be deleted."""
        results: list[tuple[str | None, Errors]] = []
        records: list[CoordinatorRecord] = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                results.append((group_id, Errors.GROUP_ID_NOT_FOUND))
            elif not group.is_in(GroupState.EMPTY):
                results.append((group_id, Errors.NON_EMPTY_GROUP))
            else:
                records += self.offsets.tombstones(group_id)
                records.append(group_metadata_tombstone(GroupMetadataKey(group_id)))
                group.transition_to(GroupState.DEAD, group.state_timestamp_ms)
                results.append((group_id, Errors.NONE))
        write = DeleteGroupsWrite(request_id, tuple(results))
        if records:
            self.outbox.append(records, write)
        else:
            self.outbox.respond(_delete_response(write, Errors.NONE))
        return self.outbox.drain()

    # ---------------------------------------------------------------------- appends, timers

    def append_completed(self, append_id: int, error: Errors, now_ms: int) -> list[Effect]:
        write = self.outbox.pending.pop(append_id, None)
        if write is None:
            if self.outbox.issued(append_id):
                raise CoordinatorUsageError(f"append {append_id} of partition {self.partition} "
                                            f"completed twice")  # fmt: skip
            return []  # an append of an earlier leadership of this partition
        if error is not Errors.NONE:
            log.warning("coordinator.append_failed", partition=self.partition,
                        append_id=append_id, error=error.name)  # fmt: skip
        self._complete(write, error, now_ms)
        return self.outbox.drain()

    def _complete(self, write: PendingWrite, error: Errors, now_ms: int) -> None:
        match write:
            case SyncAssignmentWrite():
                self.rebalancer.sync_written(write, error, now_ms)
            case StaticMemberWrite():
                self.membership.static_member_written(write, error, now_ms)
            case OffsetCommitWrite():
                self.offsets.commit_written(write, error)
            case DeleteGroupsWrite():
                self._groups_deleted(write, error, now_ms)
            case GroupMetadataWrite():
                pass  # nothing waits; a failure leaves the previous generation in the log
            case _:
                assert_never(write)

    def _groups_deleted(self, write: DeleteGroupsWrite, error: Errors, now_ms: int) -> None:
        for group_id, result in write.results:
            if result is not Errors.NONE or group_id is None:
                continue
            group = self.groups.get(group_id)
            if error is Errors.NONE:
                if group is not None and group.is_in(GroupState.DEAD):
                    del self.groups[group_id]
                self.offsets.drop_group(group_id)
                log.info("coordinator.group_deleted", group=group_id)
            elif group is not None and group.is_in(GroupState.DEAD):
                group.undo_delete(now_ms)
        self.outbox.respond(_delete_response(write, append_error_to_response_error(error)))

    def tick(self, now_ms: int) -> list[Effect]:
        limit = self.timers.last_seq
        while (action := self.timers.pop_next_due(now_ms, limit)) is not None:
            match action:
                case HeartbeatExpiry():
                    self.rebalancer.heartbeat_expired(action, now_ms)
                case JoinDeadline():
                    self.rebalancer.join_deadline_expired(action, now_ms)
                case InitialRebalanceDelay():
                    self.rebalancer.initial_delay_expired(action, now_ms)
                case SyncDeadline():
                    self.rebalancer.sync_deadline_expired(action, now_ms)
                case _:
                    assert_never(action)
        return self.outbox.drain()

    def next_deadline_ms(self) -> int | None:
        return self.timers.next_deadline_ms()


def _delete_response(write: DeleteGroupsWrite, append_error: Errors) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(write.request_id, tuple(
        DeletableGroupResult(g, append_error if e is Errors.NONE else e) for g, e in write.results
    ))  # fmt: skip
