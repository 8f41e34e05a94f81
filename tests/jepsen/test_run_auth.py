"""The Jepsen workloads authenticate to a token-protected admin API (harness/admin/auth.py).

A node bound beyond 127.0.0.1 (or started with kraftlab.admin.require.token=true) answers 401
SASL_AUTHENTICATION_FAILED to every write without `Authorization: Bearer <token>`. The runner's
client session (`client_session`) must carry the cluster's token from DIR/admin-token, the file
the launcher writes, or every kv write and the queue's topic creation fail. Checked here against
a real aiohttp server guarded by the node's own middleware (no cluster processes); the
real-process kv run in test_run_kv.py runs with require.token on.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web

from harness.admin.auth import AUTH_ERROR, auth_middleware
from harness.jepsen.runner import client_session
from harness.jepsen.workload_kv import KvWorkload, Outcome
from harness.launcher import cluster as cl


async def _post_through_runner_session(
    data_dir: Path, token: str
) -> tuple[int, dict[str, Any], bool]:
    """(status, body, session never resends) of POST /kv/k through the runner's session to a
    server that requires `token`."""

    async def put(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application(middlewares=[auth_middleware(token)])
    app.router.add_post("/kv/k", put)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        url = f"http://127.0.0.1:{port}/kv/k"
        async with client_session(data_dir) as session, session.post(
            url, json={"value": "1"}
        ) as resp:
            return resp.status, await resp.json(), session._retry_connection is False
    finally:
        await runner.cleanup()


def test_the_runner_session_sends_the_clusters_token(tmp_path: Path) -> None:
    cl.write_token(tmp_path)
    token = cl.read_token(tmp_path)
    assert token is not None
    status, body, no_resend = asyncio.run(_post_through_runner_session(tmp_path, token))
    assert (status, body) == (200, {"ok": True})
    assert no_resend  # the token did not cost the "refused means not sent" rule


def test_without_a_token_file_the_write_is_refused(tmp_path: Path) -> None:
    # the same server, a data dir with no admin-token: what every write got before the fix
    status, body, _ = asyncio.run(_post_through_runner_session(tmp_path, "secret"))
    assert status == 401 and body["error"] == AUTH_ERROR


def test_a_token_from_another_cluster_is_refused(tmp_path: Path) -> None:
    cl.write_token(tmp_path)
    status, body, _ = asyncio.run(_post_through_runner_session(tmp_path, "another-token"))
    assert status == 401 and body["error"] == AUTH_ERROR


def test_a_refused_write_is_a_definite_failure() -> None:
    # the middleware answers before any handler runs: the write did not happen
    body = {"error": AUTH_ERROR, "message": "this admin API requires ..."}
    assert KvWorkload.classify(401, body) == Outcome("fail", error=AUTH_ERROR)
