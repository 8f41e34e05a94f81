"""The native key/value client (harness/net/client.py) and the bench's load on it
(harness/bench/quorum.py `native_load`), against a small frame server on 127.0.0.1 that speaks
the client handshake and answers KvRequest frames by a rule of the test's choosing (no timing is
asserted)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import msgpack  # type: ignore[import-untyped]
import pytest

from harness.bench.quorum import native_load
from harness.net.client import ClientError, KvRequest, KvResponse, NativeKvClient
from harness.net.transport import FrameProtocol, frame
from quorum import codec

Rule = Callable[[KvRequest], KvResponse | None]  # None: close the connection instead


class FakeController(FrameProtocol):
    def __init__(self, rule: Rule, seen: list[KvRequest]) -> None:
        super().__init__()
        self.rule = rule
        self.seen = seen
        self.greeted = False

    def on_frame(self, payload: bytes) -> None:
        assert self.transport is not None
        if not self.greeted:
            hello = msgpack.unpackb(payload)
            assert hello["client"] is True and hello["cluster_id"] == "c1"
            self.greeted = True
            self.transport.write(frame(msgpack.packb({"ok": True, "node_id": 1})))
            return
        request = codec.decode(payload)
        assert isinstance(request, KvRequest)
        self.seen.append(request)
        answer = self.rule(request)
        if answer is None:
            self.transport.close()
            return
        self.transport.write(frame(codec.encode(answer)))


def served(rule: Rule, body: Callable[[NativeKvClient], Awaitable[Any]]) -> tuple[Any, list[KvRequest]]:
    seen: list[KvRequest] = []

    async def main() -> Any:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: FakeController(rule, seen), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = NativeKvClient()
        await client.connect("127.0.0.1", port, "c1")
        try:
            return await body(client)
        finally:
            client.close()
            server.close()
            await server.wait_closed()

    return asyncio.run(main()), seen


def ok(request: KvRequest) -> KvResponse:
    return KvResponse(request.request_id, "NONE", version=request.request_id + 100)


def test_submit_hands_back_every_answer_and_call_raises_on_errors() -> None:
    def rule(request: KvRequest) -> KvResponse:
        if request.key == "refused":
            return KvResponse(request.request_id, "NOT_CONTROLLER", leader_id=2)
        return ok(request)

    async def body(client: NativeKvClient) -> tuple[KvResponse, KvResponse, ClientError]:
        refused = await client.submit("put", "refused", "v")
        committed = await client.call("put", "k", "v")
        with pytest.raises(ClientError) as raised:
            await client.call("cas", "refused", "v2", expected="v")
        return refused, committed, raised.value

    (refused, committed, error), seen = served(rule, body)
    assert (refused.error, refused.leader_id) == ("NOT_CONTROLLER", 2)
    assert (committed.error, committed.version) == ("NONE", seen[1].request_id + 100)
    assert error.response.error == "NOT_CONTROLLER" and error.response.leader_id == 2
    assert [(r.op, r.key, r.value, r.expected) for r in seen] == [
        ("put", "refused", "v", None), ("put", "k", "v", None), ("cas", "refused", "v2", "v")]
    assert len({r.request_id for r in seen}) == 3


def test_submit_without_a_connection_raises_and_a_lost_one_fails_what_is_pending() -> None:
    with pytest.raises(ConnectionResetError):
        NativeKvClient().submit("put", "k", "v")

    async def body(client: NativeKvClient) -> list[BaseException | None]:
        futures = [client.submit("put", f"k{i}", "v") for i in range(3)]
        await asyncio.wait(futures)
        return [f.exception() for f in futures]

    errors, seen = served(lambda request: None, body)  # the first request closes the connection
    assert len(errors) == 3 and all(isinstance(e, ConnectionResetError) for e in errors)
    assert seen[0].key == "k0"


def test_native_load_counts_commits_and_errors_by_name() -> None:
    def rule(request: KvRequest) -> KvResponse:
        if request.request_id % 3 == 0:
            return KvResponse(request.request_id, "NOT_CONTROLLER", leader_id=2)
        return ok(request)

    async def body(client: NativeKvClient) -> Any:
        return await native_load(client, writers=4, duration_s=0.2, record=True)

    result, seen = served(rule, body)
    refused = sum(1 for r in seen if r.request_id % 3 == 0)
    assert result.commits == len(seen) - refused == len(result.latencies_ms) > 0
    assert dict(result.errors) == {"NOT_CONTROLLER": refused}
    assert {r.key.rsplit("-", 1)[0] for r in seen} == {"tput-0", "tput-1", "tput-2", "tput-3"}
    assert all(r.op == "put" and r.value is not None and len(r.value) == 100 for r in seen)


def test_native_load_ends_every_chain_when_the_connection_is_lost() -> None:
    answered = 0

    def rule(request: KvRequest) -> KvResponse | None:
        nonlocal answered
        answered += 1
        return ok(request) if answered <= 10 else None

    async def body(client: NativeKvClient) -> Any:
        return await native_load(client, writers=3, duration_s=60.0, record=False)

    result, _ = served(rule, body)
    assert result.commits == 10 and result.latencies_ms == []
    assert dict(result.errors) == {"connection lost": 3}
