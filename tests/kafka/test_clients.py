"""Real Kafka clients that kraftlab did not write (kafka-python; confluent-kafka on
librdkafka) produce to and consume from a 3-broker kraftlab cluster, unchanged.

Each library: an idempotent producer with acks=all writes N records to an RF-3 partition, every
send must be acknowledged with its offset, and a manually assigned consumer (no group, no offset
commits) reads exactly those values back, in order, at offsets 0..N-1. Every wait has a deadline.
"""

from __future__ import annotations

import time

import pytest

from tests.kafka.conftest import KafkaCluster

pytestmark = pytest.mark.integration

# 100,000 records, in the default run (about 7 s per test on 2 cores).
COUNTS = [100_000]


def report(what: str, n: int, started: float) -> None:
    elapsed = time.monotonic() - started
    print(f"{what}: {n} records in {elapsed:.2f} s = {n / elapsed:,.0f} records/s")  # pytest -s


def values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i:06d}".encode() for i in range(n)]


@pytest.mark.parametrize("N", COUNTS)
def test_kafka_python_round_trip(kcluster: KafkaCluster, N: int) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = f"kp-python-{N}"
    kcluster.create_topic(topic)
    sent = values("kp", N)
    producer = KafkaProducer(bootstrap_servers=kcluster.bootstrap, acks="all",
                             enable_idempotence=True, linger_ms=5, request_timeout_ms=15_000)  # fmt: skip
    started = time.monotonic()
    try:
        futures = [producer.send(topic, value=v, partition=0) for v in sent]
        producer.flush(120)
        offsets = [f.get(timeout=10).offset for f in futures]
        report("kafka-python produce", N, started)
    finally:
        producer.close(10)
    assert offsets == list(range(N))

    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=kcluster.bootstrap, group_id=None,
                             enable_auto_commit=False, fetch_max_wait_ms=200)  # fmt: skip
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[tuple[int, bytes]] = []
        started = deadline = time.monotonic()
        deadline += 120
        while len(got) < N and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [(r.offset, r.value) for r in records]
        report("kafka-python consume", N, started)
        assert consumer.end_offsets([tp])[tp] == N
        assert consumer.beginning_offsets([tp])[tp] == 0
    finally:
        consumer.close()
    assert [o for o, _ in got] == list(range(N))
    assert [v for _, v in got] == sent


@pytest.mark.parametrize("N", COUNTS)
def test_confluent_kafka_round_trip(kcluster: KafkaCluster, N: int) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    topic = f"kp-confluent-{N}"
    kcluster.create_topic(topic)
    sent = values("ck", N)
    delivered: list[tuple[int, bytes]] = []
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.offset(), msg.value()))  # type: ignore[attr-defined]

    started = time.monotonic()
    producer = Producer({"bootstrap.servers": kcluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})  # fmt: skip
    for v in sent:
        while True:
            try:
                producer.produce(topic, value=v, partition=0, on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0
    report("confluent-kafka produce", N, started)
    assert errors == []
    assert sorted(delivered) == list(enumerate(sent))

    consumer = Consumer({"bootstrap.servers": kcluster.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 200})  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[tuple[int, bytes]] = []
        started = deadline = time.monotonic()
        deadline += 120
        while len(got) < N and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.value()))
        report("confluent-kafka consume", N, started)
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    assert (low, high) == (0, N)
    assert [o for o, _ in got] == list(range(N))
    assert [v for _, v in got] == sent
