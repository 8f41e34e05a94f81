"""`kraftlab jepsen run --system kafka --subscribe`: the queue workload's consumers as one
consumer group on Apache Kafka, its group coordinator Kafka's own, under a random broker's
kill -9 (harness/jepsen/workload_subscribe.py, docs/kafka-peer.md).

The run uses the session's Kafka peer as it is (a data dir whose peer runs is left running) and
heals what it did (the killed JVM started again, every broker back), so it is named to come
last among the modules that share that peer. The same checks as kraftlab's own subscribe run
(tests/jepsen/test_run_subscribe.py): the queue checker and the group checker
(harness/check/groups.py) find nothing, every member subscribed, commits were acknowledged, and
the group consumed up to every partition's end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.jepsen.run_core import RunOptions, served_on_every_partition
from harness.jepsen.runner import run
from harness.jepsen.workload_queue import QueueOptions
from harness.peers.kafka import cluster as pk
from tests.peers.kafka_peer import KafkaPeer

PARTITIONS = 3


@pytest.mark.kafka_peer
def test_a_consumer_group_on_kafka_under_a_broker_kill_loses_no_commit(
    kafka_peer: KafkaPeer, tmp_path: Path
) -> None:
    options = RunOptions(
        out_dir=tmp_path / "run", workload="queue", system="kafka", nemesis="kill-broker",
        time_limit_s=9.0, seed=11, data_dir=kafka_peer.data_dir,
        queue=QueueOptions(topic="jepsen-kafka-group", partitions=PARTITIONS, producers=3,
                           consumers=2, rate=60.0, op_timeout_s=2.5, subscribe=True,
                           acks="all", min_insync_replicas=2, replication_factor=3),
        fault_s=(3.5, 4.5), quiet_s=(60.0, 60.0), lead_in_s=0.5,
        start_when=served_on_every_partition(PARTITIONS))
    result = run(options)
    r = result.results
    assert (result.verdict, result.exit_code) == ("valid", 0), r["anomalies"]
    assert r["system"] == "kafka" and r["subscribe"] and r["faults_applied"] == 1
    assert r["drain_complete"] and r["group_caught_up"] and r["recovered"]
    counts = r["summary"]["counts"]
    assert counts["subscribe"]["ok"] == 2 and counts["commit"]["ok"] > 0
    assert counts["poll"]["ok"] > 0
    group = r["checker"]["group"]  # harness/check/groups.py: no lost commit, no rewind
    assert group["counts"] and not any(group["counts"].values())
    # the peer is as the run found it: every node's JVM running
    assert all(pk.running(n) for n in kafka_peer.file.nodes)
