"""The web view's server (harness/ui/server.py) without a browser: what it serves in replay and
live mode, and its guards, which are the admin API's (bearer token on writes off loopback,
reads open) plus same-origin JSON writes and loopback Host names."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from harness.sim.runs.recording import record_scenario
from harness.sim.runs.runner import quiet_logging
from harness.ui.actions import ActionError, _sides
from harness.ui.live import ClusterPoller, LiveFeed
from harness.ui.server import UiApp, build_app

TOKEN = "s3cret-token"


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()


def run(ui: UiApp, check: Callable[[TestClient[Any, Any]], Awaitable[None]],
        *, bound_host: str = "127.0.0.1", token: str | None = None) -> None:
    async def go() -> None:
        app = build_app(ui, bound_host=bound_host, token=token)
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            await check(client)

    asyncio.run(go())


def live(tmp_path: Path, *, token_required: bool) -> UiApp:
    """A live view of a directory without a cluster: polls fail, actions are refused."""
    feed = LiveFeed(ClusterPoller(tmp_path), interval_s=0.05)
    return UiApp(title="test", feed=feed, data_dir=tmp_path, token_required=token_required)


def test_replay_serves_the_page_and_the_recording_with_its_timeline() -> None:
    recording = record_scenario("kip101-divergence", leader_epoch_enable=False).to_json()
    ui = UiApp(title=recording["title"], recording=recording)

    async def check(client: TestClient[Any, Any]) -> None:
        page = await client.get("/")
        assert page.status == 200 and '<script src="/static/ui.js">' in await page.text()
        for name in ("ui.js", "ui.css"):
            assert (await client.get(f"/static/{name}")).status == 200
        assert (await client.get("/static/../server.py")).status == 404
        info = await (await client.get("/api/info")).json()
        assert info == {"mode": "replay", "title": recording["title"], "token_required": False}
        doc = await (await client.get("/api/replay")).json()
        assert len(doc["frames"]) == len(recording["frames"])
        anomaly_events = [e for e in doc["events"] if e["kind"] == "anomaly"]
        assert [e["frame"] for e in anomaly_events] == [a["frame"] for a in doc["anomalies"]]
        assert (await client.get("/api/stream")).status == 404
        refused = await client.post("/api/nodes/101/kill", json={})
        assert refused.status == 404

    run(ui, check)


def test_writes_need_the_token_where_the_api_does_and_reads_stay_open(tmp_path: Path) -> None:
    async def check(client: TestClient[Any, Any]) -> None:
        assert (await client.get("/api/info")).status == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            denied = await client.post("/api/nodes/101/kill", json={}, headers=headers)
            assert denied.status == 401
            assert (await denied.json())["error"] == "SASL_AUTHENTICATION_FAILED"
            assert denied.headers["WWW-Authenticate"].startswith("Bearer")
        allowed = await client.post("/api/nodes/101/kill", json={},
                                    headers={"Authorization": f"Bearer {TOKEN}"})
        assert allowed.status == 409  # past the guard; there is no cluster in the directory
        assert "no cluster" in (await allowed.json())["message"]

    run(live(tmp_path, token_required=True), check, bound_host="0.0.0.0", token=TOKEN)


def test_a_token_is_needed_to_serve_off_loopback(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="token"):
        build_app(live(tmp_path, token_required=True), bound_host="0.0.0.0", token=None)


def test_cross_origin_or_non_json_writes_and_foreign_hosts_are_refused(tmp_path: Path) -> None:
    async def check(client: TestClient[Any, Any]) -> None:
        base = f"{client.host}:{client.port}"
        cross = await client.post("/api/links", json={"groups": [[1]]},
                                  headers={"Origin": "http://example.com"})
        assert cross.status == 403 and "cross-origin" in (await cross.json())["message"]
        form = await client.post("/api/nodes/1/kill", data="x=1",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert form.status == 403
        rebound = await client.get("/api/info", headers={"Host": "attacker.example:80"})
        assert rebound.status == 403
        same = await client.post("/api/links", json={"groups": [[1]]},
                                 headers={"Origin": f"http://{base}"})
        assert same.status == 409  # allowed through; no cluster to act on
        bad = await client.post("/api/links", json={"groups": "1,2"})
        assert bad.status == 400
        unknown = await client.post("/api/nodes/1/explode", json={})
        assert unknown.status == 400

    run(live(tmp_path, token_required=False), check)


def test_link_groups_leave_no_node_out_and_no_node_twice() -> None:
    nodes = [1, 2, 3, 101, 102]
    assert _sides([[101]], nodes) == [[101], [1, 2, 3, 102]]
    assert _sides([[1, 101], [2, 3, 102]], nodes) == [[1, 101], [2, 3, 102]]
    for groups, message in (([[1, 2, 3, 101, 102]], "two groups"),
                            ([[1], [1, 2]], "two groups"), ([[7]], "no node 7")):
        with pytest.raises(ActionError, match=message):
            _sides(groups, nodes)


def test_the_stream_says_when_polling_fails(tmp_path: Path) -> None:
    async def check(client: TestClient[Any, Any]) -> None:
        stream = await client.get("/api/stream")
        assert stream.headers["Content-Type"] == "text/event-stream"
        messages = []
        while not any(m.get("error") for m in messages):
            line = await asyncio.wait_for(stream.content.readline(), 10)
            if line.startswith(b"data: "):
                messages.append(json.loads(line[len(b"data: "):]))
        assert messages[0]["reset"] is True and messages[0]["state"] is None
        assert "no cluster in" in messages[-1]["error"]
        stream.close()

    run(live(tmp_path, token_required=False), check)
