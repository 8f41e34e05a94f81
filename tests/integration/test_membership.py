"""Dynamic quorum membership on real processes (KIP-853), under load.

3 controllers; a writer thread commits metadata records (kv puts through the leader, following
leader changes) the whole time. Meanwhile `kraftlab quorum add-controller` starts controller 4,
which catches up as an observer and joins the voters, and `kraftlab quorum remove-controller`
removes the leader itself, which resigns once the removal is committed. Afterwards every write
the cluster acknowledged is readable (linearizable, through the new leader), every controller
holds the same metadata (`state_digest`), and the voter set is [2..4] without the removed one.
The refusals are checked on the way: a duplicate add, a removal of a non-voter.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.admin.client import AdminClient, AdminError
from harness.launcher import cluster as cl
from tests.live import (
    LiveCluster,
    cli,
    kraftlab,
    poll,
    started_cluster,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with started_cluster(tmp_path_factory.mktemp("membership")) as live:
        yield live


class Writer(threading.Thread):
    """Sequential kv puts through whoever leads; `acked` holds every acknowledged key."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(daemon=True)
        self.data_dir = data_dir
        self.acked: list[str] = []
        self.attempts = 0
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                client = cl.leader_client(cl.ClusterFile.load(self.data_dir))
                client.timeout_s = 3.0
            except (cl.ClusterError, OSError):
                time.sleep(0.05)  # no leader known yet: retry backoff
                continue
            key = f"w-{i}"
            self.attempts += 1
            try:
                client.kv_put(key, str(i))
            except (AdminError, OSError):
                time.sleep(0.05)  # not acknowledged (maybe written): never counted
                continue
            self.acked.append(key)
            i += 1


def status(c: LiveCluster, node_id: int) -> dict[str, Any]:
    return c.client(node_id, 2.0).get_json("/quorum/status")


def test_add_a_voter_and_remove_the_leader_under_load_without_losing_a_write(
    mcluster: LiveCluster,
) -> None:
    c = mcluster
    c.agreed_leader()
    writer = Writer(c.data_dir)
    writer.start()
    try:
        poll(lambda: len(writer.acked) >= 20, 30, "the writer to get going")
        out = cli(c, "quorum", "add-controller", "--timeout", "60", timeout_s=90)
        assert "controller 4 added to the voters: [1, 2, 3, 4]" in out, out
        assert c.file.node(4).bootstrap_voter is False
        for node_id in (1, 2, 3, 4):
            poll(lambda n=node_id: status(c, n)["current_voters"] == [1, 2, 3, 4], 30,
                 f"node {node_id} to see voter 4")  # fmt: skip
        again = kraftlab("quorum", "add-controller", "--id", "4", "--data-dir", str(c.data_dir))
        assert again.returncode == 1 and "already exists" in again.stderr
        leader = c.agreed_leader(ids=[1, 2, 3, 4])
        code, body = c.client(leader).request("POST", "/quorum/voters",
                                              {"node_id": 2, "endpoint": "127.0.0.1:1"})
        assert (code, body["error"]) == (409, "DUPLICATE_VOTER"), body
        code, body = c.client(leader).request("DELETE", "/quorum/voters/77")
        assert (code, body["error"]) == (404, "VOTER_NOT_FOUND"), body

        acked_before_removal = len(writer.acked)
        out = cli(c, "quorum", "remove-controller", str(leader), "--timeout", "60", timeout_s=90)
        assert "removed from the voters" in out, out
        remaining = [i for i in (1, 2, 3, 4) if i != leader]
        new_leader = c.agreed_leader(ids=remaining, timeout_s=30)
        assert new_leader != leader
        poll(lambda: len(writer.acked) >= acked_before_removal + 20, 60,
             "writes to go on under the new leader")  # fmt: skip
    finally:
        writer.stop.set()
        writer.join(30)
    assert writer.acked, "the writer never got a write acknowledged"
    final = c.agreed_leader(ids=remaining)
    for node_id in (1, 2, 3, 4):
        poll(lambda n=node_id: status(c, n)["current_voters"] == remaining, 30,
             f"node {node_id} to see the removal")  # fmt: skip
    # The removed leader resigned and follows the new leader as an observer.
    poll(lambda: status(c, leader)["role"] == "follower"
         and status(c, leader)["leader_id"] == final, 30, "the removed leader to follow")  # fmt: skip
    reader = c.client(final, 10.0)
    for key in writer.acked:  # no acknowledged write is lost
        assert reader.kv_get(key)["value"] == key.removeprefix("w-"), key
    want = status(c, final)
    for node_id in (1, 2, 3, 4):
        poll(lambda n=node_id: status(c, n)["state_digest"] == status(c, final)["state_digest"],
             30, f"node {node_id} to hold the leader's metadata")  # fmt: skip
    assert want["current_voters"] == remaining


def test_a_restarted_joined_controller_is_still_a_voter(mcluster: LiveCluster) -> None:
    """Controller 4's config names only the bootstrap voters 1-3: after a kill -9 it reads the
    voter set from its log (the VotersRecord), and still counts."""
    c = mcluster
    voters = status(c, 4)["current_voters"]
    assert 4 in voters
    cluster = c.file
    node = cluster.node(4)
    assert cl.stop_node(node, force=True)
    node.pid = None
    cl.start_node(cluster, c.data_dir, node)
    poll(lambda: status(c, 4)["current_voters"] == voters
         and status(c, 4)["role"] in ("leader", "follower"), 30, "4 back as a voter")  # fmt: skip
    leader = c.agreed_leader(ids=voters)
    assert AdminClient(cluster.node(leader).host, cluster.node(leader).admin_port).kv_put(
        "after-restart", "x")["version"] >= 1
