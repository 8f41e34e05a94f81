"""Kafka clients and Kafka error codes across broker failures (runs last in tests/kafka: it kills
brokers of the shared cluster, by recorded PID, and restarts them with the CLI).

- kafka-python's and confluent-kafka's idempotent acks=all producers, each with the partition
  leader SIGKILLed mid-stream:
  the client finds the new leader by itself (NOT_LEADER_OR_FOLLOWER / connection errors ->
  Metadata refresh -> retry) and a manually assigned consumer reads every record exactly once,
  in order;
- FENCED_LEADER_EPOCH for a fetch naming the old leader epoch after that failover (KIP-320);
- with min.insync.replicas=3: REQUEST_TIMED_OUT while a dead follower is still in the ISR,
  then, once the controller fenced it and the ISR shrank, NOT_ENOUGH_REPLICAS for acks=all,
  acks=1 still accepted, and the dead broker listed in offline_replicas.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.kafka.conftest import BROKERS, KafkaCluster, Wire
from tests.kafka.test_protocol import batch, fetch, produce
from tests.live import poll

pytestmark = pytest.mark.integration

# 100,000 records, in the default run (about 7 s per test on 2 cores).
COUNTS = [100_000]
NONE = 0
REQUEST_TIMED_OUT = 7
NOT_ENOUGH_REPLICAS = 19
FENCED_LEADER_EPOCH = 74


def kill(c: KafkaCluster, broker_id: int) -> None:
    os.kill(c.pid(broker_id), signal.SIGKILL)


def metadata_partition(c: KafkaCluster, topic: str, via: int) -> object:
    with Wire(c.kafka_port(via), timeout_s=3) as w:
        return w.metadata([topic]).topics[0].partitions[0]


@pytest.mark.parametrize("N", COUNTS)
def test_kafka_python_producer_survives_leader_kill(kcluster: KafkaCluster, N: int) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = f"kp-failover-{N}"
    kcluster.create_topic(topic)
    old_leader, old_epoch = kcluster.leader(topic)
    sent = [f"f-{i:06d}".encode() for i in range(N)]
    producer = KafkaProducer(bootstrap_servers=kcluster.bootstrap, acks="all",
                             enable_idempotence=True, linger_ms=5, retries=2**31 - 1,
                             request_timeout_ms=5_000, reconnect_backoff_ms=100,
                             delivery_timeout_ms=120_000)  # fmt: skip
    try:
        futures = [producer.send(topic, value=v, partition=0) for v in sent[: N // 2]]
        futures[N // 4].get(timeout=30)  # a quarter acknowledged: the rest are in flight
        kill(kcluster, old_leader)
        futures += [producer.send(topic, value=v, partition=0) for v in sent[N // 2 :]]
        producer.flush(120)
        offsets = [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close(10)
    # Every record acknowledged once, at its own offset, in send order. Offsets may skip: the
    # new leader writes an epoch marker (a control batch) after its predecessor's tail.
    assert len(set(offsets)) == N and offsets == sorted(offsets)
    assert offsets[: N // 4 + 1] == list(range(N // 4 + 1))

    survivor = next(b for b in BROKERS if b != old_leader)

    def moved() -> object | None:
        p = metadata_partition(kcluster, topic, survivor)
        return p if p.leader_id not in (-1, old_leader) else None  # type: ignore[attr-defined]

    new = poll(moved, 30, "a new leader")
    assert new.leader_epoch > old_epoch  # type: ignore[attr-defined]

    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=kcluster.bootstrap.replace(
        f"127.0.0.1:{kcluster.kafka_port(old_leader)},", ""), group_id=None,
        enable_auto_commit=False, fetch_max_wait_ms=200)  # fmt: skip
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [(r.offset, r.value) for r in records if r.value is not None]
    finally:
        consumer.close()
    # Epoch markers (control batches) are skipped by the client; data offsets may skip them.
    assert [v for _, v in got] == sent
    assert [o for o, _ in got] == offsets  # the acknowledged offsets, nothing else

    # KIP-320: a fetch naming the old leader epoch is fenced by the new leader.
    with Wire(kcluster.kafka_port(new.leader_id)) as w:  # type: ignore[attr-defined]
        assert fetch(w, topic, 0, epoch=old_epoch).error_code == FENCED_LEADER_EPOCH

    kcluster.cli("cluster", "restart", str(old_leader), timeout_s=90)


@pytest.mark.parametrize("N", COUNTS)
def test_confluent_kafka_producer_survives_leader_kill(kcluster: KafkaCluster, N: int) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    topic = f"kp-failover-ck-{N}"
    kcluster.create_topic(topic)
    old_leader, _ = kcluster.leader(topic)
    sent = [f"c-{i:06d}".encode() for i in range(N)]
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
    killed = False
    for i, v in enumerate(sent):
        if i == N // 2:
            deadline = time.monotonic() + 30
            while len(delivered) < N // 4 and time.monotonic() < deadline:
                producer.poll(0.05)  # serve delivery reports until a quarter is acknowledged
            assert len(delivered) >= N // 4
            kill(kcluster, old_leader)
            killed = True
        producer.produce(topic, value=v, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    assert killed and producer.flush(120) == 0
    assert errors == []
    # Delivery reports in send order, each record once, offsets increasing (markers may skip).
    assert [v for _, v in delivered] == sent
    offsets = [o for o, _ in delivered]
    assert offsets == sorted(set(offsets))

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
    kcluster.cli("cluster", "restart", str(old_leader), timeout_s=90)


def test_min_isr_timeouts_and_not_enough_replicas(kcluster: KafkaCluster) -> None:
    kcluster.create_topic("kp-isr", 1, "min.insync.replicas=3")
    poll(lambda: sorted(metadata_partition(kcluster, "kp-isr", BROKERS[0]).isr_nodes) == BROKERS,  # type: ignore[attr-defined]
         30, "a full ISR")  # fmt: skip
    leader, _ = kcluster.leader("kp-isr")
    dead = next(b for b in BROKERS if b != leader)
    with Wire(kcluster.kafka_port(leader)) as w:
        assert produce(w, "kp-isr", batch([b"full-isr"])).error_code == NONE
        kill(kcluster, dead)
        # The dead follower is still in the ISR until its session expires: the HW cannot move.
        r = produce(w, "kp-isr", batch([b"stuck"]), timeout_ms=300)
        assert r.error_code == REQUEST_TIMED_OUT
        poll(lambda: dead not in metadata_partition(kcluster, "kp-isr", leader).isr_nodes,  # type: ignore[attr-defined]
             30, f"broker {dead} out of the ISR")  # fmt: skip
        p = metadata_partition(kcluster, "kp-isr", leader)
        assert p.offline_replicas == [dead]  # type: ignore[attr-defined]
        assert produce(w, "kp-isr", batch([b"refused"])).error_code == NOT_ENOUGH_REPLICAS
        assert produce(w, "kp-isr", batch([b"acks-1"]), acks=1).error_code == NONE
    kcluster.cli("cluster", "restart", str(dead), timeout_s=90)
