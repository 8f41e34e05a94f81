"""The group coordinator's broker SIGKILLed under a consuming group (runs late in tests/kafka:
it kills a broker of the shared cluster by recorded PID and restarts it with the CLI).

A kafka-python member commits after processing every poll. The broker leading the group's
`__consumer_offsets` partition (its coordinator, FindCoordinator) is killed -9 between two rounds
of records. The replica on a surviving broker becomes leader, loads the partition from its log,
and the member finds it by itself (NOT_COORDINATOR / connection errors -> FindCoordinator):
- no acknowledged commit is lost: every offset committed before the kill is still committed
  after it (acks=all appends: an answered commit is in the ISR's logs);
- the member goes on consuming and committing: nothing is lost (a commit cut by the kill may
  bring records back: at least once), and the final commits are the log ends.
"""

from __future__ import annotations

import os
import signal

import pytest

from tests.kafka.conftest import BROKERS, KafkaCluster, Wire
from tests.kafka.groups import Member, committed, kafka_python_loop, produce, wait_for
from tests.live import poll

pytestmark = pytest.mark.integration


def coordinator_of(c: KafkaCluster, group: str, via: int) -> int:
    from kafka.protocol.metadata import FindCoordinatorRequest

    with Wire(c.kafka_port(via), timeout_s=3) as w:
        r = w.call(FindCoordinatorRequest[3](key=group, key_type=0))
    assert r.error_code == 0, r
    return int(r.node_id)


def test_coordinator_killed_mid_run_loses_no_committed_offset(kcluster: KafkaCluster) -> None:
    topic, group, partitions = "grp-kill", "kill", 4
    kcluster.create_topic(topic, partitions)
    m = Member("survivor").start(kafka_python_loop(
        kcluster, topic, group, tolerate_commit_errors=True, request_timeout_ms=5_000,
        reconnect_backoff_ms=100))  # fmt: skip
    values = produce(kcluster, topic, "k1", 400, partitions)
    try:
        wait_for("the first round committed",
                 lambda: committed(kcluster, group) == {(topic, p): 100 for p in range(partitions)},
                 60, m)  # fmt: skip
        before = committed(kcluster, group)
        dead = poll(lambda: coordinator_of(kcluster, group, BROKERS[0]), 10, "the coordinator")
        os.kill(kcluster.pid(dead), signal.SIGKILL)
        survivor = next(b for b in BROKERS if b != dead)
        moved = poll(lambda: (n := coordinator_of(kcluster, group, survivor)) != dead and n,
                     60, "a new coordinator")  # fmt: skip
        assert moved in BROKERS and moved != dead
        # Loaded from the log by the new leader: every commit answered before the kill.
        after = committed(kcluster, group)
        assert all(after[k] >= v for k, v in before.items()), (before, after)
        values += produce(kcluster, topic, "k2", 400, partitions)
        wait_for("the second round committed",
                 lambda: committed(kcluster, group) == {(topic, p): 200 for p in range(partitions)},
                 90, m)  # fmt: skip
    finally:
        m.join()
        kcluster.cli("cluster", "restart", str(dead), timeout_s=90)
    assert not m.errors
    processed = {v for _, _, v in m.records}
    assert processed == set(values)  # nothing lost
