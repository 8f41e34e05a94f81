"""replication.mode=quorum on real processes (3 controllers + 3 brokers): the asyncio broker runs
the fencing election end to end. kill -9 of the partition leader in the middle of an acks=all
idempotent produce: the controller fences the partition (leader -1, epoch 1), the surviving
replicas report their positions at that epoch over the controller RPC, the most up-to-date one
leads at epoch 2, its epoch marker lets its HW pass the old tail, and every record produced is
consumed exactly once, in order. The killed broker comes back as a follower and converges.

On the suite's shared broker cluster (tests/conftest.py `brokers`), on a topic of its own. Every
wait polls a condition with a deadline; processes are killed by their recorded PID.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from harness.launcher import cluster as cl
from tests.live import BROKERS, LiveCluster, cli, poll

pytestmark = pytest.mark.integration

TOPIC = "quorum-failover"
COUNT = 20_000


def test_kill_leader_midway_quorum_mode_loses_nothing(brokers: LiveCluster) -> None:
    c = brokers
    cli(c, "topic", "create", TOPIC, "--partitions", "1", "--replication-factor", "3",
        "--config", "replication.mode=quorum")  # fmt: skip
    before = c.partition(TOPIC)
    leader, epoch = before["leader"], before["leader_epoch"]
    values = [f"q{i:06d}" for i in range(COUNT)]
    half = COUNT // 2
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "produce", TOPIC, "--acks", "all",
         "--data-dir", str(c.data_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdin is not None
        proc.stdin.write(("\n".join(values[:half]) + "\n").encode())
        proc.stdin.flush()
        poll(lambda: (c.replica_view(leader, TOPIC) or {}).get("high_watermark", 0) >= half // 2,
             30, "a quarter committed")  # fmt: skip
        node = c.file.node(leader)
        assert node.pid is not None and cl.is_our_process(node.pid, node.config_file)
        os.kill(node.pid, signal.SIGKILL)
        assert cl.wait_dead(node, 10)
        proc.stdin.write(("\n".join(values[half:]) + "\n").encode())
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert f"produced {COUNT} records".encode() in err
    # The fencing change (epoch + 1, no leader), then the election (epoch + 2); a lost report
    # or a controller failover may take more rounds, so: at least two epochs, a new leader.
    poll(lambda: (p := c.partition(TOPIC))["leader"] not in (leader, None)
         and p["leader_epoch"] >= epoch + 2, 30, "a new leader at a later epoch")  # fmt: skip
    out = cli(c, "consume", TOPIC, "--from-beginning", "--max-messages", str(COUNT),
              "--timeout-ms", "20000", timeout_s=120)  # fmt: skip
    assert out.splitlines() == values  # nothing lost, duplicated or reordered

    cli(c, "cluster", "restart", str(leader))

    def converged() -> bool:
        views = [c.replica_view(b, TOPIC) for b in BROKERS]
        ends = {(v["log_end_offset"], v["high_watermark"]) if v else None for v in views}
        return len(ends) == 1 and (pair := ends.pop()) is not None and pair[0] == pair[1] >= COUNT

    poll(converged, 30, "every replica at the same LEO = HW")
    assert (c.replica_view(leader, TOPIC) or {}).get("role") == "follower"
