"""The Apache Kafka peer kit on a real cluster: ready means a quorum leader and every broker
unfenced, real clients write and read through it, the CLI's fault verbs act on the JVMs it
started (by PID), and a killed partition leader is replaced as Kafka replaces it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from harness.kafka.wire import Wire
from harness.peers.kafka import cluster as pk
from harness.peers.kafka import logs as kafka_logs
from tests.live import poll
from tests.peers.kafka_peer import KafkaPeer

pytestmark = [pytest.mark.integration, pytest.mark.kafka_peer]


def test_up_waits_for_a_quorum_leader_and_every_broker_unfenced(kafka_peer: KafkaPeer) -> None:
    state = kafka_peer.status()
    assert state["system"] == "apache-kafka" and state["ready"]
    voters = {n["id"] for n in state["nodes"] if "controller" in n["roles"]}
    assert voters == {1, 2, 3}
    assert state["quorum"]["leader_id"] in voters
    assert {v["id"] for v in state["quorum"]["voters"]} == voters
    brokers = sorted(n["id"] for n in state["nodes"] if "broker" in n["roles"])
    assert brokers == [101, 102, 103]
    assert all(seen == brokers for seen in state["brokers_seen"].values())
    assert all(n["running"] for n in state["nodes"])
    # the kraftlab settings that Kafka has reach every node's server.properties; the ones that
    # are kraftlab's own do not
    for node in kafka_peer.file.nodes:
        props = dict(line.split("=", 1) for line in
                     Path(node.config_file).read_text().splitlines() if "=" in line)
        assert props["broker.session.timeout.ms"] == "3000"
        assert props["broker.heartbeat.interval.ms"] == "500"
        assert props["process.roles"] == ("controller" if node.id < 100 else "broker")
        assert props["listeners"].startswith(
            "CONTROLLER://127.0.0.1:" if node.id < 100 else "PLAINTEXT://127.0.0.1:")


def test_describe_quorum_through_a_broker_names_the_leader(kafka_peer: KafkaPeer) -> None:
    with kafka_peer.wire() as w:
        answer = w.describe_quorum()
    assert answer.error_code == 0
    part = answer.topics[0].partitions[0]
    assert part.error_code == 0 and part.leader_id in {1, 2, 3} and part.leader_epoch >= 1
    assert sorted(v.replica_id for v in part.current_voters) == [1, 2, 3]
    assert sorted(o.replica_id for o in part.observers) == [101, 102, 103]


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_acks_all_records_read_back_in_order(kafka_peer: KafkaPeer, client: str) -> None:
    topic = f"peer-{client}-{uuid.uuid4().hex[:6]}"
    kafka_peer.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    values = [f"v{i}".encode() for i in range(200)]
    if client == "confluent-kafka":
        import confluent_kafka as ck

        producer = ck.Producer({"bootstrap.servers": kafka_peer.bootstrap, "acks": "all",
                                "enable.idempotence": True, "linger.ms": 5})
        failed: list[object] = []

        def delivered(err: object, _msg: object) -> None:
            if err is not None:
                failed.append(err)

        for v in values:
            producer.produce(topic, v, on_delivery=delivered)
        assert producer.flush(60) == 0 and not failed
        consumer = ck.Consumer({"bootstrap.servers": kafka_peer.bootstrap,
                                "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                                "enable.auto.commit": False})
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        got: list[bytes] = []

        def read_all() -> bool:
            for m in consumer.consume(200, 1.0):
                assert m.error() is None, m.error()
                got.append(m.value() or b"")
            return len(got) >= len(values)

        poll(read_all, 60, "every record back")
        consumer.close()
    else:
        import kafka  # type: ignore[import-untyped]

        kp = kafka.KafkaProducer(bootstrap_servers=kafka_peer.bootstrap, acks="all",
                                 linger_ms=5)
        futures = [kp.send(topic, v) for v in values]
        offsets = [f.get(timeout=60).offset for f in futures]
        kp.close()
        assert offsets == list(range(len(values)))
        kc = kafka.KafkaConsumer(bootstrap_servers=kafka_peer.bootstrap,
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        tp = kafka.TopicPartition(topic, 0)
        kc.assign([tp])
        kc.seek(tp, 0)
        got = []

        def read_all() -> bool:
            for recs in kc.poll(timeout_ms=1000).values():
                got.extend(r.value for r in recs)
            return len(got) >= len(values)

        poll(read_all, 60, "every record back")
        kc.close()
    assert got == values

    # Each broker's own replica, read from its log directory (harness/peers/kafka/logs.py),
    # holds the same records at offsets 0..199, and its checkpointed high watermark reaches
    # the end (replica.high.watermark.checkpoint.interval.ms, 5 s).
    expected = [(i, v.decode()) for i, v in enumerate(values)]
    for node in kafka_peer.file.brokers:
        log = kafka_logs.read_partition(node.log_dir, topic, 0)
        assert (log.records, log.log_end_offset) == (expected, len(values)), node.id
        assert len(log.leader_epochs) == 1
        poll(lambda n=node: kafka_logs.read_hw_checkpoint(n.log_dir).get((topic, 0))
             == len(values), 30, f"broker {node.id}'s high watermark checkpointed")


def test_tool_runs_kafkas_own_command_line_tool(kafka_peer: KafkaPeer) -> None:
    topic = f"peer-tool-{uuid.uuid4().hex[:6]}"
    kafka_peer.create_topic(topic, 2, 3)
    out = kafka_peer.cli("tool", "kafka-topics", "--bootstrap-server", kafka_peer.bootstrap,
                         "--describe", "--topic", topic)
    assert f"Topic: {topic}" in out and "PartitionCount: 2" in out
    assert "ReplicationFactor: 3" in out


def test_z_kill_9_of_a_partition_leader_elects_another_and_restart_rejoins_the_isr(
        kafka_peer: KafkaPeer) -> None:
    """`peer kafka kill` SIGKILLs the recorded JVM; the controller fences it after
    broker.session.timeout.ms and moves leadership to an ISR member with a higher epoch;
    `peer kafka start` brings it back into the ISR. Runs last in this module: it restores the
    peer (every node running, ready) before it returns."""
    topic = f"peer-kill-{uuid.uuid4().hex[:6]}"
    kafka_peer.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    leader, epoch = kafka_peer.leader(topic)
    victim = kafka_peer.file.node(leader)
    pid = victim.pid
    kafka_peer.cli("kill", str(leader))
    assert not pk.running(kafka_peer.file.node(leader))
    assert pid is not None and not pk.running(victim)

    def new_leader() -> tuple[int, int] | None:
        with kafka_peer.wire() as w:
            p = w.metadata([topic]).topics[0].partitions[0]
        if p.leader_id not in (-1, leader):
            return p.leader_id, p.leader_epoch
        return None

    after, after_epoch = poll(new_leader, 60, "a new partition leader")
    assert after != leader and after_epoch > epoch
    # A killed incarnation answers nothing; the new one answers Metadata listing itself only
    # once the controller has unfenced its registration (BrokerServer opens its listeners
    # after that): what the Kafka nemesis's broker_epochs counts as "registered again".
    assert pk.view(kafka_peer.file)["brokers_seen"][leader] is None
    kafka_peer.cli("start", str(leader))
    poll(lambda: leader in (pk.view(kafka_peer.file)["brokers_seen"][leader] or ()), 90,
         f"node {leader} answering Metadata, listed")

    def back_in_isr() -> bool:
        with Wire(kafka_peer.kafka_port(after)) as w:
            p = w.metadata([topic]).topics[0].partitions[0]
        return sorted(p.isr_nodes) == [101, 102, 103]

    poll(back_in_isr, 90, f"node {leader} back in the ISR")
    assert kafka_peer.status()["ready"]
