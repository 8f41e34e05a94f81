"""Hung-leader detection on real processes (harness/net/liveness.py): with a fetch timeout far
longer than the test may wait, only the liveness probe can replace a SIGSTOPped leader; and a
bounded run of concurrent writes on all three controllers sharing the machine's cores starts no
election (no false alarm). Waits poll conditions under deadlines; nothing asserts a duration."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.admin.client import AdminError
from harness.launcher import cluster as cl
from harness.net.client import NativeKvClient
from tests.live import LiveCluster, kraftlab, poll, started_cluster

pytestmark = pytest.mark.integration

# The fetch timeout (and so check-quorum) is far beyond every wait below: an election within
# them can only come from the probe (interval 20 ms, timeout 200 ms).
QUORUM = ("controller.quorum.election.timeout.ms=500", "controller.quorum.fetch.timeout.ms=60000")
SETTINGS = (*QUORUM, "kraftlab.quorum.liveness.interval.ms=20",
            "kraftlab.quorum.liveness.timeout.ms=200")


@pytest.fixture(scope="module")
def lcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with started_cluster(tmp_path_factory.mktemp("liveness"), configs=SETTINGS, fast=False) as c:
        yield c


def events(c: LiveCluster, node_id: int, name: str) -> list[dict[str, object]]:
    text = Path(c.file.node(node_id).log_file).read_text(errors="replace")
    found = []
    for line in text.splitlines():
        if line.startswith("{") and f'"{name}"' in line:
            found.append(json.loads(line))
    return found


def test_concurrent_writes_start_no_election(lcluster: LiveCluster) -> None:
    leader = lcluster.agreed_leader()
    epoch = lcluster.statuses()[leader]["leader_epoch"]
    node = lcluster.file.node(leader)

    async def load() -> int:
        client = NativeKvClient()
        await client.connect(node.host, node.rpc_port, lcluster.file.cluster_id)

        async def writer(w: int) -> int:
            for i in range(250):
                await client.call("put", f"load-{w}-{i % 8}", "x" * 100)
            return 250

        done = sum(await asyncio.gather(*(writer(w) for w in range(64))))
        client.close()
        return done

    assert asyncio.run(load()) == 64 * 250
    statuses = lcluster.statuses()
    assert {s["leader_epoch"] for s in statuses.values()} == {epoch}
    assert all(s["leader_id"] == leader for s in statuses.values())
    assert not any(events(lcluster, i, "node.leader_unresponsive") for i in lcluster.ids())


def test_a_stopped_leader_is_replaced_by_the_probe_not_the_fetch_timeout(lcluster: LiveCluster) -> None:
    leader = lcluster.agreed_leader()
    others = [i for i in lcluster.ids() if i != leader]
    data_dir = str(lcluster.data_dir)
    assert kraftlab("cluster", "pause", str(leader), "--data-dir", data_dir).returncode == 0
    try:
        def replaced() -> int | None:
            named = cl.agreed_leader(dict(lcluster.statuses(others)), others)
            return named if named not in (None, leader) else None

        new_leader = poll(replaced, 30, "a new leader while the old one is stopped")
        assert lcluster.client(new_leader).kv_put("while-stopped", "v")["version"] > 0
    finally:
        assert kraftlab("cluster", "resume", str(leader), "--data-dir", data_dir).returncode == 0
    reported = [e for i in others for e in events(lcluster, i, "node.leader_unresponsive")]
    assert reported and all(e["leader_id"] == leader for e in reported)
    # The old leader rejoins as a follower of the new one and has the write made meanwhile.
    assert lcluster.agreed_leader(timeout_s=30) == new_leader
    assert lcluster.client(leader).kv_get("while-stopped")["value"] == "v"


def test_a_follower_does_not_forward_to_a_leader_that_stopped_answering_pings(
        tmp_path: Path) -> None:  # fmt: skip
    # The probe pings but never reports (60 s): the leader stays leader while it is stopped, and
    # a write sent to a follower is answered 503 at once instead of hanging in a forward.
    data_dir = tmp_path / "silent"
    settings = (*QUORUM, "kraftlab.quorum.liveness.interval.ms=20",
                "kraftlab.quorum.liveness.timeout.ms=60000")
    # SIGKILL at the end ends a stopped process too
    with started_cluster(data_dir, configs=settings, fast=False) as c:
        leader = c.agreed_leader()
        follower = next(i for i in c.ids() if i != leader)
        assert c.client(follower).kv_put("before", "v")["version"] > 0  # forwarded while it answers
        assert kraftlab("cluster", "pause", str(leader), "--data-dir", str(data_dir)).returncode == 0

        def refused() -> dict[str, object] | None:
            try:
                c.client(follower, 5.0).kv_put("during", "v")
            except AdminError as exc:
                if exc.status == 503 and "liveness" in str(exc.body.get("message", "")):
                    return exc.body
            return None

        body = poll(refused, 30, "a 503 from the follower while the leader is stopped")
        assert body["error"] == "LEADER_NOT_AVAILABLE"
