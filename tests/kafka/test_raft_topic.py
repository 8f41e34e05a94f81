"""Real Kafka clients, unchanged, on a replication.mode=raft topic (partition/raft): the Raft
leader's epoch marker (a LeaderChange control batch at the start of every epoch) is skipped by
the clients' consumers; Metadata names the Raft leader and epoch (KIP-320 epochs are the Raft
group's); an idempotent acks=all producer survives kill -9 of the leader's broker, with every
record consumed exactly once, in order. The killed broker is restarted with the CLI.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.kafka.conftest import BROKERS, KafkaCluster, Wire
from tests.kafka.test_protocol import fetch
from tests.live import poll

pytestmark = pytest.mark.integration

N = 20_000
FENCED_LEADER_EPOCH = 74


def test_kafka_python_round_trip_on_a_raft_topic(kcluster: KafkaCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "kp-raft"
    kcluster.create_topic(topic, 1, "replication.mode=raft")
    leader, epoch = kcluster.leader(topic)
    assert leader in BROKERS and epoch >= 1  # a Raft epoch: 0 never has a leader
    sent = [f"r-{i:06d}".encode() for i in range(N)]
    producer = KafkaProducer(bootstrap_servers=kcluster.bootstrap, acks="all",
                             enable_idempotence=True, linger_ms=5, request_timeout_ms=15_000)  # fmt: skip
    try:
        futures = [producer.send(topic, value=v, partition=0) for v in sent]
        producer.flush(120)
        offsets = [f.get(timeout=10).offset for f in futures]
    finally:
        producer.close(10)
    # Offset 0 is the leader's epoch marker (the LeaderChange control batch).
    assert offsets == list(range(1, N + 1))
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=kcluster.bootstrap, group_id=None,
                             enable_auto_commit=False, fetch_max_wait_ms=200)  # fmt: skip
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 120
        while len(got) < N and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [(r.offset, r.value) for r in records]
        assert consumer.beginning_offsets([tp])[tp] == 0
        assert consumer.end_offsets([tp])[tp] == N + 1  # the HW
    finally:
        consumer.close()
    assert got == list(zip(offsets, sent, strict=True))


def test_confluent_kafka_idempotent_producer_across_a_raft_leader_kill(
    kcluster: KafkaCluster,
) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    topic = "kp-raft-failover"
    kcluster.create_topic(topic, 1, "replication.mode=raft")
    old_leader, old_epoch = kcluster.leader(topic)
    sent = [f"f-{i:06d}".encode() for i in range(N)]
    delivered: list[tuple[int, bytes]] = []
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.offset(), msg.value()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": kcluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 120_000, "reconnect.backoff.ms": 100})  # fmt: skip
    for i, v in enumerate(sent):
        if i == N // 2:
            deadline = time.monotonic() + 30
            while len(delivered) < N // 4 and time.monotonic() < deadline:
                producer.poll(0.05)  # a quarter acknowledged, the rest in flight
            assert len(delivered) >= N // 4
            os.kill(kcluster.pid(old_leader), signal.SIGKILL)
        producer.produce(topic, value=v, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert errors == []
    assert [v for _, v in delivered] == sent  # each record once, in send order
    offsets = [o for o, _ in delivered]
    assert offsets == sorted(set(offsets))  # increasing; the new epoch's marker may skip one
    survivor = next(b for b in BROKERS if b != old_leader)

    def moved() -> tuple[int, int] | None:
        with Wire(kcluster.kafka_port(survivor), timeout_s=3) as w:
            p = w.metadata([topic]).topics[0].partitions[0]
        return (p.leader_id, p.leader_epoch) if p.leader_id not in (-1, old_leader) else None

    new_leader, new_epoch = poll(moved, 30, "the new Raft leader in Metadata")
    assert new_epoch > old_epoch
    consumer = Consumer({"bootstrap.servers": kcluster.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 200})  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error() is None:
                    got.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    assert got == delivered
    # KIP-320: a fetch naming the old epoch is fenced by the new Raft leader.
    with Wire(kcluster.kafka_port(new_leader)) as w:
        assert fetch(w, topic, 0, epoch=old_epoch).error_code == FENCED_LEADER_EPOCH
    kcluster.cli("cluster", "restart", str(old_leader), timeout_s=90)
