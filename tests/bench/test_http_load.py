"""The bench's HTTP/1.1 load generator (harness/bench/http_load.py) counts only what happened: a
write counts when its answer is 200 with the promised body; every other answer, a lost
connection or bytes it cannot frame is counted under an error name. Served here by small aiohttp
apps on 127.0.0.1 (no timing is asserted)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from harness.admin.client import register_token
from harness.bench.http_load import (
    HttpProtocolError,
    KvPutLoad,
    LoadResult,
    check_put_answer,
    parse_head,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _with_server(handler: Handler, body: Callable[[int], Awaitable[Any]]) -> Any:
    app = web.Application()
    app.router.add_put("/kv/{key}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        return await body(port)
    finally:
        await runner.cleanup()


def _run(handler: Handler, connections: int, **run_args: Any) -> LoadResult:
    async def body(port: int) -> LoadResult:
        load = KvPutLoad("127.0.0.1", port, "v" * 10, token="")
        await load.connect(connections)
        try:
            return await load.run(**run_args)
        finally:
            load.close()

    return asyncio.run(_with_server(handler, body))


def test_parse_head_reads_status_length_and_connection() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 42\r\nServer: x"
    assert parse_head(head) == (200, 42, False)
    assert parse_head(b"HTTP/1.1 421 Misdirected Request\r\nConnection: close") == (421, None, True)
    assert parse_head(b"HTTP/1.0 200 OK\r\nContent-Length: 0") == (200, 0, True)


@pytest.mark.parametrize("head", [
    b"SPDY/3 200 OK",
    b"HTTP/1.1 2x0 OK",
    b"HTTP/1.1 200 OK\r\nno colon here",
    b"HTTP/1.1 200 OK\r\nContent-Length: ten",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked",
])
def test_parse_head_refuses_what_it_cannot_frame(head: bytes) -> None:
    with pytest.raises(HttpProtocolError):
        parse_head(head)


def test_check_put_answer_wants_the_key_written_and_an_integer_version() -> None:
    ok = json.dumps({"key": "k-1", "version": 7, "offset": 7}).encode()
    assert check_put_answer(200, ok, "k-1") is None
    assert check_put_answer(200, ok, "k-2") == "HTTP 200 bad body"
    assert check_put_answer(200, b'{"key": "k-1", "version": true}', "k-1") == "HTTP 200 bad body"
    assert check_put_answer(200, b"[]", "k-1") == "HTTP 200 bad body"
    assert check_put_answer(200, b"not json", "k-1") == "HTTP 200 bad body"
    refused = json.dumps({"error": "NOT_CONTROLLER", "leader": 2}).encode()
    assert check_put_answer(421, refused, "k-1") == "HTTP 421 NOT_CONTROLLER"


def test_a_counted_run_sends_exactly_that_many_writes_with_the_api_s_request() -> None:
    seen: list[tuple[str, str, dict[str, Any]]] = []

    async def put(request: web.Request) -> web.StreamResponse:
        seen.append((request.match_info["key"], request.content_type, await request.json()))
        return web.json_response({"key": request.match_info["key"], "version": len(seen)})

    result = _run(put, connections=3, writes=10)
    assert result.commits == 10 and len(result.latencies_ms) == 10 and not result.errors
    assert len(seen) == 10
    assert {s[1] for s in seen} == {"application/json"}
    assert all(s[2] == {"value": "v" * 10} for s in seen)
    # Keys name the connection and cycle through its 16 keys.
    assert {s[0].rsplit("-", 1)[0] for s in seen} <= {"tput-0", "tput-1", "tput-2"}


def test_error_answers_are_counted_by_name_and_never_as_commits() -> None:
    calls = 0

    async def put(request: web.Request) -> web.StreamResponse:
        nonlocal calls
        calls += 1
        await request.read()
        key = request.match_info["key"]
        match calls % 3:
            case 0:
                return web.json_response({"error": "NOT_CONTROLLER", "leader": 2}, status=421)
            case 1:
                return web.json_response({"key": key, "version": calls})
            case _:
                return web.json_response({"key": "someone-else", "version": calls})

    result = _run(put, connections=1, writes=9)
    assert result.commits == 3
    assert result.errors == {"HTTP 421 NOT_CONTROLLER": 3, "HTTP 200 bad body": 3}


def test_a_warm_up_counts_commits_without_latencies() -> None:
    async def put(request: web.Request) -> web.StreamResponse:
        return web.json_response({"key": request.match_info["key"], "version": 1})

    result = _run(put, connections=2, writes=6, record=False)
    assert result.commits == 6 and result.latencies_ms == []


def test_a_lost_connection_is_an_error_and_ends_that_connection_s_run() -> None:
    async def put(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.abort()  # the answer never comes
        raise asyncio.CancelledError

    result = _run(put, connections=2, writes=5)
    assert result.commits == 0
    assert result.errors == {"connection lost": 2}  # one write in flight on each, then done


def test_a_response_without_content_length_is_a_protocol_error() -> None:
    async def put(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b'{"key": "x", "version": 1}')
        await response.write_eof()
        return response

    result = _run(put, connections=1, writes=3)
    assert result.commits == 0
    assert result.errors == {
        "protocol error: Transfer-Encoding is not spoken by this client": 1}


def test_a_timed_run_ends_and_the_registered_token_is_sent() -> None:
    tokens: list[str | None] = []

    async def put(request: web.Request) -> web.StreamResponse:
        tokens.append(request.headers.get("Authorization"))
        return web.json_response({"key": request.match_info["key"], "version": 1})

    async def body(port: int) -> LoadResult:
        register_token("127.0.0.1", port, "s3cret")
        load = KvPutLoad("127.0.0.1", port, "v")
        await load.connect(2)
        try:
            return await load.run(duration_s=0.2)
        finally:
            load.close()

    result = asyncio.run(_with_server(put, body))
    assert result.commits == len(tokens) > 0 and not result.errors
    assert set(tokens) == {"Bearer s3cret"}


def test_run_needs_exactly_one_stop_condition() -> None:
    load = KvPutLoad("127.0.0.1", 1, "v", token="")
    with pytest.raises(ValueError):
        asyncio.run(load.run())
    with pytest.raises(ValueError):
        asyncio.run(load.run(writes=1, duration_s=1.0))
