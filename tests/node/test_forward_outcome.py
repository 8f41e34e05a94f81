"""A follower forwarding a write whose connection breaks after it was sent answers 504
REQUEST_TIMED_OUT `indeterminate`, and never resends it (harness/admin/forward.py).

The story (a Jepsen kv run, isolate-leader + halves + kill-leader): a follower forwarded a PUT;
the leader committed it, but its answer was lost in a partition and the connection aborted.
aiohttp resent the PUT once on its own; by then the old leader had lost leadership and said
503 LEADER_NOT_AVAILABLE (no leader known), which the follower relayed verbatim: the client
recorded a definite failure for a committed write, and the checker found a "stale" read of it.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import aiohttp
from aiohttp import web

from harness.admin.forward import LeaderForwarding, forwarding_session


async def _serve(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port


async def _forward_once(session_factory: Any) -> tuple[int, dict[str, Any], list[str]]:
    seen: list[str] = []

    async def old_leader(request: web.Request) -> web.StreamResponse:
        seen.append(await request.text())
        if len(seen) == 1:  # executed, then the answer is lost: the connection is aborted
            assert request.transport is not None
            request.transport.abort()
            raise asyncio.CancelledError
        return web.json_response({"error": "LEADER_NOT_AVAILABLE", "leader_id": None}, status=503)

    leader_app = web.Application()
    leader_app.router.add_put("/kv/{key}", old_leader)
    leader_runner, leader_port = await _serve(leader_app)

    node = SimpleNamespace(
        leader_id=1, node_id=2, epoch=5, role="follower", admin_token=None,
        leader_silent_ms=lambda: 0,  # the leader answers its liveness pings
        config=SimpleNamespace(
            admin_listeners={1: SimpleNamespace(host="127.0.0.1", port=leader_port)},
            request_timeout_ms=2_000, voters=[1, 2, 3], liveness_interval_ms=25,
        ),
    )  # fmt: skip
    forwarding = LeaderForwarding(node)  # type: ignore[arg-type]
    forwarding.session = session_factory()

    async def follower(request: web.Request) -> web.StreamResponse:
        return await forwarding.forward(request)

    follower_app = web.Application()
    follower_app.router.add_put("/kv/{key}", follower)
    follower_runner, follower_port = await _serve(follower_app)
    try:
        async with aiohttp.ClientSession() as client, client.put(
            f"http://127.0.0.1:{follower_port}/kv/k0", json={"value": "w171"}
        ) as resp:
            return resp.status, await resp.json(), seen
    finally:
        await forwarding.session.close()
        await follower_runner.cleanup()
        await leader_runner.cleanup()


def test_a_write_whose_answer_was_lost_is_indeterminate_and_sent_once() -> None:
    status, body, seen = asyncio.run(_forward_once(forwarding_session))
    assert len(seen) == 1  # never resent
    assert status == 504
    assert body["error"] == "REQUEST_TIMED_OUT" and body["indeterminate"] is True


def test_aiohttps_default_session_would_resend_and_relay_a_definite_error() -> None:
    # The mechanism the fix guards against, shown on this aiohttp: without the switch the PUT
    # reaches the old leader twice and the resend's 503 is what the client would see.
    status, body, seen = asyncio.run(_forward_once(
        lambda: aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True))))
    assert len(seen) == 2
    assert (status, body["error"]) == (503, "LEADER_NOT_AVAILABLE")
