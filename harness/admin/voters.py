"""Voter changes over the admin API (KIP-853; `kraftlab quorum add-controller |
remove-controller`): the AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter RPCs as routes.

    POST   /quorum/voters            {"node_id", "endpoint": "host:port"}  AddRaftVoter
    PUT    /quorum/voters/{node_id}  {"endpoint": "host:port"}             UpdateRaftVoter
    DELETE /quorum/voters/{node_id}                                         RemoveRaftVoter

A non-leader forwards to the leader (as every write). The answer comes once the VotersRecord is
committed: 200 with the voter set, or Kafka's error name (quorum/raft/membership.py says when
each happens): DUPLICATE_VOTER 409, VOTER_NOT_FOUND 404, INVALID_REQUEST 400,
UNSUPPORTED_VERSION 400, REQUEST_TIMED_OUT 503 (retriable: another change is in flight or
uncommitted, the new voter has not caught up, or the record did not commit in time),
NOT_LEADER_OR_FOLLOWER 503 with `indeterminate` (leadership moved; the change may still commit).
"""

from __future__ import annotations

from typing import Any, Protocol

from aiohttp import web

from harness.admin.context import AdminNode
from harness.admin.forward import LeaderForwarding
from harness.admin.http import BadRequest, error_response, read_json_object
from harness.runtime.context import VoterChangeError

STATUS = {
    "DUPLICATE_VOTER": 409,
    "VOTER_NOT_FOUND": 404,
    "INVALID_REQUEST": 400,
    "UNSUPPORTED_VERSION": 400,
    "REQUEST_TIMED_OUT": 503,
    "NOT_LEADER_OR_FOLLOWER": 503,
}


class VoterNode(AdminNode, Protocol):
    async def change_voters(self, kind: str, node_id: int, endpoint: str = "") -> None: ...


def _node_id(raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise BadRequest("'node_id' must be a non-negative integer")
    return raw


def _endpoint(body: dict[str, Any]) -> str:
    endpoint = body.get("endpoint", "")
    host, _, port = endpoint.rpartition(":") if isinstance(endpoint, str) else ("", "", "")
    if not (host and port.isdigit() and 0 < int(port) < 65536):
        raise BadRequest("'endpoint' must be 'host:port' (the controller's RPC listener)")
    return str(endpoint)


class VoterRoutes:
    def __init__(self, node: VoterNode, leader: LeaderForwarding) -> None:
        self.node = node
        self.leader = leader

    async def add(self, request: web.Request) -> web.StreamResponse:
        body = await read_json_object(request)
        node_id, endpoint = _node_id(body.get("node_id")), _endpoint(body)
        return await self._change(request, "add", node_id, endpoint)

    async def update(self, request: web.Request) -> web.StreamResponse:
        body = await read_json_object(request)
        return await self._change(request, "update", self._path_id(request), _endpoint(body))

    async def remove(self, request: web.Request) -> web.StreamResponse:
        return await self._change(request, "remove", self._path_id(request), "")

    @staticmethod
    def _path_id(request: web.Request) -> int:
        raw = request.match_info["node_id"]
        if not raw.isdigit():
            raise BadRequest("node id must be a non-negative integer")
        return int(raw)

    async def _change(
        self, request: web.Request, kind: str, node_id: int, endpoint: str
    ) -> web.StreamResponse:
        node = self.node
        if not node.is_leader:
            body = await request.read() if request.can_read_body else None
            return await self.leader.forward(request, body)
        try:
            await node.change_voters(kind, node_id, endpoint)
        except VoterChangeError as exc:
            hints: dict[str, Any] = {"leader_id": node.leader_id, "leader_epoch": node.epoch}
            if exc.error == "NOT_LEADER_OR_FOLLOWER":
                hints["indeterminate"] = True
            return error_response(STATUS.get(exc.error, 500), exc.error, exc.message, **hints)
        status = node.raft_status()
        return web.json_response({"kind": kind, "node_id": node_id,
                                  "current_voters": list(status.voters)})


def add_routes(app: web.Application, node: AdminNode, leader: LeaderForwarding) -> None:
    routes = VoterRoutes(node, leader)  # type: ignore[arg-type]  # the node has change_voters
    r = app.router
    r.add_post("/quorum/voters", routes.add)
    r.add_put("/quorum/voters/{node_id}", routes.update)
    r.add_delete("/quorum/voters/{node_id}", routes.remove)
