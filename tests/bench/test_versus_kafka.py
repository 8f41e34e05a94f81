"""`kraftlab bench table`'s Apache Kafka section (harness/bench/versus_kafka.py), small: its
measurements run against the suite's shared kraftlab cluster and the session's Kafka peer
(the same confluent-kafka client and raw requests to both), and its rows are built from them.

What is checked is what the figures rest on, never a speed: every record sent is acknowledged
and counted, the consume reads back exactly what the topic holds, the latencies are ordered,
a leader's kill -9 is followed by an acks=all produce to the next leader, and each row says
both systems' numbers and their ratio. The full section (with the controller failovers) is
`kraftlab bench table --only kafka` (docs/benchmarks.md).
"""

from __future__ import annotations

import uuid

import pytest

from harness.bench import versus_kafka as vk
from harness.launcher import cluster as cl
from harness.peers.kafka import cluster as pk
from tests.live import LiveCluster
from tests.peers.kafka_peer import KafkaPeer

pytestmark = [pytest.mark.integration, pytest.mark.kafka_peer]

RECORDS = 300
SAMPLES = 10


def kraftlab(live: LiveCluster) -> vk.System:
    cluster = live.file

    def restart(node_id: int) -> None:
        epochs = cl.broker_epochs(cluster, 10)
        cl.start_node(cluster, live.data_dir, cluster.node(node_id))
        cl.wait_for_brokers(cluster, [node_id], 60, newer_than=epochs)

    return vk.System("kraftlab", {b: live.kafka_port(b) for b in vk.BROKERS},
                     lambda: {n.id: n.pid for n in cluster.nodes},
                     lambda i, sig: cl.signal_node(cluster.node(i), sig), restart)


def kafka(peer: KafkaPeer) -> vk.System:
    state = peer.file

    def restart(node_id: int) -> None:
        pk.start_node(state, peer.data_dir, state.node(node_id))
        pk.wait_ready(state, 120, [node_id])

    return vk.System("apache-kafka", {b: peer.kafka_port(b) for b in vk.BROKERS},
                     lambda: {n.id: n.pid for n in state.nodes},
                     lambda i, sig: pk.signal_node(state.node(i), sig), restart)


def small_measure(system: vk.System) -> dict[str, object]:
    """`measure` without the controller failovers, at a test's size."""
    out: dict[str, object] = {"system": system.name}
    topic = f"vs-{uuid.uuid4().hex[:6]}"
    assert vk.create_topic(system, topic, configs={"min.insync.replicas": "2"}) == 0
    vk.wait_led(system, topic)
    for acks, name in ((-1, "all"), (1, "1")):
        out[f"produce_acks_{name}"] = vk.produce_throughput(system, topic, acks, RECORDS)
        out[f"latency_acks_{name}"] = vk.produce_latency(system, topic, acks, SAMPLES)
    # both throughput runs send RECORDS plus a tenth to warm up; latency SAMPLES plus a tenth
    held = 2 * (RECORDS + RECORDS // 10) + 2 * (SAMPLES + SAMPLES // 10)
    out["consume"] = vk.consume(system, topic, held)
    out["held"] = held
    out["topic_create"] = vk.topic_create(system, 2)
    return out


def test_the_kafka_section_measures_both_systems_alike(brokers: LiveCluster,
                                                       kafka_peer: KafkaPeer) -> None:
    results = {s.name: small_measure(s) for s in (kraftlab(brokers), kafka(kafka_peer))}
    for name, r in results.items():
        for acks in ("all", "1"):
            produced = r[f"produce_acks_{acks}"]
            assert produced["records"] == RECORDS and produced["records_per_s"] > 0, name
            latency = r[f"latency_acks_{acks}"]
            assert latency["n"] == SAMPLES and 0 < latency["p50_ms"] <= latency["p99_ms"], name
        assert r["consume"]["records"] == r["held"], name  # exactly what the topic holds
        assert 0 < r["topic_create"]["p50_ms"] <= r["topic_create"]["p99_ms"], name
    k, a = results["kraftlab"], results["apache-kafka"]
    # the failover rows need their samples: one partition leader kill on each system
    for system, r in ((kraftlab(brokers), k), (kafka(kafka_peer), a)):
        r["partition_failover_kill_ms"] = vk.partition_failover(system, 1, lambda _m: None)
        r["controller_failover_kill_ms"] = r["controller_failover_pause_ms"] = [1.0]
        assert len(r["partition_failover_kill_ms"]) == 1  # type: ignore[arg-type]
        assert r["partition_failover_kill_ms"][0] > 0  # type: ignore[index]
    shown = dict((key, text) for key, _label, text in vk.rows(k, a))
    assert set(shown) >= {"vs_kafka_produce_all", "vs_kafka_produce_1", "vs_kafka_latency_all",
                          "vs_kafka_consume", "vs_kafka_create",
                          "vs_kafka_partition_failover_kill"}
    ratio = k["produce_acks_all"]["records_per_s"] / a["produce_acks_all"]["records_per_s"]
    assert shown["vs_kafka_produce_all"].endswith(f"ratio {ratio:.2f}x")
    assert shown["vs_kafka_consume"].startswith(f"kraftlab {k['consume']['records_per_s']:,};")
    assert all(pk.running(n) for n in kafka_peer.file.nodes)  # the killed leader is back
