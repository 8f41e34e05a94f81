"""Kafka API handlers of the classic group protocol: FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups.

Each handler turns the decoded wire request (any supported version) into the group
coordinator's typed request (coordinator/messages.py, which says what each old version maps to),
hands it to the broker's GroupHost (harness/runtime/group_host.py) and turns the one answer back
into the wire response of the same version. No group logic lives here: the rules are the core's
(docs/groups.md).

FindCoordinator answers from the broker's metadata image, as Kafka's does: the coordinator of a
group is the leader of partition `partition_for(group)` of `__consumer_offsets`. A missing topic
is created (through the active controller) and the client told COORDINATOR_NOT_AVAILABLE, to
retry; so is a partition without a leader. Transaction and share coordinators do not exist here:
INVALID_REQUEST.

Invariants: every request gets exactly one answer (the core's contract plus `Reply`); JoinGroup
and SyncGroup answers can come much later, and the listener keeps answers in request order per
connection (server.py), as Kafka does: clients talk to their coordinator on a connection of
their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import (  # type: ignore[import-untyped]
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (  # type: ignore[import-untyped]
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (  # type: ignore[import-untyped]
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)

import coordinator as c
from harness.kafka.answer import Reply
from harness.runtime.broker import BrokerNode
from harness.runtime.group_host import OFFSETS_TOPIC, GroupHost
from quorum.metadata.errors import Errors
from quorum.metadata.records import NO_LEADER

GROUP_KEY_TYPE = 0
# DescribeGroups v3+ include_authorized_operations: with no authorizer Kafka answers every
# operation a group supports (READ 3, DELETE 6, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS
# 11: AclOperation codes, as bit numbers); None encodes INT32_MIN, "not requested".
GROUP_OPERATIONS = frozenset({3, 6, 8, 10, 11})

# api key -> (request class, response class, min version, max version). Versions: everything
# kafka-python's codec has, except OffsetCommit v10 / OffsetFetch v10 (topics by id, KIP-848's
# consumer protocol era). KIP-896's Kafka 4.0 baseline is a subset (JoinGroup v2+, OffsetCommit
# v2+, OffsetFetch v1+...); the older ones are kept for old clients.
SUPPORTED: dict[int, tuple[Any, Any, int, int]] = {
    FindCoordinatorRequest.API_KEY: (FindCoordinatorRequest, FindCoordinatorResponse, 0, 6),
    JoinGroupRequest.API_KEY: (JoinGroupRequest, JoinGroupResponse, 0, 9),
    SyncGroupRequest.API_KEY: (SyncGroupRequest, SyncGroupResponse, 0, 5),
    HeartbeatRequest.API_KEY: (HeartbeatRequest, HeartbeatResponse, 0, 4),
    LeaveGroupRequest.API_KEY: (LeaveGroupRequest, LeaveGroupResponse, 0, 5),
    OffsetCommitRequest.API_KEY: (OffsetCommitRequest, OffsetCommitResponse, 2, 9),
    OffsetFetchRequest.API_KEY: (OffsetFetchRequest, OffsetFetchResponse, 1, 9),
    ListGroupsRequest.API_KEY: (ListGroupsRequest, ListGroupsResponse, 0, 5),
    DescribeGroupsRequest.API_KEY: (DescribeGroupsRequest, DescribeGroupsResponse, 0, 6),
    DeleteGroupsRequest.API_KEY: (DeleteGroupsRequest, DeleteGroupsResponse, 0, 2),
}


def _host(node: BrokerNode) -> GroupHost:
    assert node.broker is not None
    return node.broker.groups


def _call(node: BrokerNode, build: Callable[[int], c.GroupRequest],
          respond: Callable[[Any], None]) -> None:  # fmt: skip
    host = _host(node)
    host.call(build(host.next_request_id()), respond)


# --- FindCoordinator ----------------------------------------------------------------------------


def coordinator_of(node: BrokerNode, group_id: str) -> tuple[Errors, int, str, int]:
    """(error, node id, host, port) of the group's coordinator, from the image."""
    host = _host(node)
    count = host.offsets_topic_partitions()
    if count is None:
        host.ensure_offsets_topic()
        return Errors.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    image = node.image
    topic = image.topic(OFFSETS_TOPIC)
    assert topic is not None
    part = image.partition(topic.topic_id, c.partition_for(group_id, count))
    leader = NO_LEADER if part is None else part.leader
    broker = None if leader == NO_LEADER else image.broker(leader)
    endpoint = None if broker is None else broker.endpoint("kafka")
    if endpoint is None or not image.is_broker_usable(leader):
        return Errors.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return Errors.NONE, leader, endpoint.host, endpoint.port


def find_coordinator(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = FindCoordinatorResponse[version]
    keys = list(request.coordinator_keys) if version >= 4 else [request.key]
    key_type = request.key_type if version >= 1 else GROUP_KEY_TYPE
    answers = []
    for key in keys:
        if key_type != GROUP_KEY_TYPE:
            answers.append((key, Errors.INVALID_REQUEST, -1, "", -1,
                            "only group coordinators exist (no transactions, no share groups)"))
            continue
        error, node_id, host, port = coordinator_of(node, key)
        answers.append((key, error, node_id, host, port, None))
    if version >= 4:
        reply(cls(throttle_time_ms=0, coordinators=[
            cls.Coordinator(key=k, node_id=n, host=h, port=p, error_code=e.code,
                            error_message=m) for k, e, n, h, p, m in answers]))  # fmt: skip
        return
    _, e, n, h, p, m = answers[0]
    reply(cls(throttle_time_ms=0, error_code=e.code, error_message=m, node_id=n, host=h, port=p))


# --- membership ---------------------------------------------------------------------------------


def join_group(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = JoinGroupResponse[version]

    def respond(r: c.JoinGroupResponse) -> None:
        members = [cls.JoinGroupResponseMember(member_id=m.member_id,
                                               group_instance_id=m.group_instance_id,
                                               metadata=m.metadata) for m in r.members]  # fmt: skip
        reply(cls(throttle_time_ms=0, error_code=r.error.code, generation_id=r.generation_id,
                  protocol_type=r.protocol_type,
                  protocol_name=r.protocol_name if version >= 7 else r.protocol_name or "",
                  leader=r.leader, skip_assignment=r.skip_assignment, member_id=r.member_id,
                  members=members))  # fmt: skip

    session_ms = request.session_timeout_ms
    _call(node, lambda rid: c.JoinGroupRequest(
        rid, version, request.group_id, session_ms,
        request.rebalance_timeout_ms if version >= 1 else session_ms,
        request.member_id, request.protocol_type,
        tuple(c.JoinGroupProtocol(p.name, bytes(p.metadata)) for p in request.protocols),
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=reply.client_id, client_host=reply.client_host,
        reason=request.reason if version >= 8 else None), respond)  # fmt: skip


def sync_group(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = SyncGroupResponse[version]

    def respond(r: c.SyncGroupResponse) -> None:
        reply(cls(throttle_time_ms=0, error_code=r.error.code, protocol_type=r.protocol_type,
                  protocol_name=r.protocol_name, assignment=r.assignment))  # fmt: skip

    _call(node, lambda rid: c.SyncGroupRequest(
        rid, version, request.group_id, request.generation_id, request.member_id,
        group_instance_id=request.group_instance_id if version >= 3 else None,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None,
        assignments=tuple(c.SyncGroupAssignment(a.member_id, bytes(a.assignment))
                          for a in request.assignments)), respond)  # fmt: skip


def heartbeat(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = HeartbeatResponse[version]
    _call(node, lambda rid: c.HeartbeatRequest(
        rid, version, request.group_id, request.generation_id, request.member_id,
        group_instance_id=request.group_instance_id if version >= 3 else None),
        lambda r: reply(cls(throttle_time_ms=0, error_code=r.error.code)))  # fmt: skip


def leave_group(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = LeaveGroupResponse[version]
    if version >= 3:
        members = tuple(c.MemberIdentity(m.member_id, m.group_instance_id,
                                         m.reason if version >= 5 else None)
                        for m in request.members)  # fmt: skip
    else:
        members = (c.MemberIdentity(request.member_id),)

    def respond(r: c.LeaveGroupResponse) -> None:
        if version >= 3:
            reply(cls(throttle_time_ms=0, error_code=r.error.code, members=[
                cls.MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                   error_code=m.error.code) for m in r.members]))  # fmt: skip
            return
        # v0-2: one member, only the top-level error (coordinator/messages.py).
        error = r.error
        if error is Errors.NONE and r.members:
            error = r.members[0].error
        reply(cls(throttle_time_ms=0, error_code=error.code))

    _call(node, lambda rid: c.LeaveGroupRequest(rid, version, request.group_id, members), respond)


# --- offsets ------------------------------------------------------------------------------------


def offset_commit(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = OffsetCommitResponse[version]
    tcls = cls.OffsetCommitResponseTopic

    def respond(r: c.OffsetCommitResponse) -> None:
        reply(cls(throttle_time_ms=0, topics=[tcls(name=t.name, partitions=[
            tcls.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                               error_code=p.error.code)
            for p in t.partitions]) for t in r.topics]))  # fmt: skip

    topics = tuple(c.OffsetCommitTopic(t.name, tuple(
        c.OffsetCommitPartition(p.partition_index, p.committed_offset, p.committed_metadata,
                                p.committed_leader_epoch if version >= 6 else -1)
        for p in t.partitions)) for t in request.topics)  # fmt: skip
    _call(node, lambda rid: c.OffsetCommitRequest(
        rid, version, request.group_id, topics,
        generation_id=request.generation_id_or_member_epoch, member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 7 else None), respond)  # fmt: skip


def offset_fetch(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = OffsetFetchResponse[version]
    if version >= 8:
        groups = tuple(c.OffsetFetchGroup(g.group_id, None if g.topics is None else tuple(
            c.OffsetFetchTopic(t.name, tuple(t.partition_indexes)) for t in g.topics))
            for g in request.groups)  # fmt: skip
    else:
        topics = request.topics
        groups = (c.OffsetFetchGroup(request.group_id, None if topics is None else tuple(
            c.OffsetFetchTopic(t.name, tuple(t.partition_indexes)) for t in topics)),)  # fmt: skip
    require_stable = bool(request.require_stable) if version >= 7 else False

    def respond(r: c.OffsetFetchResponse) -> None:
        if version >= 8:
            gcls = cls.OffsetFetchResponseGroup
            tcls = gcls.OffsetFetchResponseTopics
            pcls = tcls.OffsetFetchResponsePartitions
            reply(cls(throttle_time_ms=0, groups=[gcls(
                group_id=g.group_id, error_code=g.error.code, topics=[tcls(name=t.name, partitions=[
                    pcls(partition_index=p.partition_index, committed_offset=p.committed_offset,
                         committed_leader_epoch=p.committed_leader_epoch, metadata=p.metadata,
                         error_code=p.error.code) for p in t.partitions]) for t in g.topics])
                for g in r.groups]))  # fmt: skip
            return
        g = r.groups[0]
        tcls = cls.OffsetFetchResponseTopic
        pcls = tcls.OffsetFetchResponsePartition
        error = g.error
        if version < 2 and error is not Errors.NONE:
            # v0-1 have no group-level error: every partition carries it (Kafka's
            # OffsetFetchResponse for old versions).
            parts = [(t.name, p, error) for t in groups[0].topics or () for p in t.partition_indexes]
            reply(cls(throttle_time_ms=0, topics=[
                tcls(name=name, partitions=[pcls(partition_index=p, committed_offset=-1,
                                                 committed_leader_epoch=-1, metadata="",
                                                 error_code=e.code)])
                for name, p, e in parts]))  # fmt: skip
            return
        reply(cls(throttle_time_ms=0, error_code=error.code, topics=[tcls(name=t.name, partitions=[
            pcls(partition_index=p.partition_index, committed_offset=p.committed_offset,
                 committed_leader_epoch=p.committed_leader_epoch, metadata=p.metadata,
                 error_code=p.error.code) for p in t.partitions]) for t in g.topics]))  # fmt: skip

    _call(node, lambda rid: c.OffsetFetchRequest(rid, version, groups, require_stable), respond)


# --- ListGroups, DescribeGroups, DeleteGroups ---------------------------------------------------


def list_groups(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = ListGroupsResponse[version]

    def respond(r: c.ListGroupsResponse) -> None:
        reply(cls(throttle_time_ms=0, error_code=r.error.code, groups=[
            cls.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type,
                            group_state=g.group_state, group_type=g.group_type)
            for g in r.groups]))  # fmt: skip

    _call(node, lambda rid: c.ListGroupsRequest(
        rid, version, tuple(request.states_filter) if version >= 4 else (),
        tuple(request.types_filter) if version >= 5 else ()), respond)  # fmt: skip


def describe_groups(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = DescribeGroupsResponse[version]
    gcls = cls.DescribedGroup
    operations = (set(GROUP_OPERATIONS) if version >= 3 and request.include_authorized_operations
                  else None)  # fmt: skip

    def respond(r: c.DescribeGroupsResponse) -> None:
        reply(cls(throttle_time_ms=0, groups=[gcls(
            error_code=g.error.code, error_message=None, group_id=g.group_id or "",
            group_state=g.group_state, protocol_type=g.protocol_type,
            protocol_data=g.protocol_data, authorized_operations=operations,
            members=[gcls.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                member_metadata=m.member_metadata, member_assignment=m.member_assignment)
                for m in g.members]) for g in r.groups]))  # fmt: skip

    _call(node, lambda rid: c.DescribeGroupsRequest(rid, version, tuple(request.groups)), respond)


def delete_groups(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = DeleteGroupsResponse[version]

    def respond(r: c.DeleteGroupsResponse) -> None:
        reply(cls(throttle_time_ms=0, results=[
            cls.DeletableGroupResult(group_id=g.group_id or "", error_code=g.error.code)
            for g in r.results]))  # fmt: skip

    _call(node, lambda rid: c.DeleteGroupsRequest(rid, version, tuple(request.groups_names)),
          respond)  # fmt: skip


HANDLERS: dict[int, Callable[[BrokerNode, int, Any, Reply], None]] = {
    FindCoordinatorRequest.API_KEY: find_coordinator,
    JoinGroupRequest.API_KEY: join_group,
    SyncGroupRequest.API_KEY: sync_group,
    HeartbeatRequest.API_KEY: heartbeat,
    LeaveGroupRequest.API_KEY: leave_group,
    OffsetCommitRequest.API_KEY: offset_commit,
    OffsetFetchRequest.API_KEY: offset_fetch,
    ListGroupsRequest.API_KEY: list_groups,
    DescribeGroupsRequest.API_KEY: describe_groups,
    DeleteGroupsRequest.API_KEY: delete_groups,
}
