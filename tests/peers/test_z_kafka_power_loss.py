"""A power loss of every Apache Kafka broker at once: the Jepsen nemesis's `crash-unflushed` on
a peer whose brokers' log dirs are on the lazy file system (harness/peers/lazyfs), asked for
with the key that asks it of kraftlab's brokers (`kraftlab.log.unflushed.in.process=1`).

Kafka acknowledges acks=all writes once every in-sync replica has them in its page cache and
fsyncs a segment only when it rolls (`segment.bytes`, 1 GiB) or by `flush.messages` /
`flush.ms` (both off by default): its durability is replication, so a correlated power loss of
every replica loses acknowledged writes (the Kafka documentation, "Replication" and the log
flush settings). A topic with `flush.messages=1` fsyncs every append before it is
acknowledged, and keeps everything.

On the session's peer (the last module to use it: every broker loses power and restarts).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from harness.check.history import NEMESIS, load_history
from harness.jepsen.nemesis import UNFLUSHED_KEY
from harness.jepsen.run_core import RunOptions, served_on_every_partition
from harness.jepsen.runner import run
from harness.jepsen.workload_queue import QueueOptions
from harness.peers.kafka import cluster as pk
from tests.peers.kafka_peer import KafkaPeer

pytestmark = [pytest.mark.integration, pytest.mark.kafka_peer]

RECORDS = 50


def produce(kafka_peer: KafkaPeer, topic: str, n: int) -> list[int]:
    """n records with acks=all; the offsets Kafka acknowledged."""
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": kafka_peer.bootstrap, "acks": "all",
                            "enable.idempotence": True, "linger.ms": 0})
    acked: list[int] = []
    for i in range(n):
        producer.produce(topic, f"r{i}".encode(), on_delivery=lambda err, msg: acked.append(
            msg.offset()) if err is None else None)
    assert producer.flush(60) == 0
    return sorted(acked)


def read_all(kafka_peer: KafkaPeer, topic: str) -> list[bytes]:
    """Every record of partition 0 from offset 0 to its high watermark."""
    import confluent_kafka as ck

    consumer = ck.Consumer({"bootstrap.servers": kafka_peer.bootstrap, "group.id": topic,
                            "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        tp = ck.TopicPartition(topic, 0)
        low, high = consumer.get_watermark_offsets(tp, timeout=30)
        consumer.assign([ck.TopicPartition(topic, 0, low)])
        out: list[bytes] = []
        for _ in range(200):  # bounded: each poll waits at most 0.5 s
            if len(out) >= high - low:
                break
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(msg.value())
        return out
    finally:
        consumer.close()


def test_every_broker_losing_power_loses_acknowledged_writes_unless_fsynced(
    kafka_peer: KafkaPeer, tmp_path: Path
) -> None:
    assert kafka_peer.file.lazyfs
    flushed = f"flushed-{uuid.uuid4().hex[:6]}"
    kafka_peer.create_topic(flushed, 1, 3, {"flush.messages": "1", "min.insync.replicas": "2"})
    assert produce(kafka_peer, flushed, RECORDS) == list(range(RECORDS))
    options = RunOptions(
        out_dir=tmp_path / "run", workload="queue", system="kafka", nemesis="crash-unflushed",
        time_limit_s=6.0, seed=1, data_dir=kafka_peer.data_dir,
        overrides={UNFLUSHED_KEY: "1"},
        queue=QueueOptions(topic=f"jepsen-power-{uuid.uuid4().hex[:6]}", partitions=1,
                           producers=2, consumers=1, rate=40.0, acks="all",
                           min_insync_replicas=2, replication_factor=3),
        fault_s=(2.0, 2.0), quiet_s=(30.0, 30.0), lead_in_s=0.5,  # one fault
        start_when=served_on_every_partition(1))
    result = run(options)
    r = result.results
    # the brokers came back from the power loss (Kafka's recovery of an unclean log)
    assert r["recovered"] and r["faults_applied"] == 1
    ops = load_history(options.out_dir / "history.jsonl")
    [fault] = [op.value for op in ops if op.process == NEMESIS and op.f == "start-kill"
               and "result" in (op.value or {})]
    assert fault["fault"] == "crash-unflushed"
    assert all(fault["unflushed_in_process"].values())
    assert set(fault["result"].values()) == {"killed, unflushed writes lost"}
    # acknowledged before the power loss, fsynced by none: lost, as Kafka's design says
    assert result.verdict == "invalid" and r["anomalies"]["lost-write"]["count"] > 0
    start = next(op.invoke.time for op in ops if op.process == NEMESIS and op.f == "start-kill")
    lost = {e["value"] for e in r["anomalies"]["lost-write"]["examples"]}
    acked_before = {op.invoke.value[1] for op in ops if op.is_client and op.f == "send"
                    and op.type == "ok" and op.completion is not None
                    and op.completion.time < start}
    assert lost & acked_before
    # the topic that fsyncs every append kept every acknowledged record
    assert read_all(kafka_peer, flushed) == [f"r{i}".encode() for i in range(RECORDS)]
    assert all(pk.running(n) for n in kafka_peer.file.nodes)
