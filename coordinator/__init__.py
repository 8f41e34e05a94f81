"""coordinator: the sans-IO group coordinator of Kafka's classic group protocol (Kafka's
group-coordinator module: GroupCoordinatorService, GroupCoordinatorShard, GroupMetadataManager,
OffsetMetadataManager, ClassicGroup; KIP-345 static membership, KIP-394 member ids, KIP-134
initial rebalance delay). Groups and committed offsets live as records of the internal
`__consumer_offsets` topic; the coordinator of a group is the leader of its partition.

Driven like the other cores: `handle(request, now_ms)`, `append_completed(...)`, `tick(now_ms)`,
each returning ordered effects, and `next_deadline_ms()`. No asyncio, sockets, clock or
randomness; member ids take their unique suffix from the driver.

- `service`: GroupCoordinator, what a broker drives (routing, loading, unloading);
- `shard`: the groups and offsets of one offsets partition; `loader`: rebuilding one from records;
- `membership` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, List/DescribeGroups), `rebalance`
  (join and sync phases, session and rebalance deadlines), `offsets` (OffsetCommit/Fetch);
- `group`: ClassicGroup, its members and the state transition table; `timers`: deadlines;
- `records`: the `__consumer_offsets` key/value formats; `partitioning`: group -> partition;
- `messages`: requests and responses; `effects`: AppendRecords, SendResponse, AppendCompleted;
  `outbox`: what a pending append completes; `config`: Kafka's names and defaults.

docs/groups.md states the rules, record formats and guarantees.
"""

from coordinator.config import GroupCoordinatorConfig
from coordinator.effects import AppendCompleted, AppendRecords, Effect, SendResponse
from coordinator.errors import (
    CoordinatorRecordError,
    CoordinatorUsageError,
    InvariantViolation,
    append_error_to_response_error,
)
from coordinator.group import ClassicGroup, GroupState, Member
from coordinator.loader import load_shard
from coordinator.messages import (
    UNKNOWN_GENERATION,
    UNKNOWN_MEMBER_ID,
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupRequest,
    GroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupProtocol,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitPartitionResult,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetCommitTopicResult,
    OffsetFetchGroup,
    OffsetFetchGroupResult,
    OffsetFetchPartitionResult,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopic,
    OffsetFetchTopicResult,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.partitioning import java_string_hash, partition_for
from coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
)
from coordinator.service import GroupCoordinator
from coordinator.shard import GroupCoordinatorShard

__all__ = [
    "UNKNOWN_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "AppendCompleted",
    "AppendRecords",
    "ClassicGroup",
    "CoordinatorRecord",
    "CoordinatorRecordError",
    "CoordinatorUsageError",
    "DeletableGroupResult",
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "DescribedGroup",
    "DescribedGroupMember",
    "Effect",
    "GroupCoordinator",
    "GroupCoordinatorConfig",
    "GroupCoordinatorShard",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "GroupRequest",
    "GroupResponse",
    "GroupState",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "InvariantViolation",
    "JoinGroupProtocol",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "JoinGroupResponseMember",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "LeaveMemberResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListedGroup",
    "Member",
    "MemberIdentity",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitPartition",
    "OffsetCommitPartitionResult",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetCommitTopic",
    "OffsetCommitTopicResult",
    "OffsetCommitValue",
    "OffsetFetchGroup",
    "OffsetFetchGroupResult",
    "OffsetFetchPartitionResult",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "OffsetFetchTopic",
    "OffsetFetchTopicResult",
    "SendResponse",
    "SyncGroupAssignment",
    "SyncGroupRequest",
    "SyncGroupResponse",
    "append_error_to_response_error",
    "decode_key",
    "decode_value",
    "java_string_hash",
    "load_shard",
    "partition_for",
]
