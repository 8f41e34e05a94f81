"""Real-process Jepsen runs of the `queue` workload on replication.mode=raft topics: 3 controllers
+ 3 brokers on loopback (tests/jepsen/conftest.py `queue_cluster`, shared with the ISR-mode
runs), acks=all with idempotent producers, short runs under each broker nemesis of
harness/jepsen/nemesis.py. Every run must find no anomaly,
drain every partition, and find every acknowledged write at the offset its producer was told.

Two nemeses run in the default suite: `kill-partition-leader` (the voters elect a successor
themselves) and `leader-cut-from-followers-only` (the leader cut from the other brokers only:
in ISR mode the ISR shrinks to the cut-off leader and the majority side stays without a leader
for the whole fault; here the majority side elects its own leader, so the run must see an
election). The others are marked jepsen and slow (`-m "jepsen and slow"`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.check.history import load_history
from harness.check.queue import check_queue
from harness.jepsen.nemesis import FAULTS
from harness.results.schema import read_dataset
from tests.jepsen.test_run_queue import drained, queue_run

pytestmark = pytest.mark.integration

DEFAULT = ("kill-partition-leader", "leader-cut-from-followers-only")
SLOW = ("none", "pause-partition-leader", "isolate-partition-leader",
        "leader-cut-from-followers", "zombie-leader", "isolate-controller-leader",
        "crash-unflushed", "pause")  # fmt: skip
SAFE: dict[str, Any] = dict(acks="all", min_insync_replicas=2, replication_factor=3,
                            unclean_leader_election=False, idempotence=True,
                            replication_mode="raft")  # fmt: skip
NEMESES = [pytest.param(n, id=n) for n in DEFAULT if n in FAULTS] + [
    pytest.param(n, id=n, marks=[pytest.mark.jepsen, pytest.mark.slow])
    for n in SLOW if n == "none" or n in FAULTS]  # fmt: skip


@pytest.mark.parametrize("nemesis", NEMESES)
def test_raft_topics_under_broker_nemeses_find_no_anomaly(
    tmp_path: Path, queue_cluster: Path, nemesis: str
) -> None:
    out = tmp_path / "out"
    topic = f"raft-{nemesis}"
    faulted = nemesis != "none"
    result = queue_run(out, queue_cluster, nemesis, topic, seed=31,
                       time_limit_s=10.0 if faulted else 8.0, one_fault=faulted, **SAFE)
    r = result.results
    assert r["anomalies"] == {}, json.dumps(r["anomalies"], default=str)[:3000]
    assert (result.exit_code, result.verdict) == (0, "valid")
    assert r["crashed_tasks"] == []
    assert r["drain_complete"] and r["drained_partitions"] == [f"{topic}-{p}" for p in range(3)]
    ops = load_history(out / "history.jsonl")
    assert check_queue(ops).valid
    sent = [op for op in ops if op.f == "send" and op.type == "ok"]
    assert any(not op.flag("final") for op in sent)
    drain = drained(ops)
    at = {(tp, v): o for tp, rows in drain.items() for o, v in rows}
    for op in sent:
        tp, (offset, value) = op.value
        assert at[(tp, value)] == offset  # acknowledged once, where its producer was told
    if nemesis != "none":
        assert r["faults_applied"] >= 1
    if nemesis in ("kill-partition-leader", "leader-cut-from-followers-only"):
        # the voters replaced the leader themselves (in ISR mode the cut-only fault elects
        # nobody: the controller still hears the cut-off leader's heartbeats)
        assert r["partition_leader_elections"] >= 1
    [row] = read_dataset(out / "summary")
    assert (row.source, row.replication_mode, row.acks) == ("jepsen", "raft", "all")
    assert (row.lost_writes, row.duplicates, row.divergent_offsets) == (0, 0, 0)
