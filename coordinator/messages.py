"""The group coordinator's requests and responses: Kafka's classic group APIs with Kafka's field
names in snake case, one frozen dataclass each, typed (no bytes: the Kafka listener decodes the
wire version and fills these; what a field means for old versions is said beside it).

Every request carries the driver's `request_id` (echoed by its response, which the core emits as
a `SendResponse` effect, possibly much later: a JoinGroup is parked until the rebalance completes)
and the `api_version` the client spoke, where the answer depends on it (JoinGroup v4+ asks for a
member id first, KIP-394; JoinGroup v9+ lets a static leader skip the assignment, KIP-814;
OffsetCommit v9+ answers GROUP_ID_NOT_FOUND).

Versions the listener maps:
- JoinGroup v0 has no rebalance timeout: pass the session timeout (Kafka does the same).
- LeaveGroup v0-2 name one member with `member_id`: pass one MemberIdentity; the v0-2 response
  has only the top-level error: use the member's error when the top level is NONE.
- OffsetFetch v0-7 name one group: pass one OffsetFetchGroup; `topics=None` means all (v2+).
"""

from __future__ import annotations

from dataclasses import dataclass

from quorum.metadata.errors import Errors

__all__ = [
    "UNKNOWN_MEMBER_ID",
    "UNKNOWN_GENERATION",
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
    "DeletableGroupResult",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "DescribedGroup",
    "DescribedGroupMember",
    "GroupRequest",
    "GroupResponse",
    "HeartbeatRequest",
    "HeartbeatResponse",
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
    "MemberIdentity",
    "OffsetCommitPartition",
    "OffsetCommitPartitionResult",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetCommitTopic",
    "OffsetCommitTopicResult",
    "OffsetFetchGroup",
    "OffsetFetchGroupResult",
    "OffsetFetchPartitionResult",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "OffsetFetchTopic",
    "OffsetFetchTopicResult",
    "SyncGroupAssignment",
    "SyncGroupRequest",
    "SyncGroupResponse",
]

UNKNOWN_MEMBER_ID = ""  # JoinGroupRequest.UNKNOWN_MEMBER_ID: "I have no member id yet"
UNKNOWN_GENERATION = -1  # a commit outside group management (simple consumer, admin client)
NO_OFFSET = -1  # OffsetFetch: nothing committed for this partition

# ------------------------------------------------------------------------------ JoinGroup


@dataclass(frozen=True, slots=True)
class JoinGroupProtocol:
    name: str  # an assignor ("range", "cooperative-sticky"...)
    metadata: bytes  # the member's subscription for it, opaque to the coordinator


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    request_id: int
    api_version: int
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    protocol_type: str  # "consumer", "connect"...
    protocols: tuple[JoinGroupProtocol, ...]  # in the member's order of preference
    group_instance_id: str | None = None  # v5+ (KIP-345 static membership)
    client_id: str = ""
    client_host: str = ""
    reason: str | None = None  # v8+


@dataclass(frozen=True, slots=True)
class JoinGroupResponseMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    request_id: int
    error: Errors
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = UNKNOWN_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupResponseMember, ...] = ()  # the leader's only


# ------------------------------------------------------------------------------ SyncGroup


@dataclass(frozen=True, slots=True)
class SyncGroupAssignment:
    member_id: str
    assignment: bytes


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    request_id: int
    api_version: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None  # v3+
    protocol_type: str | None = None  # v5+
    protocol_name: str | None = None  # v5+
    assignments: tuple[SyncGroupAssignment, ...] = ()  # the leader's


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    request_id: int
    error: Errors
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


# ------------------------------------------------------------------------------ Heartbeat


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    request_id: int
    api_version: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None  # v3+


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    request_id: int
    error: Errors


# ----------------------------------------------------------------------------- LeaveGroup


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    member_id: str  # "" with a group_instance_id: an admin removing a static member
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    request_id: int
    api_version: int
    group_id: str
    members: tuple[MemberIdentity, ...]


@dataclass(frozen=True, slots=True)
class LeaveMemberResponse:
    member_id: str
    group_instance_id: str | None
    error: Errors


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    request_id: int
    error: Errors
    members: tuple[LeaveMemberResponse, ...] = ()


# --------------------------------------------------------------------------- OffsetCommit


@dataclass(frozen=True, slots=True)
class OffsetCommitPartition:
    partition_index: int
    committed_offset: int
    committed_metadata: str | None = ""
    committed_leader_epoch: int = -1  # v6+


@dataclass(frozen=True, slots=True)
class OffsetCommitTopic:
    name: str
    partitions: tuple[OffsetCommitPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    request_id: int
    api_version: int
    group_id: str | None  # None (null on the wire) is INVALID_GROUP_ID; "" is a valid id
    topics: tuple[OffsetCommitTopic, ...]
    generation_id: int = UNKNOWN_GENERATION  # v1+; -1 with member "" = a simple commit
    member_id: str = UNKNOWN_MEMBER_ID  # v1+
    group_instance_id: str | None = None  # v7+


@dataclass(frozen=True, slots=True)
class OffsetCommitPartitionResult:
    partition_index: int
    error: Errors


@dataclass(frozen=True, slots=True)
class OffsetCommitTopicResult:
    name: str
    partitions: tuple[OffsetCommitPartitionResult, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    request_id: int
    topics: tuple[OffsetCommitTopicResult, ...]


# ---------------------------------------------------------------------------- OffsetFetch


@dataclass(frozen=True, slots=True)
class OffsetFetchTopic:
    name: str
    partition_indexes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchGroup:
    group_id: str | None
    topics: tuple[OffsetFetchTopic, ...] | None = None  # None: every committed offset


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    request_id: int
    api_version: int
    groups: tuple[OffsetFetchGroup, ...]
    require_stable: bool = False  # v7+ (KIP-447)


@dataclass(frozen=True, slots=True)
class OffsetFetchPartitionResult:
    partition_index: int
    committed_offset: int = NO_OFFSET
    committed_leader_epoch: int = -1
    metadata: str = ""
    error: Errors = Errors.NONE


@dataclass(frozen=True, slots=True)
class OffsetFetchTopicResult:
    name: str
    partitions: tuple[OffsetFetchPartitionResult, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchGroupResult:
    group_id: str | None
    error: Errors
    topics: tuple[OffsetFetchTopicResult, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    request_id: int
    groups: tuple[OffsetFetchGroupResult, ...]


# ----------------------------------------------------------------------------- ListGroups


@dataclass(frozen=True, slots=True)
class ListGroupsRequest:
    request_id: int
    api_version: int
    states_filter: tuple[str, ...] = ()  # v4+, case-insensitive ("Stable", "empty"...)
    types_filter: tuple[str, ...] = ()  # v5+ ("classic"; this coordinator has no other type)


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class ListGroupsResponse:
    request_id: int
    error: Errors
    groups: tuple[ListedGroup, ...] = ()


# ------------------------------------------------------------------------- DescribeGroups


@dataclass(frozen=True, slots=True)
class DescribeGroupsRequest:
    request_id: int
    api_version: int
    groups: tuple[str | None, ...]


@dataclass(frozen=True, slots=True)
class DescribedGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes  # only while Stable (the chosen protocol's subscription)
    member_assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str | None
    error: Errors
    group_state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""  # the chosen protocol's name, while Stable
    members: tuple[DescribedGroupMember, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeGroupsResponse:
    request_id: int
    groups: tuple[DescribedGroup, ...]


# --------------------------------------------------------------------------- DeleteGroups


@dataclass(frozen=True, slots=True)
class DeleteGroupsRequest:
    request_id: int
    api_version: int
    groups_names: tuple[str | None, ...]


@dataclass(frozen=True, slots=True)
class DeletableGroupResult:
    group_id: str | None
    error: Errors


@dataclass(frozen=True, slots=True)
class DeleteGroupsResponse:
    request_id: int
    results: tuple[DeletableGroupResult, ...] = ()


GroupRequest = (
    JoinGroupRequest
    | SyncGroupRequest
    | HeartbeatRequest
    | LeaveGroupRequest
    | OffsetCommitRequest
    | OffsetFetchRequest
    | ListGroupsRequest
    | DescribeGroupsRequest
    | DeleteGroupsRequest
)
GroupResponse = (
    JoinGroupResponse
    | SyncGroupResponse
    | HeartbeatResponse
    | LeaveGroupResponse
    | OffsetCommitResponse
    | OffsetFetchResponse
    | ListGroupsResponse
    | DescribeGroupsResponse
    | DeleteGroupsResponse
)
