"""Committed offsets: OffsetCommit, OffsetFetch, and the offsets side of DeleteGroups and of
loading (Kafka's OffsetMetadataManager.java, non-transactional part).

Who may commit (ClassicGroup.validateOffsetCommit), in order:
- a Dead group (being deleted): COORDINATOR_NOT_AVAILABLE;
- generation -1 to an Empty group, or to a group that does not exist: accepted. This is the
  "simple" commit of a consumer that assigns partitions itself (or of the admin client); a group
  with no protocol type is created for the offsets when they are committed;
- generation >= 0 to a group that does not exist: ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from
  OffsetCommit v9);
- a member id or generation given: the member must be in the group (UNKNOWN_MEMBER_ID /
  FENCED_INSTANCE_ID) at exactly this generation (ILLEGAL_GENERATION);
- neither given, group not Empty: UNKNOWN_MEMBER_ID;
- CompletingRebalance: REBALANCE_IN_PROGRESS (the member has its new generation but not yet its
  assignment). PreparingRebalance accepts commits of the current generation, so members can
  commit what they processed before giving partitions up.
A commit by a member of a Stable or PreparingRebalance group also counts as its heartbeat.

Visibility: OffsetFetch answers what the log says, i.e. what a new coordinator would load. An
offset is visible once its record is committed in `__consumer_offsets`, not when the request
arrives; between the two, OffsetFetch with require_stable (KIP-447) answers
UNSTABLE_OFFSET_COMMIT for that partition, so a consumer taking over a partition cannot start
from an offset about to change. A deleted group's offsets go when its tombstones are committed.
"""

from __future__ import annotations

from collections import Counter

from coordinator.config import GroupCoordinatorConfig
from coordinator.errors import append_error_to_response_error
from coordinator.group import ClassicGroup, GroupState
from coordinator.messages import (
    OffsetCommitPartitionResult,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopicResult,
    OffsetFetchGroup,
    OffsetFetchGroupResult,
    OffsetFetchPartitionResult,
    OffsetFetchTopicResult,
)
from coordinator.outbox import OffsetCommitWrite, Outbox
from coordinator.rebalance import Rebalancer
from coordinator.records import (
    CoordinatorRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    offset_commit_record,
    offset_commit_tombstone,
)
from quorum.metadata.errors import Errors

__all__ = ["OffsetStore"]

# From OffsetCommit v9 a commit to an unknown group says so (KIP-848) instead of
# ILLEGAL_GENERATION.
_GROUP_ID_NOT_FOUND_VERSION = 9

TopicPartition = tuple[str, int]


class OffsetStore:
    def __init__(self, config: GroupCoordinatorConfig, rebalancer: Rebalancer) -> None:
        self.config = config
        self.rb = rebalancer
        self.groups = rebalancer.groups
        self.outbox: Outbox = rebalancer.outbox
        self.committed: dict[str, dict[TopicPartition, OffsetCommitValue]] = {}
        self._in_flight: dict[str, Counter[TopicPartition]] = {}

    # -------------------------------------------------------------------------- OffsetCommit

    def commit(self, req: OffsetCommitRequest, now_ms: int) -> None:
        assert req.group_id is not None  # the service answers INVALID_GROUP_ID for a null id
        group_id = req.group_id
        group = self.groups.get(group_id)
        error = self._validate(group, req)
        if error is not Errors.NONE:
            self.outbox.respond(_uniform_response(req, error))
            return
        if group is not None and group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            member = group.members.get(req.member_id)
            if member is not None:
                self.rb.reschedule_heartbeat(group, member, now_ms)
        offsets: list[tuple[OffsetCommitKey, OffsetCommitValue]] = []
        results: list[tuple[str, int, Errors]] = []
        for topic in req.topics:
            for p in topic.partitions:
                metadata = p.committed_metadata or ""
                if len(metadata) > self.config.offset_metadata_max_bytes:
                    results.append(
                        (topic.name, p.partition_index, Errors.OFFSET_METADATA_TOO_LARGE)
                    )
                    continue
                results.append((topic.name, p.partition_index, Errors.NONE))
                offsets.append((OffsetCommitKey(group_id, topic.name, p.partition_index),
                                OffsetCommitValue(p.committed_offset, metadata, now_ms,
                                                  p.committed_leader_epoch)))  # fmt: skip
        write = OffsetCommitWrite(req.request_id, group_id, tuple(offsets), tuple(results))
        if not offsets:
            self.outbox.respond(_response(write, Errors.NONE))
            return
        in_flight = self._in_flight.setdefault(group_id, Counter())
        in_flight.update((k.topic, k.partition) for k, _ in offsets)
        self.outbox.append([offset_commit_record(k, v) for k, v in offsets], write)

    def _validate(self, group: ClassicGroup | None, req: OffsetCommitRequest) -> Errors:
        if group is None:
            if req.generation_id < 0:
                return Errors.NONE  # a simple commit
            if req.api_version >= _GROUP_ID_NOT_FOUND_VERSION:
                return Errors.GROUP_ID_NOT_FOUND
            return Errors.ILLEGAL_GENERATION
        return group.validate_offset_commit(req.member_id, req.group_instance_id,
                                            req.generation_id)  # fmt: skip

    def commit_written(self, write: OffsetCommitWrite, error: Errors) -> None:
        in_flight = self._in_flight.get(write.group_id)
        if in_flight is not None:
            in_flight.subtract((k.topic, k.partition) for k, _ in write.offsets)
            if not +in_flight:
                del self._in_flight[write.group_id]
        if error is Errors.NONE:
            for key, value in write.offsets:
                self.apply(key, value)
        self.outbox.respond(_response(write, append_error_to_response_error(error)))

    def apply(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        """A committed OffsetCommit record (or tombstone), from this coordinator or the log."""
        if value is None:
            by_group = self.committed.get(key.group)
            if by_group is not None:
                by_group.pop((key.topic, key.partition), None)
                if not by_group:
                    del self.committed[key.group]
            return
        if key.group not in self.groups:
            # Offsets without a group: a simple group holds them (OffsetMetadataManager.replay).
            self.groups[key.group] = ClassicGroup(key.group, value.commit_timestamp_ms)
        self.committed.setdefault(key.group, {})[(key.topic, key.partition)] = value

    # --------------------------------------------------------------------------- OffsetFetch

    def fetch(self, request: OffsetFetchGroup, require_stable: bool) -> OffsetFetchGroupResult:
        group_id = request.group_id
        assert group_id is not None
        # What the log says: a group being deleted keeps its offsets until the tombstones are
        # committed (Kafka reads at the last committed offset).
        offsets = self.committed.get(group_id, {})
        in_flight = self._in_flight.get(group_id, Counter()) if require_stable else Counter()
        if request.topics is None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(offsets):
                by_topic.setdefault(topic, []).append(partition)
            wanted = list(by_topic.items())
        else:
            wanted = [(t.name, list(t.partition_indexes)) for t in request.topics]
        topics = tuple(
            OffsetFetchTopicResult(name, tuple(
                _fetched(p, offsets.get((name, p)), in_flight[(name, p)] > 0) for p in partitions
            )) for name, partitions in wanted
        )  # fmt: skip
        return OffsetFetchGroupResult(group_id, Errors.NONE, topics)

    # ------------------------------------------------------------------------- DeleteGroups

    def tombstones(self, group_id: str) -> list[CoordinatorRecord]:
        """Tombstones for every offset of `group_id`, committed or still being written (the
        in-flight record lands before the tombstone in the log, so it must be covered too)."""
        keys = set(self.committed.get(group_id, {})) | set(
            +self._in_flight.get(group_id, Counter())
        )
        return [offset_commit_tombstone(OffsetCommitKey(group_id, t, p)) for t, p in sorted(keys)]

    def drop_group(self, group_id: str) -> None:
        self.committed.pop(group_id, None)

    def has_in_flight(self) -> bool:
        return bool(self._in_flight)


def _fetched(partition: int, value: OffsetCommitValue | None,
             unstable: bool) -> OffsetFetchPartitionResult:  # fmt: skip
    if unstable:
        return OffsetFetchPartitionResult(partition, error=Errors.UNSTABLE_OFFSET_COMMIT)
    if value is None:
        return OffsetFetchPartitionResult(partition)
    return OffsetFetchPartitionResult(partition, value.offset, value.leader_epoch, value.metadata)


def _uniform_response(req: OffsetCommitRequest, error: Errors) -> OffsetCommitResponse:
    return OffsetCommitResponse(req.request_id, tuple(
        OffsetCommitTopicResult(t.name, tuple(
            OffsetCommitPartitionResult(p.partition_index, error) for p in t.partitions))
        for t in req.topics
    ))  # fmt: skip


def _response(write: OffsetCommitWrite, append_error: Errors) -> OffsetCommitResponse:
    """The answer to a commit whose records were written with `append_error`: partitions that
    were written take it; the others keep their own error."""
    topics: dict[str, list[OffsetCommitPartitionResult]] = {}
    for topic, partition, error in write.results:
        final = append_error if error is Errors.NONE else error
        topics.setdefault(topic, []).append(OffsetCommitPartitionResult(partition, final))
    return OffsetCommitResponse(
        write.request_id,
        tuple(OffsetCommitTopicResult(name, tuple(parts)) for name, parts in topics.items()),
    )
