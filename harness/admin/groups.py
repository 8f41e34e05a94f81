"""Consumer group routes of the admin API: GET /groups and GET /groups/{group}, answered by the
broker's group coordinator (harness/runtime/group_host.py) with the same typed requests the
Kafka listener sends it (ListGroups, DescribeGroups, OffsetFetch), so both views agree.

- GET /groups: the groups of the `__consumer_offsets` partitions THIS broker leads (as Kafka's
  ListGroups: a client asks every broker and merges, as `kraftlab group list` does).
- GET /groups/{group}: state, members with their assignments (decoded from the consumer
  protocol's bytes when the protocol type is "consumer") and committed offsets. A broker that is
  not the group's coordinator answers 421 NOT_COORDINATOR with `coordinator` (the leader of the
  group's offsets partition, from its image) so the caller asks there; no forwarding.

Errors: 400 INVALID_REQUEST on a controller (no coordinator there); 503
COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE while the coordinator loads or the
offsets topic has no leader.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from aiohttp import web

import coordinator as c
from harness.admin.http import error_response
from harness.runtime.broker import BrokerNode
from harness.runtime.group_host import OFFSETS_TOPIC, GroupHost
from quorum.metadata.errors import Errors
from quorum.metadata.records import NO_LEADER

CONSUMER_PROTOCOL = "consumer"


def decode_assignment(data: bytes) -> list[tuple[str, int]] | None:
    """The consumer protocol's Assignment (ConsumerProtocolAssignment.json v0-3: int16 version,
    [topic string, [partition int32]], user data): (topic, partition) pairs; None if the bytes
    are not one (another protocol type's opaque data)."""
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out: list[tuple[str, int]] = []
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = data[pos : pos + length].decode()
            pos += length
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            out += [(topic, p) for p in struct.unpack_from(f">{max(n, 0)}i", data, pos)]
            pos += 4 * max(n, 0)
        return out
    except (struct.error, UnicodeDecodeError):
        return None


class GroupRoutes:
    def __init__(self, node: BrokerNode) -> None:
        self.node = node

    def _host(self) -> GroupHost | None:
        return None if self.node.broker is None else self.node.broker.groups

    async def _ask(self, host: GroupHost, build: Any) -> Any:
        future: asyncio.Future[Any] = self.node.loop.create_future()
        host.call(build(host.next_request_id()),
                  lambda r: future.done() or future.set_result(r))  # fmt: skip
        return await future

    def _coordinator_hint(self, group: str) -> int | None:
        image = self.node.image
        topic = image.topic(OFFSETS_TOPIC)
        host = self._host()
        if topic is None or host is None:
            return None
        part = image.partition(topic.topic_id, c.partition_for(group, len(
            image.partitions(topic.topic_id))))  # fmt: skip
        return None if part is None or part.leader == NO_LEADER else part.leader

    def _error(self, error: Errors, group: str | None = None) -> web.Response:
        if error is Errors.NOT_COORDINATOR:
            return error_response(421, error.name, f"broker {self.node.node_id} is not the "
                                  f"coordinator of group {group!r}",
                                  coordinator=self._coordinator_hint(group or ""))  # fmt: skip
        status = 503 if error.retriable else 400
        return error_response(status, error.name, f"group coordinator: {error.name}")

    async def list_groups(self, request: web.Request) -> web.Response:
        host = self._host()
        if host is None:
            return error_response(400, "INVALID_REQUEST", "groups are served by brokers")
        r = await self._ask(host, lambda rid: c.ListGroupsRequest(rid, 5))
        if r.error is not Errors.NONE:
            return self._error(r.error)
        return web.json_response({"coordinator": self.node.node_id, "groups": [
            {"group": g.group_id, "protocol_type": g.protocol_type, "state": g.group_state}
            for g in sorted(r.groups, key=lambda g: g.group_id)]})  # fmt: skip

    async def describe_group(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        host = self._host()
        if host is None:
            return error_response(400, "INVALID_REQUEST", "groups are served by brokers")
        described = await self._ask(host, lambda rid: c.DescribeGroupsRequest(rid, 5, (group,)))
        g = described.groups[0]
        if g.error is not Errors.NONE:
            return self._error(g.error, group)
        fetched = await self._ask(host, lambda rid: c.OffsetFetchRequest(
            rid, 8, (c.OffsetFetchGroup(group, None),)))  # fmt: skip
        offsets = fetched.groups[0]
        if offsets.error is not Errors.NONE:
            return self._error(offsets.error, group)
        members = []
        for m in g.members:
            assignment = (decode_assignment(m.member_assignment)
                          if g.protocol_type == CONSUMER_PROTOCOL else None)  # fmt: skip
            members.append({
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "host": m.client_host,
                "assignment": [{"topic": t, "partition": p} for t, p in assignment or []]})
        return web.json_response({
            "group": group, "coordinator": self.node.node_id, "state": g.group_state,
            "protocol_type": g.protocol_type, "protocol": g.protocol_data, "members": members,
            "offsets": [{"topic": t.name, "partition": p.partition_index,
                         "offset": p.committed_offset, "leader_epoch": p.committed_leader_epoch,
                         "metadata": p.metadata}
                        for t in offsets.topics for p in t.partitions],
        })  # fmt: skip


def add_routes(app: web.Application, node: BrokerNode) -> None:
    routes = GroupRoutes(node)
    app.router.add_get("/groups", routes.list_groups)
    # [^/]+ rather than aiohttp's default [^{}/]+: a group id may contain braces.
    app.router.add_get("/groups/{group:[^/]+}", routes.describe_group)
