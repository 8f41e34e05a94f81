"""The page's HTTP server (aiohttp): the static page, its data, and its buttons.

    GET  /                     the page (harness/ui/static: plain HTML, CSS and JavaScript)
    GET  /static/{file}        its files
    GET  /api/info             {"mode": "live"|"replay", "title", "token_required"}
    GET  /api/stream           live: server-sent events, one `data:` JSON message per poll,
                               {"state", "events"}; the first one also has "reset": true and
                               the recent timeline
    GET  /api/replay           replay: the recording {"title", "frames", "anomalies", "events"}
    POST /api/nodes/{id}/{action}   live: kill, pause, resume, restart, start
    POST /api/links            live: {"groups": [[ids], ...]} cuts links between the groups
    DELETE /api/links          live: heal every link
    POST /api/produce          live: {"topic", "partition", "count", "acks"}

Why a server of its own, started by `kraftlab ui` next to the launcher, rather than routes on
the nodes' admin API: the page must outlive any node it shows (a page served by broker 102 dies
with the click that kills 102), its buttons act on processes (signals by PID and starting a node
are the launcher's, on this host, not a node's), and it combines every node's answers, which no
single node has. The nodes are untouched: the view polls the same read routes the CLI does.

Security, as the admin API's (harness/admin/auth.py, docs/operations.md "Security"):
- bound to 127.0.0.1 by default; bound to any other address, or on a cluster started with
  `kraftlab.admin.require.token=true`, every request that is not a read needs
  `Authorization: Bearer <the cluster's token>` (the same middleware, the same 401 body); reads
  (the page, the stream) stay open, as the admin API's do;
- a write whose `Origin` is not this server, or whose `Content-Type` is not JSON, is refused with
  403 (no other web site can make a visitor's browser press the buttons: a cross-site form or a
  no-CORS fetch cannot set a JSON content type, and carries its own origin);
- on loopback, a request whose `Host` is not a loopback name is refused (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from harness.admin.auth import READ_METHODS, auth_middleware
from harness.launcher.cluster import ClusterError
from harness.ui import actions
from harness.ui.live import LiveFeed
from harness.ui.timeline import changes

STATIC_FILES = {"index.html": "text/html", "ui.css": "text/css", "ui.js": "text/javascript"}
HEARTBEAT_S = 15.0
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def static_text(name: str) -> str:
    return resources.files("harness.ui").joinpath("static", name).read_text(encoding="utf-8")


def replay_document(recording: dict[str, Any]) -> dict[str, Any]:
    """The recording with its timeline: each frame's changes (harness/ui/timeline.py), tagged
    with the frame they lead to."""
    events = []
    previous = None
    for index, frame in enumerate(recording["frames"]):
        for event in changes(previous, frame["state"]):
            events.append({**event, "frame": index})
        previous = frame["state"]
    return {**recording, "events": events}


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _error(status: int, error: str, message: str) -> web.Response:
    return web.json_response({"error": error, "message": message}, status=status)


def guard_middleware(bound_host: str) -> Any:
    """403 for a cross-origin or non-JSON write; on loopback, 403 for a foreign Host name."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        host_name = (request.host or "").rsplit(":", 1)[0]
        if is_loopback(bound_host) and host_name not in LOOPBACK_NAMES:
            return _error(403, "INVALID_REQUEST", f"unexpected Host {request.host!r}")
        if request.method not in READ_METHODS:
            origin = request.headers.get("Origin")
            if origin is not None and urlsplit(origin).netloc != request.host:
                return _error(403, "INVALID_REQUEST", f"cross-origin request from {origin}")
            if request.content_type != "application/json" and request.method != "DELETE":
                return _error(403, "INVALID_REQUEST", "writes must be application/json")
        return await handler(request)

    return guard


class UiApp:
    """Handlers over one source: a live cluster (`feed`, `data_dir`) or a recording."""

    def __init__(self, *, title: str, feed: LiveFeed | None = None,
                 data_dir: Path | None = None, recording: dict[str, Any] | None = None,
                 token_required: bool = False) -> None:
        assert (feed is None) != (recording is None), "a live feed or a recording"
        self.title = title
        self.feed = feed
        self.data_dir = data_dir
        self.replay = replay_document(recording) if recording is not None else None
        self.token_required = token_required

    async def page(self, request: web.Request) -> web.Response:
        return web.Response(text=static_text("index.html"), content_type="text/html")

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC_FILES:
            raise web.HTTPNotFound()
        return web.Response(text=static_text(name), content_type=STATIC_FILES[name])

    async def info(self, request: web.Request) -> web.Response:
        return web.json_response({"mode": "live" if self.feed is not None else "replay",
                                  "title": self.title, "token_required": self.token_required})

    async def replay_data(self, request: web.Request) -> web.Response:
        if self.replay is None:
            return _error(404, "UNKNOWN_ROUTE", "this view is live; there is no recording")
        return web.json_response(self.replay)

    async def stream(self, request: web.Request) -> web.StreamResponse:
        feed = self.feed
        if feed is None:
            return _error(404, "UNKNOWN_ROUTE", "this view is a replay; there is no stream")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        queue = feed.subscribe()
        try:
            await response.write(_sse(feed.hello()))
            while True:
                try:
                    message = await asyncio.wait_for(queue.get(), HEARTBEAT_S)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                await response.write(_sse(message))
        except ConnectionResetError:
            pass  # the page went away
        finally:
            feed.unsubscribe(queue)
        return response

    # --- actions (live only) -----------------------------------------------------------------

    async def _act(self, kind: str, fn: Callable[..., str], *args: Any) -> web.Response:
        if self.feed is None or self.data_dir is None:
            return _error(404, "UNKNOWN_ROUTE", "actions need a live cluster")
        try:
            summary = await asyncio.to_thread(fn, self.data_dir, *args)
        except (actions.ActionError, ClusterError) as exc:
            self.feed.note("error", str(exc))
            return _error(409, "INVALID_REQUEST", str(exc))
        self.feed.note(kind, summary)
        return web.json_response({"done": summary})

    async def node_action(self, request: web.Request) -> web.Response:
        try:
            node_id = int(request.match_info["id"])
        except ValueError:
            return _error(400, "INVALID_REQUEST", "node id must be an integer")
        action = request.match_info["action"]
        if action not in actions.PROCESS_ACTIONS:
            return _error(400, "INVALID_REQUEST", f"unknown action {action!r}")
        return await self._act("fault", actions.process_action, node_id, action)

    async def links_cut(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        groups = body.get("groups") if isinstance(body, dict) else None
        if not isinstance(groups, list) or not all(
            isinstance(g, list) and all(isinstance(i, int) and not isinstance(i, bool)
                                        for i in g) for g in groups):
            return _error(400, "INVALID_REQUEST", "'groups' must be a list of lists of node ids")
        return await self._act("fault", actions.set_links, groups)

    async def links_heal(self, request: web.Request) -> web.Response:
        return await self._act("fault", actions.set_links, None)

    async def produce(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        if not isinstance(body, dict):
            return _error(400, "INVALID_REQUEST", "body must be a JSON object")
        topic, partition = body.get("topic"), body.get("partition", 0)
        count, acks = body.get("count", 10), str(body.get("acks", "all"))
        if not isinstance(topic, str) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in (partition, count)):
            return _error(400, "INVALID_REQUEST",
                          "'topic' must be a string, 'partition' and 'count' integers")
        return await self._act("produce", actions.produce_burst, topic, partition, count, acks)


async def _json_body(request: web.Request) -> Any:
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _sse(message: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(message, separators=(',', ':'))}\n\n".encode()


def build_app(ui: UiApp, *, bound_host: str, token: str | None) -> web.Application:
    middlewares: list[Any] = [guard_middleware(bound_host)]
    if ui.token_required:
        if token is None:
            raise ValueError("a token is required off loopback, and the cluster has none")
        middlewares.append(auth_middleware(token))
    app = web.Application(middlewares=middlewares, client_max_size=64 * 1024)
    r = app.router
    r.add_get("/", ui.page)
    r.add_get("/static/{name}", ui.static)
    r.add_get("/api/info", ui.info)
    r.add_get("/api/replay", ui.replay_data)
    r.add_get("/api/stream", ui.stream)
    r.add_post("/api/nodes/{id}/{action}", ui.node_action)
    r.add_post("/api/links", ui.links_cut)
    r.add_delete("/api/links", ui.links_heal)
    r.add_post("/api/produce", ui.produce)
    if ui.feed is not None:
        feed = ui.feed

        async def on_startup(app: web.Application) -> None:
            feed.start()

        async def on_cleanup(app: web.Application) -> None:
            await feed.stop()

        app.on_startup.append(on_startup)
        app.on_cleanup.append(on_cleanup)
    return app


def serve(app: web.Application, host: str, port: int, announce: Callable[[str], None]) -> None:
    """Serve until interrupted; `announce` gets the page's URL once it is listening."""

    async def run() -> None:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        runner = web.AppRunner(app, shutdown_timeout=1.0, handle_signals=False)
        await runner.setup()
        try:
            await web.SockSite(runner, sock).start()
            shown = f"[{host}]" if ":" in host else host
            announce(f"http://{shown}:{sock.getsockname()[1]}/")
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    asyncio.run(run())

