"""Where a shard's handlers put what they decide: responses to send now, and records to append
with what to do once the append completes (`PendingWrite`). The shard drains it into the effect
list it returns, in the order things were decided.

A pending write is the continuation of a request whose answer depends on records being committed
(Kafka's CoordinatorResult appendFuture); the shard runs it on AppendCompleted:

    SyncAssignmentWrite   the leader's assignment for `generation_id`: on success the group
                          becomes Stable and every parked SyncGroup gets its assignment; on
                          failure they get the error and the group rebalances
    StaticMemberWrite     a static member rejoined a Stable group under a new member id
                          (KIP-345): answer its JoinGroup; on failure put the old id back
    GroupMetadataWrite    a group became Empty (or was reloaded over capacity): nothing waits
    OffsetCommitWrite     an OffsetCommit: on success the offsets become visible, then answer
    DeleteGroupsWrite     DeleteGroups tombstones: on success the groups and offsets are gone
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from coordinator.effects import AppendRecords, Effect, SendResponse
from coordinator.messages import GroupResponse, JoinGroupProtocol
from coordinator.records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue
from quorum.metadata.errors import Errors

__all__ = [
    "DeleteGroupsWrite",
    "GroupMetadataWrite",
    "OffsetCommitWrite",
    "Outbox",
    "PendingWrite",
    "StaticMemberWrite",
    "SyncAssignmentWrite",
]


@dataclass(frozen=True, slots=True)
class SyncAssignmentWrite:
    group_id: str
    generation_id: int
    assignment: tuple[tuple[str, bytes], ...]  # (member id, assignment) for every member


@dataclass(frozen=True, slots=True)
class StaticMemberWrite:
    group_id: str
    request_id: int
    api_version: int
    instance_id: str
    old_member_id: str
    new_member_id: str
    old_protocols: tuple[JoinGroupProtocol, ...]
    old_rebalance_timeout_ms: int
    old_session_timeout_ms: int
    leader_before: str | None


@dataclass(frozen=True, slots=True)
class GroupMetadataWrite:
    group_id: str


@dataclass(frozen=True, slots=True)
class OffsetCommitWrite:
    request_id: int
    group_id: str
    offsets: tuple[tuple[OffsetCommitKey, OffsetCommitValue], ...]
    # (topic, partition, error) per requested partition; those with NONE are in `offsets` and
    # take the append's error if it fails.
    results: tuple[tuple[str, int, Errors], ...]


@dataclass(frozen=True, slots=True)
class DeleteGroupsWrite:
    request_id: int
    # (group id, error) per requested group, in request order; those with NONE are being
    # deleted and take the append's error if it fails.
    results: tuple[tuple[str | None, Errors], ...]


PendingWrite = (
    SyncAssignmentWrite | StaticMemberWrite | GroupMetadataWrite | OffsetCommitWrite
    | DeleteGroupsWrite
)  # fmt: skip


class Outbox:
    def __init__(self, partition: int, leader_epoch: int, append_ids: Iterator[int]) -> None:
        self.partition = partition
        self.leader_epoch = leader_epoch
        self._append_ids = append_ids
        self.pending: dict[int, PendingWrite] = {}
        self._effects: list[Effect] = []
        self._first_id: int | None = None
        self._last_id: int | None = None
        # An unloaded shard writes nothing more: what its last handlers decide is dropped.
        self.closed = False

    def respond(self, response: GroupResponse) -> None:
        self._effects.append(SendResponse(response))

    def append(self, records: list[CoordinatorRecord], then: PendingWrite) -> None:
        if self.closed:
            return
        append_id = next(self._append_ids)
        if self._first_id is None:
            self._first_id = append_id
        self._last_id = append_id
        self.pending[append_id] = then
        self._effects.append(AppendRecords(self.partition, self.leader_epoch, append_id,
                                           tuple(records)))  # fmt: skip

    def issued(self, append_id: int) -> bool:
        """Whether this outbox handed out `append_id` (ids only grow, across shards too: an id
        below the first is a previous incarnation's)."""
        if self._first_id is None or self._last_id is None:
            return False
        return self._first_id <= append_id <= self._last_id

    def drain(self) -> list[Effect]:
        effects, self._effects = self._effects, []
        return effects
