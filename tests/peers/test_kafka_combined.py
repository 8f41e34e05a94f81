"""The peer kit's default layout, as a new user starts it: `kraftlab peer kafka up` (3 combined
nodes, each a controller and a broker in one JVM), `status`, a record through it, `down`, and
that `down` stops only the processes the peer started (a recorded PID that now belongs to
another process is left alone, as the launcher's own rule: harness/launcher/cluster.py
`is_our_process`)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.peers.kafka import cluster as pk
from tests.live import kraftlab
from tests.peers.kafka_peer import require_install

pytestmark = [pytest.mark.integration, pytest.mark.kafka_peer]


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """A process that is not the peer's: it must outlive `down`."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def test_the_default_combined_peer_up_status_produce_down(tmp_path: Path,
                                                          stranger: subprocess.Popen[bytes]
                                                          ) -> None:  # fmt: skip
    require_install()
    data_dir = tmp_path / "peer"
    up = kraftlab("peer", "kafka", "up", "--data-dir", str(data_dir), timeout_s=180)
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        peer = pk.PeerFile.load(data_dir)
        assert peer.layout == "combined"
        assert [(n.id, n.roles) for n in peer.nodes] == [
            (i, ["broker", "controller"]) for i in (1, 2, 3)]
        assert up.stdout.strip() == peer.bootstrap  # `up` prints the bootstrap servers
        status = kraftlab("peer", "kafka", "status", "--json", "--data-dir", str(data_dir))
        state = json.loads(status.stdout)
        assert status.returncode == 0 and state["ready"]
        assert sorted(v["id"] for v in state["quorum"]["voters"]) == [1, 2, 3]
        assert state["brokers_seen"] == {str(i): [1, 2, 3] for i in (1, 2, 3)}
        import confluent_kafka as ck

        producer = ck.Producer({"bootstrap.servers": peer.bootstrap, "acks": "all"})
        delivered: list[tuple[object, int]] = []
        producer.produce("first-topic", b"hello", on_delivery=lambda e, m: delivered.append(
            (e, m.offset())))  # auto-created, as on any Kafka with its defaults
        assert producer.flush(60) == 0 and delivered == [(None, 0)]
        # a recorded PID that is no longer the node's JVM: `down` must not signal it
        victim = peer.nodes[0]
        real_pid = victim.pid
        victim.pid = stranger.pid
        peer.save(data_dir)
        down = kraftlab("peer", "kafka", "down", "--data-dir", str(data_dir), timeout_s=180)
        assert down.returncode == 0, down.stderr + down.stdout
        assert stranger.poll() is None  # still running
        assert not any(pk.running(n) for n in pk.PeerFile.load(data_dir).nodes)
    finally:
        state_file = pk.PeerFile.path_in(data_dir)
        if state_file.exists():
            peer = pk.PeerFile.load(data_dir)
            if "real_pid" in locals() and real_pid is not None:
                peer.nodes[0].pid = real_pid  # the JVM this test hid from `down`
                peer.save(data_dir)
            pk.down(data_dir, force=True)
