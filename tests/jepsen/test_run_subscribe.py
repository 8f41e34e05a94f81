"""Real-process Jepsen runs of the queue workload's `--subscribe` mode: the consumers are one
consumer group (harness/jepsen/workload_subscribe.py) on 3 controllers + 3 brokers, checked for
lost and rewound (re-read below an acknowledged commit) records by harness/check/groups.py
besides the queue checker's log anomalies.

The default suite runs one short run under `kill-partition-leader` (a broker SIGKILLed: the
coordinator of the group may be on it). The longer runs, one per broker nemesis, are marked
`jepsen`. A finalizer SIGKILLs every PID of the cluster still alive, whatever happened.

On the same cluster, the queue workload with `--client kafka`: its producers and consumers are
aiokafka over the brokers' Kafka listeners, as the Apache Kafka target's are, so one client
drives both systems.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.jepsen.nemesis import FAULTS
from harness.jepsen.runner import RunOptions, bring_up, run
from harness.jepsen.workload_queue import QueueOptions
from harness.launcher import cluster as cl
from tests.live import kill_recorded

pytestmark = pytest.mark.integration

BROKER_NEMESES = tuple(n for n in (
    "kill-partition-leader", "pause-partition-leader", "isolate-partition-leader",
    "leader-cut-from-followers", "zombie-leader", "crash-unflushed") if n in FAULTS)


@pytest.fixture(scope="module")
def group_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("subscribe-cluster")
    try:
        bring_up(RunOptions(out_dir=data_dir, workload="queue",
                            queue=QueueOptions(subscribe=True)), data_dir)
        yield data_dir
    finally:
        kill_recorded(data_dir)


def subscribe_run(out: Path, data_dir: Path, nemesis: str, topic: str, seed: int,
                  time_limit_s: float) -> Any:  # fmt: skip
    options = RunOptions(
        out_dir=out, workload="queue", nemesis=nemesis, time_limit_s=time_limit_s, seed=seed,
        data_dir=data_dir,
        queue=QueueOptions(topic=topic, partitions=3, producers=3, consumers=2, rate=60.0,
                           op_timeout_s=2.5, subscribe=True),
        fault_s=(3.5, 4.5), quiet_s=(0.5, 1.0), lead_in_s=1.0)
    return run(options)


def assert_group_checked(result: Any) -> None:
    r = result.results
    assert r["verdict"] == "valid", r["anomalies"]
    assert r["drain_complete"] and r["group_caught_up"]
    counts = r["summary"]["counts"]
    assert counts["commit"]["ok"] > 0 and counts["subscribe"]["ok"] == 2
    assert counts["poll"]["ok"] > 0


def test_subscribe_run_under_broker_kills(group_cluster: Path, tmp_path: Path) -> None:
    result = subscribe_run(tmp_path / "run", group_cluster, "kill-partition-leader",
                           "sub-kill", seed=11, time_limit_s=9.0)
    assert_group_checked(result)


@pytest.mark.jepsen
@pytest.mark.parametrize("nemesis", BROKER_NEMESES)
def test_subscribe_longer_runs_under_each_broker_nemesis(group_cluster: Path, tmp_path: Path,
                                                         nemesis: str) -> None:  # fmt: skip
    result = subscribe_run(tmp_path / "run", group_cluster, nemesis, f"sub-{nemesis}",
                           seed=23, time_limit_s=20.0)
    assert_group_checked(result)


def produce_over_kafka(data_dir: Path) -> int:
    """Kafka-listener connections that sent Produce (api key 0), closed so far, per the brokers'
    logs (`kafka.connection_closed` lists each connection's api versions)."""
    count = 0
    for node in cl.ClusterFile.load(data_dir).brokers:
        for line in Path(node.log_file).read_text(errors="replace").splitlines():
            if "kafka.connection_closed" not in line:
                continue
            event = json.loads(line)
            count += any(v.startswith("0v") for v in event.get("versions", []))
    return count


def test_kafka_clients_on_kraftlab_under_broker_kills(group_cluster: Path, tmp_path: Path) -> None:
    before = produce_over_kafka(group_cluster)
    options = RunOptions(
        out_dir=tmp_path / "run", workload="queue", nemesis="kill-partition-leader",
        time_limit_s=8.0, seed=5, data_dir=group_cluster,
        queue=QueueOptions(topic="kafka-clients", partitions=2, producers=2, consumers=1,
                           rate=40.0, op_timeout_s=2.5, client="kafka"),
        fault_s=(3.5, 4.0), quiet_s=(0.5, 1.0), lead_in_s=1.0)
    result = run(options)
    r = result.results
    assert (result.verdict, r["client"]) == ("valid", "kafka"), r["anomalies"]
    assert r["drain_complete"] and r["faults_applied"] >= 1
    assert r["summary"]["counts"]["send"]["ok"] > 0 and r["summary"]["counts"]["poll"]["ok"] > 0
    # the sends went over the brokers' Kafka listeners (aiokafka), not kraftlab's native RPC
    assert produce_over_kafka(group_cluster) > before
