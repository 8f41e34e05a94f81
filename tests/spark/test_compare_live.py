"""`kraftlab compare`'s live queue runs (harness/study/compare.py `live_queue_runs`) on real processes:
3 controllers + 3 brokers on 127.0.0.1, one short `kill-partition-leader` run per replication
mode with acks=all, min.insync.replicas=2, RF 3. The rows they write are the comparison's
(matrix_schema.read_dataset validates every row), one per mode, source `jepsen`, with the
run's settings and the matrix's nemesis name, and the safe setting lost no acknowledged write.
A finalizer SIGKILLs any PID of the cluster still alive, whatever happened."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from harness.launcher import cluster as cl
from harness.results.schema import read_dataset
from harness.study.compare import live_queue_runs

pytestmark = pytest.mark.integration


def _kill_leftovers(out: Path) -> None:
    for cluster_json in out.glob("cluster-*/cluster.json"):
        cluster = cl.ClusterFile.load(cluster_json.parent)
        for node in cluster.nodes:
            if cl.is_our_process(node.pid, node.config_file):
                assert node.pid is not None
                os.kill(node.pid, signal.SIGKILL)


def test_live_queue_runs_write_one_comparison_row_per_mode(tmp_path: Path) -> None:
    out = tmp_path / "live" / "jepsen"
    try:
        done = live_queue_runs(out, time_limit_s=6.0, fault_s=(3.5, 3.5))
    finally:
        _kill_leftovers(out)
    assert [d["mode"] for d in done] == ["isr", "quorum", "raft"]
    assert all("error" not in d for d in done), done
    rows = read_dataset(out)
    assert sorted(r.replication_mode for r in rows) == ["isr", "quorum", "raft"]
    for row in rows:
        assert row.source == "jepsen"
        assert (row.acks, row.min_insync_replicas, row.replication_factor) == ("all", 2, 3)
        assert row.nemesis == "kill-leader"
        assert row.unclean_leader_election is False
        assert row.acked_writes > 0
        assert row.lost_writes == 0  # acks=all, min ISR 2, clean election: nothing acked lost
        assert row.fault_start_ms is not None and row.heal_ms is not None
    # the cluster is down: every recorded PID gone
    for cluster_json in out.glob("cluster-*/cluster.json"):
        cluster = cl.ClusterFile.load(cluster_json.parent)
        assert not cl.running_nodes(cluster)
