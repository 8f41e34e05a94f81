"""The controller's admin HTTP API (aiohttp), as docs/api.md specifies it.

Routes: /health, /metrics, /openapi.json, /quorum/status, /quorum/replication, /kv/{key}
(GET/PUT/DELETE), /kv/{key}/cas (POST), /nemesis/links and /nemesis/clock (GET/POST/DELETE);
brokers and topics
(/cluster, /topics, /topics/{topic}, /elect-leaders, /partitions) live in harness/admin/topics.py,
produce and consume (/topics/{topic}/partitions/{p}/records) in harness/admin/records.py,
consumer groups (/groups, /groups/{group}) in harness/admin/groups.py.
Brokers serve the same app (their writes and linearizable reads are forwarded).

Rules this module keeps:
- Bound to the node's admin listener (127.0.0.1 unless `kraftlab.bind.host` says otherwise);
  on any other address, or with `kraftlab.admin.require.token`, writes need the cluster's bearer
  token (harness/admin/auth.py); /metrics times every route (harness/runtime/metrics.py).
- Errors are `{"error": KAFKA_NAME, "message": ..., hints}`. Bad input (JSON, fields, query values)
  is 400 INVALID_REQUEST, never a 500; an unexpected exception is logged and answered as
  500 UNKNOWN_SERVER_ERROR (a bug, not a contract): harness/admin/http.py, shared by every route.
- The link filter, the timer, the token and the error mapping are one middleware
  (harness/admin/edge.py): one coroutine per request instead of four.
- A follower forwards writes and linearizable reads to the active controller (one hop: a forwarded
  request that meets a non-leader gets 421 NOT_CONTROLLER with the leader hint, never a loop).
  With no known leader: 503 LEADER_NOT_AVAILABLE with what this node knows (epoch, voters).
  harness/admin/forward.py, shared with topics.py.
- The node is an `AdminNode` (harness/admin/context.py): a protocol, never the node class.
- A write that was proposed but whose outcome is unknown (leadership lost, timeout) is
  504 REQUEST_TIMED_OUT with `"indeterminate": true`: a client must not assume it did not happen.
"""

from __future__ import annotations

from typing import Any

import structlog
from aiohttp import web

from harness.admin.context import AdminNode
from harness.admin.edge import edge_middleware
from harness.admin.forward import LeaderForwarding, forwarding_session
from harness.admin.groups import add_routes as add_group_routes
from harness.admin.http import (
    BadRequest,
    encode_value,
    error_response,
    json_answer,
    kv_write_answer,
    parse_json_object,
    read_json_object,
    value_field,
)
from harness.admin.openapi import openapi_document
from harness.admin.records import add_routes as add_record_routes
from harness.admin.topics import add_routes as add_topic_routes
from harness.admin.voters import add_routes as add_voter_routes
from harness.net.transport import LinkFilter
from harness.runtime.clock import ClockError
from harness.runtime.context import NotLeaderError, OutcomeUnknownError
from harness.runtime.metrics import CONTENT_TYPE
from quorum.metadata import Errors, KvCas, KvDelete, KvPut

NODE_KEY: web.AppKey[AdminNode] = web.AppKey("node", AdminNode)
log = structlog.get_logger()


def check_key(request: web.Request) -> str:
    key = request.match_info["key"]
    if not key or len(key) > 1024:
        raise BadRequest("key must be 1-1024 characters")
    return key


class AdminApi:
    """The routes of this module, bound to one node."""

    def __init__(self, node: AdminNode, leader: LeaderForwarding) -> None:
        self.node = node
        self.leader = leader

    # --- basic ------------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        node = self.node
        out = {"node_id": node.node_id, "role": node.role, "status": "ok",
               "process_roles": node.config.process_roles,
               "leader_id": node.leader_id, "leader_epoch": node.epoch}
        if node.broker is not None:
            out["broker"] = node.broker.status()
        return json_answer(out)

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.node.metrics.render(),
                            headers={"Content-Type": CONTENT_TYPE})

    async def openapi(self, request: web.Request) -> web.Response:
        return json_answer(openapi_document())

    async def quorum_status(self, request: web.Request) -> web.Response:
        return json_answer(self.node.quorum_status())

    async def quorum_replication(self, request: web.Request) -> web.StreamResponse:
        node = self.node
        if not node.is_leader:
            return await self.leader.forward(request)
        return json_answer(node.quorum_replication())

    # --- kv ---------------------------------------------------------------------------------

    async def kv_get(self, request: web.Request) -> web.StreamResponse:
        key = check_key(request)
        consistency = request.query.get("consistency", "linearizable")
        if consistency not in ("linearizable", "local"):
            raise BadRequest("consistency must be 'linearizable' or 'local'")
        node = self.node
        if consistency == "linearizable":
            if not node.is_leader:
                return await self.leader.forward(request)
            try:
                await node.read_barrier()
            except NotLeaderError as exc:
                return self.leader.leader_error(exc)
            except OutcomeUnknownError as exc:
                return self.leader.unknown_outcome(exc)
        found = node.image.get(key)
        if found is None:
            return error_response(404, "KEY_NOT_FOUND", f"key {key!r} not found",
                                  consistency=consistency)
        value, version = found
        out = {"key": key, **encode_value(value), "version": version}
        if consistency == "local":
            out["consistency"] = "local"  # may be stale: local reads are marked
            out["applied_offset"] = node.image.applied_offset
        return json_answer(out)

    async def _write(self, request: web.Request, record: Any, body: bytes | None) -> web.StreamResponse:
        node = self.node
        if not node.is_leader:
            return await self.leader.forward(request, body)
        try:
            result = await node.propose(record)
        except NotLeaderError as exc:
            if exc.leader_id is not None and exc.leader_id != node.node_id:
                return await self.leader.forward(request, body)
            return self.leader.leader_error(exc)
        except OutcomeUnknownError as exc:
            return self.leader.unknown_outcome(exc)
        key = record.key
        match result.error:
            case Errors.NONE:
                return kv_write_answer(key, result.version, result.offset)
            case Errors.CAS_FAILED:
                return error_response(409, "CAS_FAILED", f"current value of {key!r} differs",
                                      key=key, version=result.version)
            case Errors.KEY_NOT_FOUND:
                return error_response(404, "KEY_NOT_FOUND", f"key {key!r} not found", key=key)
            case other:
                return error_response(400, other.name, f"write rejected: {other.name}", key=key)

    async def kv_put(self, request: web.Request) -> web.StreamResponse:
        key = check_key(request)
        body = await request.read()
        value = value_field(parse_json_object(body, request.charset), "value")
        assert value is not None
        return await self._write(request, KvPut(key=key, value=value), body)

    async def kv_cas(self, request: web.Request) -> web.StreamResponse:
        key = check_key(request)
        body = await request.read()
        parsed = parse_json_object(body, request.charset)
        expected = value_field(parsed, "expected", nullable=True)
        value = value_field(parsed, "value")
        assert value is not None
        return await self._write(request, KvCas(key=key, expected=expected, value=value), body)

    async def kv_delete(self, request: web.Request) -> web.StreamResponse:
        key = check_key(request)
        return await self._write(request, KvDelete(key=key), b"")

    # --- nemesis ----------------------------------------------------------------------------
    # The link filter (harness/net/transport.py LinkFilter) covers HTTP too: harness/admin/edge.py
    # holds a request from a cut-off source unexecuted and aborts its connection; /nemesis/* is
    # never cut, so a node can always be healed.

    LINKS_FIELDS = frozenset({"drop", "delay_ms", "delay_to", "drop_clients"})

    @staticmethod
    def _node_ids(body: dict[str, Any], name: str) -> frozenset[int]:
        value = body.get(name, [])
        if not isinstance(value, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2**31 for i in value
        ):
            raise BadRequest(f"'{name}' must be a list of node ids")
        return frozenset(value)

    async def links_get(self, request: web.Request) -> web.Response:
        return json_answer(self.node.transport.links.to_json())

    async def links_post(self, request: web.Request) -> web.Response:
        body = await read_json_object(request)
        unknown = sorted(set(body) - self.LINKS_FIELDS)
        if unknown:
            raise BadRequest(f"unknown field '{unknown[0]}'; fields are "
                             f"{', '.join(sorted(self.LINKS_FIELDS))}")
        drop = self._node_ids(body, "drop")
        delay_ms = body.get("delay_ms", 0)
        if not isinstance(delay_ms, int) or isinstance(delay_ms, bool) or not 0 <= delay_ms <= 60_000:
            raise BadRequest("'delay_ms' must be an integer in [0, 60000]")
        delay_to = self._node_ids(body, "delay_to") if "delay_to" in body else None
        drop_clients = body.get("drop_clients", False)
        if not isinstance(drop_clients, bool):
            raise BadRequest("'drop_clients' must be true or false")
        links = LinkFilter(drop=drop, delay_ms=delay_ms, delay_to=delay_to,
                           drop_clients=drop_clients)
        self.node.transport.set_links(links)
        return json_answer(links.to_json())

    async def links_delete(self, request: web.Request) -> web.Response:
        self.node.transport.set_links(LinkFilter())
        return json_answer(LinkFilter().to_json())

    # The clock nemesis (harness/runtime/clock.py): step this process's clock (`jump_ms`, may be
    # negative) and/or set its rate; DELETE puts it back in step with the machine. Guarded like
    # /nemesis/links (a write: the bearer token beyond 127.0.0.1), never cut by the link filter.
    CLOCK_FIELDS = frozenset({"jump_ms", "rate"})
    MAX_JUMP_MS = 3_600_000

    async def clock_get(self, request: web.Request) -> web.Response:
        return json_answer(self.node.clock.to_json())

    async def clock_post(self, request: web.Request) -> web.Response:
        body = await read_json_object(request)
        unknown = sorted(set(body) - self.CLOCK_FIELDS)
        if unknown or not body:
            raise BadRequest(f"give one or both of the fields {', '.join(sorted(self.CLOCK_FIELDS))}"
                             + (f"; unknown field '{unknown[0]}'" if unknown else ""))
        jump_ms = body.get("jump_ms", 0)
        if (not isinstance(jump_ms, int) or isinstance(jump_ms, bool)
                or abs(jump_ms) > self.MAX_JUMP_MS):
            raise BadRequest(f"'jump_ms' must be an integer in [-{self.MAX_JUMP_MS}, "
                             f"{self.MAX_JUMP_MS}]")
        rate = body.get("rate")
        if rate is not None:
            if not isinstance(rate, int | float) or isinstance(rate, bool):
                raise BadRequest("'rate' must be a number")
            try:
                self.node.clock.set_rate(float(rate))
            except ClockError as exc:
                raise BadRequest(str(exc)) from None
        if jump_ms:
            self.node.clock.jump(jump_ms)
        log.warning("nemesis.clock_changed", jump_ms=jump_ms, rate=rate,
                    skew_ms=round(self.node.clock.skew_ms()))
        return json_answer(self.node.clock.to_json())

    async def clock_delete(self, request: web.Request) -> web.Response:
        self.node.clock.reset()
        log.warning("nemesis.clock_reset")
        return json_answer(self.node.clock.to_json())


def build_app(node: AdminNode) -> web.Application:
    leader = LeaderForwarding(node)
    api = AdminApi(node, leader)
    token: str | None = None
    if node is not None and node.config.admin_token_required:
        assert node.admin_token is not None  # the node refuses to start without it
        token = node.admin_token
    # None: only the router is wanted (the OpenAPI completeness test).
    middlewares = [edge_middleware(node, token)] if node is not None else []
    app = web.Application(middlewares=middlewares, client_max_size=4 * 1024 * 1024)
    app[NODE_KEY] = node

    async def on_startup(app: web.Application) -> None:
        leader.session = forwarding_session()

    async def on_cleanup(app: web.Application) -> None:
        if leader.session is not None:
            await leader.session.close()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    r = app.router
    r.add_get("/health", api.health)
    r.add_get("/metrics", api.metrics)
    r.add_get("/openapi.json", api.openapi)
    r.add_get("/quorum/status", api.quorum_status)
    r.add_get("/quorum/replication", api.quorum_replication)
    # [^/]+ rather than aiohttp's default [^{}/]+: a key may contain braces (found by the fuzz).
    r.add_get("/kv/{key:[^/]+}", api.kv_get)
    r.add_put("/kv/{key:[^/]+}", api.kv_put)
    r.add_delete("/kv/{key:[^/]+}", api.kv_delete)
    r.add_post("/kv/{key:[^/]+}/cas", api.kv_cas)
    r.add_get("/nemesis/links", api.links_get)
    r.add_post("/nemesis/links", api.links_post)
    r.add_delete("/nemesis/links", api.links_delete)
    r.add_get("/nemesis/clock", api.clock_get)
    r.add_post("/nemesis/clock", api.clock_post)
    r.add_delete("/nemesis/clock", api.clock_delete)
    add_topic_routes(app, node, leader)
    add_record_routes(app, node)
    add_group_routes(app, node)
    add_voter_routes(app, node, leader)
    return app
