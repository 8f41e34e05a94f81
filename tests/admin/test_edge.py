"""The admin API's one middleware (harness/admin/edge.py) and its cheap answers
(harness/admin/http.py), on the real app (server.py `build_app`) over a stub node: errors keep
their Kafka names, every request that runs is timed under its route, writes need the token when
the node requires it, the link filter holds a cut-off request unexecuted and loses its
connection, and the kv answers are byte for byte what `json.dumps` and `web.json_response` gave.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from harness.admin.forward import FORWARDED_HEADER
from harness.admin.http import json_answer, kv_write_answer
from harness.admin.server import build_app
from harness.net.transport import LinkFilter
from harness.runtime.metrics import NodeMetrics
from quorum.metadata import Errors
from quorum.metadata.image import ApplyResult


class StubTransport:
    """The link filter and its change notification, as harness/net/transport.py has them."""

    def __init__(self) -> None:
        self.links = LinkFilter()
        self._changed = asyncio.Event()
        self.holding = asyncio.Event()  # set once a request waits for the filter to change

    def set_links(self, links: LinkFilter) -> None:
        self.links = links
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def links_changed(self) -> None:
        self.holding.set()
        await self._changed.wait()


class StubNode:
    """A leader whose proposals commit at once (offset = version = a counter)."""

    node_id = 1
    leader_id = 1
    epoch = 3
    role = "leader"
    is_leader = True
    broker = None
    active = None

    def __init__(self, token: str | None = None) -> None:
        self.admin_token = token
        self.config = SimpleNamespace(
            admin_token_required=token is not None, process_roles=["controller"],
            voters=[1, 2, 3], admin_listeners={}, request_timeout_ms=5_000,
            liveness_interval_ms=25,
        )  # fmt: skip
        self.transport = StubTransport()
        self.metrics = NodeMetrics(self)  # type: ignore[arg-type]  # never scraped here
        self.proposed: list[Any] = []
        self.on_propose: Callable[[Any], None] | None = None

    async def propose(self, record: Any) -> ApplyResult:
        if self.on_propose is not None:
            self.on_propose(record)
        self.proposed.append(record)
        offset = len(self.proposed) + 100
        return ApplyResult(offset, record, Errors.NONE, offset)

    def leader_silent_ms(self) -> int:
        return 0


def served(node: StubNode, body: Callable[[TestClient[Any, Any]], Awaitable[None]]) -> None:
    async def main() -> None:
        app = build_app(node)  # type: ignore[arg-type]
        async with TestClient(TestServer(app)) as client:
            await body(client)

    asyncio.run(main())


def timed(node: StubNode) -> dict[tuple[str, str], float]:
    return {
        (s.labels["method"], s.labels["route"]): s.value
        for family in node.metrics.request_time_ms.collect() for s in family.samples
        if s.name.endswith("_count")
    }


# --- answers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["k", 'quote"and\\back', "ünïcødé", "tab\there", "{braces}", "/"])
@pytest.mark.parametrize("version", [7, None])
def test_kv_write_answer_is_json_dumps_byte_for_byte(key: str, version: int | None) -> None:
    answer = kv_write_answer(key, version, 7)
    assert answer.body == json.dumps({"key": key, "version": version, "offset": 7}).encode()
    assert answer.headers["Content-Type"] == "application/json; charset=utf-8"
    assert answer.status == 200


def test_json_answer_is_web_json_response_byte_for_byte() -> None:
    data = {"error": "NOT_CONTROLLER", "message": "ü", "leader": 2, "voters": [1, 2, 3]}
    ours, theirs = json_answer(data, 421), web.json_response(data, status=421)
    assert ours.body == theirs.body
    assert (ours.status, ours.headers["Content-Type"]) == (421, theirs.headers["Content-Type"])


# --- the route and its errors -------------------------------------------------------------------


def test_a_put_commits_and_is_timed_under_its_route() -> None:
    node = StubNode()

    async def body(client: TestClient[Any, Any]) -> None:
        async with client.put("/kv/a%20b", json={"value": "v1"}) as resp:
            assert resp.status == 200
            assert await resp.read() == b'{"key": "a b", "version": 101, "offset": 101}'
        async with client.put("/kv/c", data="{\"value\": \"caf\xe9\"}".encode("latin-1"),
                              headers={"Content-Type": "application/json; charset=latin-1"}) as resp:
            assert resp.status == 200

    served(node, body)
    assert [(r.key, r.value) for r in node.proposed] == [("a b", "v1"), ("c", "café")]
    assert timed(node) == {("PUT", "/kv/{key}"): 2}


@pytest.mark.parametrize(("data", "message"), [
    (b"{not json", "body is not valid JSON"),
    (b"[1, 2]", "body must be a JSON object"),
    (b"\xff\xfe", "body is not valid JSON"),
    (b'{"value": 5}', "'value' must be a string"),
    (b"{}", "missing field 'value'"),
])
def test_bad_bodies_are_400_invalid_request_and_propose_nothing(data: bytes, message: str) -> None:
    node = StubNode()

    async def body(client: TestClient[Any, Any]) -> None:
        async with client.put("/kv/k", data=data) as resp:
            assert resp.status == 400
            assert await resp.json() == {"error": "INVALID_REQUEST", "message": message}

    served(node, body)
    assert node.proposed == []
    assert timed(node) == {("PUT", "/kv/{key}"): 1}


def test_a_body_in_an_unknown_charset_is_400_not_a_500() -> None:
    node = StubNode()

    async def body(client: TestClient[Any, Any]) -> None:
        async with client.put("/kv/k", data=b'{"value": "v"}',
                              headers={"Content-Type": "application/json; charset=nope"}) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"] == "INVALID_REQUEST"

    served(node, body)
    assert node.proposed == []


def test_aiohttps_own_errors_keep_their_kafka_names() -> None:
    node = StubNode()

    async def body(client: TestClient[Any, Any]) -> None:
        async with client.get("/no/such/route") as resp:
            assert (resp.status, (await resp.json())["error"]) == (404, "UNKNOWN_ROUTE")
        async with client.post("/kv/k") as resp:
            assert (resp.status, (await resp.json())["error"]) == (405, "UNKNOWN_ROUTE")
        async with client.put("/kv/k", data=b" " * (4 * 1024 * 1024 + 1)) as resp:
            assert (resp.status, (await resp.json())["error"]) == (413, "MESSAGE_TOO_LARGE")

    served(node, body)
    assert node.proposed == []
    assert timed(node) == {("GET", "unmatched"): 1, ("POST", "unmatched"): 1,
                           ("PUT", "/kv/{key}"): 1}


def test_a_bug_is_a_logged_500_not_a_hang() -> None:
    node = StubNode()

    def broken(record: Any) -> None:
        raise RuntimeError("planted")

    node.on_propose = broken

    async def body(client: TestClient[Any, Any]) -> None:
        async with client.put("/kv/k", json={"value": "v"}) as resp:
            assert resp.status == 500
            assert await resp.json() == {"error": "UNKNOWN_SERVER_ERROR",
                                         "message": "RuntimeError: planted"}

    with structlog.testing.capture_logs() as logs:
        served(node, body)
    events = [e for e in logs if e["event"] == "admin.unhandled_error"]
    assert len(events) == 1 and events[0]["method"] == "PUT" and events[0]["path"] == "/kv/k"
    assert events[0]["log_level"] == "error"
    assert timed(node) == {("PUT", "/kv/{key}"): 1}


# --- the token ----------------------------------------------------------------------------------


def test_writes_need_the_token_reads_do_not() -> None:
    node = StubNode(token="s3cret")

    async def body(client: TestClient[Any, Any]) -> None:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
            async with client.put("/kv/k", json={"value": "v"}, headers=headers) as resp:
                assert resp.status == 401
                assert resp.headers["WWW-Authenticate"] == 'Bearer realm="kraftlab"'
                answer = await resp.json()
                assert answer["error"] == "SASL_AUTHENTICATION_FAILED"
                assert "s3cret" not in json.dumps(answer)
        async with client.get("/health") as resp:
            assert resp.status == 200
        async with client.put("/kv/k", json={"value": "v"},
                              headers={"Authorization": "Bearer s3cret"}) as resp:
            assert resp.status == 200

    with structlog.testing.capture_logs() as logs:
        served(node, body)
    assert len(node.proposed) == 1
    refused = [e for e in logs if e["event"] == "admin.unauthorized"]
    assert len(refused) == 3 and "s3cret" not in repr(logs)
    assert timed(node) == {("PUT", "/kv/{key}"): 4, ("GET", "/health"): 1}


# --- the link filter ----------------------------------------------------------------------------


async def _lost(client: TestClient[Any, Any], node: StubNode, method: str, path: str,
                **kwargs: Any) -> None:
    """The request is held (never answered) until the filter heals, then its connection is
    aborted: the client sees a disconnect, never an answer."""
    request = asyncio.ensure_future(client.request(method, path, **kwargs))
    await node.transport.holding.wait()
    assert not request.done()
    node.transport.set_links(LinkFilter())
    with pytest.raises(aiohttp.ClientError):
        resp = await request
        await resp.read()
    node.transport.holding.clear()


def test_a_cut_off_client_write_is_never_executed_and_its_connection_is_lost() -> None:
    node = StubNode()

    async def body(client: TestClient[Any, Any]) -> None:
        node.transport.set_links(LinkFilter(drop_clients=True))
        await _lost(client, node, "PUT", "/kv/k", json={"value": "v"})
        async with client.put("/kv/k", json={"value": "after"}) as resp:  # healed
            assert resp.status == 200

    served(node, body)
    assert [r.value for r in node.proposed] == ["after"]
    assert timed(node) == {("PUT", "/kv/{key}"): 1}  # the lost request never ran


def test_forwarded_requests_are_cut_by_the_forwarding_peer_and_nemesis_never() -> None:
    node = StubNode()

    async def body(client: TestClient[Any, Any]) -> None:
        node.transport.set_links(LinkFilter(drop=frozenset({2})))
        async with client.put("/kv/a", json={"value": "from 3"},
                              headers={FORWARDED_HEADER: "3"}) as resp:
            assert resp.status == 200
        async with client.put("/kv/b", json={"value": "client"}) as resp:
            assert resp.status == 200  # clients are cut only by drop_clients
        node.transport.set_links(LinkFilter(drop=frozenset({2}), drop_clients=True))
        async with client.get("/nemesis/links") as resp:  # the operator's channel stays open
            assert (await resp.json())["drop_clients"] is True
        await _lost(client, node, "PUT", "/kv/c", json={"value": "from 2"},
                    headers={FORWARDED_HEADER: "2"})

    served(node, body)
    assert [r.value for r in node.proposed] == ["from 3", "client"]


def test_an_answer_ready_while_its_source_is_cut_off_is_lost() -> None:
    node = StubNode()
    node.on_propose = lambda record: node.transport.set_links(LinkFilter(drop_clients=True))

    async def body(client: TestClient[Any, Any]) -> None:
        await _lost(client, node, "PUT", "/kv/k", json={"value": "v"})

    served(node, body)
    assert [r.value for r in node.proposed] == ["v"]  # executed: its outcome is unknown
    assert timed(node) == {("PUT", "/kv/{key}"): 1}
