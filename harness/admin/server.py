"""The controller's admin HTTP API (aiohttp), as API.md specifies it.

Routes: /health, /metrics, /openapi.json, /quorum/status, /quorum/replication, /kv/{key}
(GET/PUT/DELETE), /kv/{key}/cas (POST), /nemesis/links (GET/POST/DELETE); brokers and topics
(/cluster, /topics, /topics/{topic}, /elect-leaders, /partitions) live in harness/admin/topics.py,
produce and consume (/topics/{topic}/partitions/{p}/records) in harness/admin/records.py.
Brokers serve the same app (their writes and linearizable reads are forwarded).

Rules this module keeps:
- Bound to the node's admin listener (127.0.0.1 unless `kraftlab.bind.host` says otherwise);
  on any other address, or with `kraftlab.admin.require.token`, writes need the cluster's bearer
  token (harness/admin/auth.py); /metrics times every route (harness/runtime/metrics.py).
- Errors are `{"error": KAFKA_NAME, "message": ..., hints}`. Bad input (JSON, fields, query values)
  is 400 INVALID_REQUEST, never a 500; an unexpected exception is logged and answered as
  500 UNKNOWN_SERVER_ERROR (a bug, not a contract).
- A follower forwards writes and linearizable reads to the active controller (one hop: a forwarded
  request that meets a non-leader gets 421 NOT_CONTROLLER with the leader hint, never a loop).
  With no known leader: 503 LEADER_NOT_AVAILABLE with what this node knows (epoch, voters).
- A write that was proposed but whose outcome is unknown (leadership lost, timeout) is
  504 REQUEST_TIMED_OUT with `"indeterminate": true`: a client must not assume it did not happen.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import structlog
from aiohttp import web

from harness.admin.auth import auth_middleware, bearer
from harness.admin.openapi import openapi_document
from harness.admin.records import add_routes as add_record_routes
from harness.admin.topics import add_routes as add_topic_routes
from harness.net.transport import LinkFilter
from harness.runtime.metrics import CONTENT_TYPE
from harness.runtime.node import ControllerNode, NotLeaderError, OutcomeUnknownError
from quorum.metadata import Errors, KvCas, KvDelete, KvPut

log = structlog.get_logger()
FORWARDED_HEADER = "X-Kraftlab-Forwarded-By"
NODE_KEY: web.AppKey[ControllerNode] = web.AppKey("node", ControllerNode)
SESSION_KEY: web.AppKey[aiohttp.ClientSession] = web.AppKey("session", aiohttp.ClientSession)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BadRequest(Exception):
    """400 INVALID_REQUEST with this message."""


def error_response(status: int, error: str, message: str, **hints: Any) -> web.Response:
    return web.json_response({"error": error, "message": message, **hints}, status=status)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except BadRequest as exc:
        return error_response(400, "INVALID_REQUEST", str(exc))
    except web.HTTPException as exc:
        if exc.status >= 400 and exc.content_type != "application/json":
            name = "UNKNOWN_ROUTE" if exc.status in (404, 405) else "INVALID_REQUEST"
            if exc.status == 413:  # a body over client_max_size: named as an oversized batch is
                name = "MESSAGE_TOO_LARGE"
            return error_response(exc.status, name, exc.reason)
        raise
    except Exception as exc:  # the HTTP edge: a bug becomes a 500 with a log line, not a hang
        log.exception("admin.unhandled_error", path=request.path, method=request.method)
        return error_response(500, "UNKNOWN_SERVER_ERROR", f"{type(exc).__name__}: {exc}")


async def read_json_object(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json(loads=json.loads)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadRequest("body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    return body


def value_field(body: dict[str, Any], name: str, *, nullable: bool = False) -> str | bytes | None:
    """`name` as a UTF-8 string, or `name_b64` as bytes (API.md): one of them, never both
    (the OpenAPI document says `oneOf`; which one would win is not the client's guess to make)."""
    if name in body and f"{name}_b64" in body:
        raise BadRequest(f"give '{name}' or '{name}_b64', not both")
    if name in body:
        value = body[name]
        if value is None and nullable:
            return None
        if not isinstance(value, str):
            raise BadRequest(f"'{name}' must be a string" + (" or null" if nullable else ""))
        return value
    b64 = body.get(f"{name}_b64")
    if b64 is not None:
        if not isinstance(b64, str):
            raise BadRequest(f"'{name}_b64' must be a base64 string")
        try:
            return base64.b64decode(b64, validate=True)
        except ValueError:
            raise BadRequest(f"'{name}_b64' is not valid base64") from None
    if nullable:
        raise BadRequest(f"missing field '{name}' (use null for 'absent')")
    raise BadRequest(f"missing field '{name}'")


def encode_value(value: str | bytes) -> dict[str, Any]:
    if isinstance(value, bytes):
        return {"value_b64": base64.b64encode(value).decode()}
    return {"value": value}


def check_key(request: web.Request) -> str:
    key = request.match_info["key"]
    if not key or len(key) > 1024:
        raise BadRequest("key must be 1-1024 characters")
    return key


class AdminApi:
    """Handlers bound to one node."""

    def __init__(self, node: ControllerNode) -> None:
        self.node = node
        self.session: aiohttp.ClientSession | None = None

    # --- leader handling ---------------------------------------------------------------------

    def no_leader(self) -> web.Response:
        node = self.node
        return error_response(
            503,
            "LEADER_NOT_AVAILABLE",
            "no active controller is known; retry after an election",
            leader_id=None,
            leader_epoch=node.epoch,
            role=node.role,
            current_voters=sorted(node.config.voters),
        )

    async def forward(self, request: web.Request, body: bytes | None = None) -> web.StreamResponse:
        """Send this request to the leader's admin API and relay its answer verbatim."""
        node = self.node
        leader = node.leader_id
        if leader is None or leader == node.node_id:
            return self.no_leader()
        if FORWARDED_HEADER in request.headers:
            return error_response(
                421, "NOT_CONTROLLER", f"node {node.node_id} is not the active controller",
                leader=leader, leader_epoch=node.epoch,
            )
        target = node.config.admin_listeners[leader]
        url = f"http://{target.host}:{target.port}{request.rel_url}"
        if body is None and request.can_read_body:
            body = await request.read()
        assert self.session is not None
        timeout = aiohttp.ClientTimeout(total=node.config.request_timeout_ms / 1000 + 1)
        headers = {FORWARDED_HEADER: str(node.node_id), "Content-Type": "application/json"}
        if node.admin_token is not None:
            headers.update(bearer(node.admin_token))  # the leader may require it (admin_auth.py)
        try:
            async with self.session.request(
                request.method, url, data=body, timeout=timeout, headers=headers,
            ) as resp:
                payload = await resp.read()
                return web.Response(
                    body=payload, status=resp.status, content_type=resp.content_type
                )
        except (aiohttp.ClientError, TimeoutError) as exc:
            if request.method in ("GET", "HEAD") or isinstance(exc, aiohttp.ClientConnectorError):
                return error_response(
                    503, "LEADER_NOT_AVAILABLE", f"forwarding to leader {leader} failed: {exc!r}",
                    leader_id=leader, leader_epoch=node.epoch,
                )
            # Not a read and the connection was made: the write may have reached the leader
            # before the failure, so its outcome is unknown, never "did not happen" (found by
            # the Jepsen kv workload under kill-leader).
            return error_response(
                504, "REQUEST_TIMED_OUT",
                f"forwarding to leader {leader} failed, outcome unknown: {exc!r}",
                indeterminate=True, leader_id=leader, leader_epoch=node.epoch,
            )

    def leader_error(self, exc: NotLeaderError) -> web.Response:
        if exc.leader_id is None:
            return self.no_leader()
        return error_response(
            421, "NOT_CONTROLLER", str(exc), leader=exc.leader_id, leader_epoch=exc.epoch
        )

    @staticmethod
    def unknown_outcome(exc: OutcomeUnknownError) -> web.Response:
        return error_response(504, "REQUEST_TIMED_OUT", str(exc), indeterminate=True)

    # --- basic ------------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        node = self.node
        out = {"node_id": node.node_id, "role": node.role, "status": "ok",
               "process_roles": node.config.process_roles,
               "leader_id": node.leader_id, "leader_epoch": node.epoch}
        if node.broker is not None:
            out["broker"] = node.broker.status()
        return web.json_response(out)

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.node.metrics.render(),
                            headers={"Content-Type": CONTENT_TYPE})

    async def openapi(self, request: web.Request) -> web.Response:
        return web.json_response(openapi_document())

    async def quorum_status(self, request: web.Request) -> web.Response:
        return web.json_response(self.node.quorum_status())

    async def quorum_replication(self, request: web.Request) -> web.StreamResponse:
        node = self.node
        if not node.is_leader:
            return await self.forward(request)
        return web.json_response(node.quorum_replication())

    # --- kv ---------------------------------------------------------------------------------

    async def kv_get(self, request: web.Request) -> web.StreamResponse:
        key = check_key(request)
        consistency = request.query.get("consistency", "linearizable")
        if consistency not in ("linearizable", "local"):
            raise BadRequest("consistency must be 'linearizable' or 'local'")
        node = self.node
        if consistency == "linearizable":
            if not node.is_leader:
                return await self.forward(request)
            try:
                await node.read_barrier()
            except NotLeaderError as exc:
                return self.leader_error(exc)
            except OutcomeUnknownError as exc:
                return self.unknown_outcome(exc)
        found = node.image.get(key)
        if found is None:
            return error_response(404, "KEY_NOT_FOUND", f"key {key!r} not found",
                                  consistency=consistency)
        value, version = found
        out = {"key": key, **encode_value(value), "version": version}
        if consistency == "local":
            out["consistency"] = "local"  # may be stale (DESIGN.md: local reads are marked)
            out["applied_offset"] = node.image.applied_offset
        return web.json_response(out)

    async def _write(self, request: web.Request, record: Any, body: bytes | None) -> web.StreamResponse:
        node = self.node
        if not node.is_leader:
            return await self.forward(request, body)
        try:
            result = await node.propose(record)
        except NotLeaderError as exc:
            if exc.leader_id is not None and exc.leader_id != node.node_id:
                return await self.forward(request, body)
            return self.leader_error(exc)
        except OutcomeUnknownError as exc:
            return self.unknown_outcome(exc)
        key = record.key
        match result.error:
            case Errors.NONE:
                return web.json_response({"key": key, "version": result.version,
                                          "offset": result.offset})
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
        parsed = await read_json_object(request)
        value = value_field(parsed, "value")
        assert value is not None
        return await self._write(request, KvPut(key=key, value=value), body)

    async def kv_cas(self, request: web.Request) -> web.StreamResponse:
        key = check_key(request)
        body = await request.read()
        parsed = await read_json_object(request)
        expected = value_field(parsed, "expected", nullable=True)
        value = value_field(parsed, "value")
        assert value is not None
        return await self._write(request, KvCas(key=key, expected=expected, value=value), body)

    async def kv_delete(self, request: web.Request) -> web.StreamResponse:
        key = check_key(request)
        return await self._write(request, KvDelete(key=key), b"")

    # --- nemesis ----------------------------------------------------------------------------
    # The link filter (harness/net/transport.py LinkFilter) covers HTTP too. A request is *cut off*
    # when it comes from a cut-off source: a forwarded request (FORWARDED_HEADER names the node
    # that forwarded it) is peer traffic, cut iff that node is in `drop`; any other request is a
    # client's, cut iff `drop_clients`. A cut-off request is never executed: it is held, like a
    # packet lost in a partition, until the filter changes (or LOST_REQUEST_HOLD_S passes), then
    # its connection is aborted unanswered; an answer ready while its source is cut off is lost
    # the same way. /nemesis/* is never cut: it is the operator's out-of-band channel (Jepsen's
    # ssh + iptables), so a node can always be healed.

    LOST_REQUEST_HOLD_S = 120.0
    LINKS_FIELDS = frozenset({"drop", "delay_ms", "delay_to", "drop_clients"})

    def cut_off(self, request: web.Request) -> bool:
        if request.path.startswith("/nemesis/"):
            return False
        links = self.node.transport.links
        forwarded_by = request.headers.get(FORWARDED_HEADER, "")
        if forwarded_by.isdigit():
            return int(forwarded_by) in links.drop
        return links.drop_clients

    @web.middleware
    async def links_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not self.cut_off(request):
            response = await handler(request)
            if not self.cut_off(request):
                return response
        transport = self.node.transport
        try:
            async with asyncio.timeout(self.LOST_REQUEST_HOLD_S):
                while self.cut_off(request):
                    await transport.links_changed()
        except TimeoutError:
            pass
        if request.transport is not None:
            request.transport.abort()
        raise asyncio.CancelledError  # nothing is written on the aborted connection

    @staticmethod
    def _node_ids(body: dict[str, Any], name: str) -> frozenset[int]:
        value = body.get(name, [])
        if not isinstance(value, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2**31 for i in value
        ):
            raise BadRequest(f"'{name}' must be a list of node ids")
        return frozenset(value)

    async def links_get(self, request: web.Request) -> web.Response:
        return web.json_response(self.node.transport.links.to_json())

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
        return web.json_response(links.to_json())

    async def links_delete(self, request: web.Request) -> web.Response:
        self.node.transport.set_links(LinkFilter())
        return web.json_response(LinkFilter().to_json())


def build_app(node: ControllerNode) -> web.Application:
    api = AdminApi(node)
    middlewares: list[Any] = [error_middleware]
    if node is not None:  # None: only the router is wanted (the OpenAPI completeness test)
        middlewares.insert(0, node.metrics.middleware())  # outermost: times every answer
        if node.config.admin_token_required:
            assert node.admin_token is not None  # ControllerNode refuses to start without it
            middlewares.append(auth_middleware(node.admin_token))
    app = web.Application(middlewares=middlewares, client_max_size=4 * 1024 * 1024)
    app[NODE_KEY] = node

    async def on_startup(app: web.Application) -> None:
        api.session = aiohttp.ClientSession(
            # A fresh connection per forwarded request: aiohttp resends an idempotent request
            # once when a reused keep-alive connection turns out broken, which would turn "the
            # first send may have committed" into a clean "connection refused" (forward()).
            connector=aiohttp.TCPConnector(limit=256, force_close=True)
        )

    async def on_cleanup(app: web.Application) -> None:
        if api.session is not None:
            await api.session.close()

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
    app.middlewares.insert(0, api.links_middleware)  # outermost: a cut-off request runs nothing
    add_topic_routes(app, api)
    add_record_routes(app, api)
    return app
