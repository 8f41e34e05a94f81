"""Metadata snapshots on real processes (KIP-630), with the snapshot interval set low.

3 controllers and a broker with `metadata.log.max.record.bytes.between.snapshots=2048`, no log
kept below the newest snapshot and 4 KiB metadata log segments: every node takes snapshots and
deletes the log prefix on disk; a controller and the broker restarted after kill -9 rebuild
their state from their snapshots; a controller whose newest snapshot is corrupt refuses to start (its log no longer
holds what the snapshot replaced) and names the file; with its data directory wiped it catches up
through FetchSnapshot. Tests run in file order on one cluster.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.launcher import cluster as cl
from partition.raft.log import METADATA_PARTITION, METADATA_TOPIC, SNAPSHOT_SUFFIX
from tests.live import (
    LiveCluster,
    poll,
    started_cluster,
)

pytestmark = pytest.mark.integration

SNAPSHOT_CONFIG = (
    "metadata.log.max.record.bytes.between.snapshots=2048",
    "kraftlab.snapshot.retention.records=0",
    "metadata.log.segment.bytes=4096",
)
BROKER = 101


@pytest.fixture(scope="module")
def snap_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with started_cluster(tmp_path_factory.mktemp("snapshots"), brokers=1,
                         configs=SNAPSHOT_CONFIG) as live:
        yield live


def metadata_dir(c: LiveCluster, node_id: int) -> Path:
    return Path(c.file.node(node_id).data_dir) / f"{METADATA_TOPIC}-{METADATA_PARTITION}"


def status(c: LiveCluster, node_id: int) -> dict[str, Any]:
    return c.client(node_id, 2.0).get_json("/quorum/status")


def write_keys(c: LiveCluster, prefix: str, count: int, down: int | None = None) -> None:
    leader = c.agreed_leader(ids=[i for i in (1, 2, 3) if i != down])
    client = c.client(leader)
    for i in range(count):
        client.kv_put(f"{prefix}-{i}", "v" * 100)


def same_state_as_leader(c: LiveCluster, node_id: int) -> dict[str, Any] | None:
    """The node's status once it holds the leader's metadata (leader digest read first)."""
    leader = c.agreed_leader(ids=[1, 2, 3])
    want = status(c, leader)
    got = status(c, node_id)
    if got["applied_offset"] >= want["applied_offset"] - 50 and got["state_digest"] == want[
            "state_digest"]:  # fmt: skip
        return got
    return None


def wipe_metadata(node: cl.NodeEntry) -> None:
    """Everything the node keeps on disk but its config and its own log file."""
    keep = {Path(node.log_file).resolve(), Path(node.config_file).resolve()}
    for path in Path(node.data_dir).iterdir():
        if path.resolve() in keep:
            continue
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


def log_events(c: LiveCluster, node_id: int, event: str) -> list[dict[str, Any]]:
    lines = Path(c.file.node(node_id).log_file).read_text().splitlines()
    return [d for d in (json.loads(x) for x in lines if x.startswith("{")) if d.get("event") == event]


def test_every_node_takes_snapshots_and_deletes_the_log_prefix(snap_cluster: LiveCluster) -> None:
    c = snap_cluster
    write_keys(c, "a", 60)  # ~ 60 records of > 100 bytes: several snapshot intervals

    def snapshotted(node_id: int) -> dict[str, Any] | None:
        s = status(c, node_id)
        return s if s["latest_snapshot"] and s["log_start_offset"] > 0 else None

    for node_id in (1, 2, 3, BROKER):
        s = poll(lambda n=node_id: snapshotted(n), 30, f"node {node_id} to snapshot")
        # Retention 0: the log starts at the newest snapshot the core has deleted below.
        assert s["log_start_offset"] <= s["latest_snapshot"]["end_offset"]
        files = sorted(p.name for p in metadata_dir(c, node_id).iterdir())
        assert any(name.endswith(SNAPSHOT_SUFFIX) for name in files), files
        segments = sorted(int(n.split(".")[0]) for n in files if n.endswith(".log"))
        # The segment holding offset 0 is gone from disk, not merely hidden.
        assert segments and segments[0] > 0, files
    poll(lambda: same_state_as_leader(c, BROKER), 30, "the broker to hold the leader's metadata")


def test_a_controller_restarts_from_its_snapshot_with_the_same_state(
    snap_cluster: LiveCluster,
) -> None:
    c = snap_cluster
    leader = c.agreed_leader(ids=[1, 2, 3])
    victim = next(i for i in (1, 2, 3) if i != leader)
    before = poll(lambda: same_state_as_leader(c, victim), 30, "the follower to catch up")
    cluster = c.file
    node = cluster.node(victim)
    assert cl.stop_node(node, force=True)
    node.pid = None
    cl.start_node(cluster, c.data_dir, node)
    after = poll(lambda: same_state_as_leader(c, victim), 30, "the restarted follower")
    assert after["state_digest"] == before["state_digest"]  # no write in between
    restored = log_events(c, victim, "node.image_restored")
    assert restored and restored[-1]["snapshot_offset"] >= before["latest_snapshot"]["end_offset"]
    assert c.client(victim).kv_get("a-59", "local")["value"] == "v" * 100


def test_a_broker_restarts_from_its_snapshot(snap_cluster: LiveCluster) -> None:
    """The broker (a Raft observer of the same log) restores its image from its own snapshot
    after kill -9, then catches up (its re-registration changes the metadata, so the check is
    against the leader's, not the state before)."""
    c = snap_cluster
    before = poll(lambda: same_state_as_leader(c, BROKER), 30, "the broker to catch up")
    cluster = c.file
    node = cluster.node(BROKER)
    assert cl.stop_node(node, force=True)
    node.pid = None
    cl.start_node(cluster, c.data_dir, node)
    poll(lambda: same_state_as_leader(c, BROKER), 60, "the restarted broker")
    restored = log_events(c, BROKER, "node.image_restored")
    assert restored and restored[-1]["snapshot_offset"] >= before["latest_snapshot"]["end_offset"]


def test_a_corrupt_snapshot_is_refused_then_a_wiped_controller_catches_up_by_fetch_snapshot(
    snap_cluster: LiveCluster,
) -> None:
    c = snap_cluster
    leader = c.agreed_leader(ids=[1, 2, 3])
    victim = next(i for i in (1, 2, 3) if i != leader)
    poll(lambda: same_state_as_leader(c, victim), 30, "the follower to catch up")
    cluster = c.file
    node = cluster.node(victim)
    assert cl.stop_node(node, force=True)
    node.pid = None
    newest = sorted(metadata_dir(c, victim).glob(f"*{SNAPSHOT_SUFFIX}"))[-1]
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0x40  # one flipped bit in the middle of the image
    newest.write_bytes(bytes(data))

    cl.start_node(cluster, c.data_dir, node)
    assert cl.wait_dead(node, 30), "a node with an unrecoverable snapshot must not run"
    refused = log_events(c, victim, "node.snapshot_unrecoverable")
    assert refused and newest.name in refused[-1]["error"], refused
    assert "checksum mismatch" in refused[-1]["error"]
    assert newest.read_bytes() == bytes(data)  # nothing was changed on disk

    # More writes while it is down, so the leader's newest snapshot is past anything it had.
    write_keys(c, "b", 30, down=victim)
    wipe_metadata(node)
    node.pid = None
    cl.start_node(cluster, c.data_dir, node)
    caught_up = poll(lambda: same_state_as_leader(c, victim), 60, "the wiped follower")
    assert caught_up["log_start_offset"] > 0
    installed = log_events(c, victim, "node.snapshot_installed")
    assert installed, "the wiped follower must have installed a snapshot (FetchSnapshot)"
    for key in ("a-0", "b-29"):
        assert c.client(victim).kv_get(key, "local")["value"] == "v" * 100
