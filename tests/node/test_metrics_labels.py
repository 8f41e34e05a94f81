"""The per-route latency histogram's label set is bounded: unknown paths count as `unmatched` and
HTTP methods outside the usual seven (WebDAV and the like, which the
HTTP parser accepts) as `other`."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from harness.runtime.metrics import NodeMetrics


async def _requests(metrics: NodeMetrics) -> None:
    app = web.Application(middlewares=[metrics.middleware()])

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_route("*", "/kv/{key}", ok)
    async with TestClient(TestServer(app)) as client:
        for method, path in (("GET", "/kv/a"), ("GET", "/kv/b"), ("PROPFIND", "/kv/a"),
                             ("PURGE", "/nowhere"), ("DELETE", "/nowhere/else")):
            async with client.request(method, path) as response:
                await response.read()


def test_latency_labels_are_route_templates_and_known_methods() -> None:
    metrics = NodeMetrics(node=Any)  # type: ignore[arg-type]  # the collector is not scraped here
    asyncio.run(_requests(metrics))
    counts = {
        (s.labels["method"], s.labels["route"]): s.value
        for family in metrics.request_time_ms.collect() for s in family.samples
        if s.name.endswith("_count")
    }
    assert counts == {("GET", "/kv/{key}"): 2, ("other", "/kv/{key}"): 1,
                      ("other", "unmatched"): 1, ("DELETE", "unmatched"): 1}
