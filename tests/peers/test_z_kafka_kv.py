"""The kv workload on Apache Kafka: a register per key in a topic's `retention.ms`, written with
IncrementalAlterConfigs through any broker and read with DescribeConfigs from any broker
(harness/jepsen/workload_kv_kafka.py).

On the session's Kafka peer: the outcome rules against a real broker's answers, and a Jepsen
run under broker pauses whose history holds only values that were written, whose brokers all
converge on one value per key after the heal, and whose only anomaly, if any, is a stale read
(a Kafka broker answers DescribeConfigs from its own metadata image; Kafka promises no
linearizable config read).
"""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path

import aiohttp
import pytest

from harness.check.history import load_history
from harness.jepsen.recorder import Recorder, RunContext
from harness.jepsen.run_core import RunOptions
from harness.jepsen.runner import run
from harness.jepsen.workload_kv import KvOptions
from harness.jepsen.workload_kv_kafka import (
    RETENTION_BASE,
    KafkaKvWorkload,
    decode,
    describe_request,
    encode,
    value_of,
)
from harness.kafka.wire import call_async
from harness.peers.kafka import cluster as pk
from tests.live import poll
from tests.peers.kafka_peer import KafkaPeer

pytestmark = [pytest.mark.integration, pytest.mark.kafka_peer]


def test_register_values_map_to_retention_ms_and_back() -> None:
    assert encode("w7") == str(RETENTION_BASE + 7)
    assert decode(encode("w7")) == "w7"
    assert decode(None) is None
    assert decode("604800000") == "604800000"  # a value not ours reads as itself
    with pytest.raises(ValueError, match="w<n>"):
        encode("c3")


def test_kafka_kv_needs_local_reads() -> None:
    with pytest.raises(ValueError, match="linearizable config read"):
        KafkaKvWorkload(KvOptions(consistency="linearizable"))


def broker_values(kafka_peer: KafkaPeer, key: str) -> dict[int, str | None]:
    """The key's value as each broker's metadata image holds it."""
    async def one(port: int) -> str | None:
        result = (await call_async("127.0.0.1", port, describe_request(key))).results[0]
        assert result.error_code == 0, result
        return value_of(result)

    return {b: asyncio.run(one(kafka_peer.kafka_port(b))) for b in kafka_peer.brokers}


def test_outcomes_against_a_real_broker(kafka_peer: KafkaPeer, tmp_path: Path) -> None:
    prefix = f"o{uuid.uuid4().hex[:6]}-"
    workload = KafkaKvWorkload(KvOptions(keys=1, key_prefix=prefix, consistency="local"))

    async def scenario() -> tuple[object, ...]:
        async with aiohttp.ClientSession() as session:
            ctx = RunContext({}, session, Recorder(), random.Random(1), data_dir=kafka_peer.data_dir)
            await workload.setup(ctx)  # the topic exists, absent everywhere
            [key] = workload.keys
            first = await workload.read(ctx, key, "local")
            wrote = await workload.write(ctx, key, "w5")
            unknown_write = await workload.write(ctx, "no-such-key", "w6")
            unknown_read = await workload.read(ctx, "no-such-key", "local")
            return key, first, wrote, unknown_write, unknown_read

    key, first, wrote, unknown_write, unknown_read = asyncio.run(scenario())
    assert (first.type, first.value) == ("ok", None)  # type: ignore[attr-defined]
    assert (wrote.type, wrote.error) == ("ok", None)  # type: ignore[attr-defined]
    # the topic does not exist: Kafka refuses before the controller writes anything
    assert (unknown_write.type, unknown_write.error) == (  # type: ignore[attr-defined]
        "fail", "UNKNOWN_TOPIC_OR_PARTITION")
    assert (unknown_read.type, unknown_read.error) == (  # type: ignore[attr-defined]
        "fail", "UNKNOWN_TOPIC_OR_PARTITION")
    # committed in the metadata log, so every broker's image gets it
    poll(lambda: set(broker_values(kafka_peer, str(key)).values()) == {"w5"}, 30,
         "every broker describing w5")


def test_a_kv_run_under_broker_pauses_on_kafka(kafka_peer: KafkaPeer, tmp_path: Path) -> None:
    prefix = f"r{uuid.uuid4().hex[:6]}-"
    options = RunOptions(
        out_dir=tmp_path / "run", workload="kv", system="kafka", nemesis="pause-broker",
        time_limit_s=10.0, seed=2, data_dir=kafka_peer.data_dir,
        kv=KvOptions(keys=2, key_prefix=prefix, consistency="local", rate=40.0),
        fault_s=(1.5, 2.5), quiet_s=(1.0, 1.5), lead_in_s=0.5)
    result = run(options)
    r = result.results
    assert r["system"] == "kafka" and r["ops"] == ["read", "write"]
    assert r["faults_applied"] >= 2 and r["recovered"]
    assert set(r["anomalies"]) <= {"nonlinearizable", "stale-read"}, r["anomalies"]
    if result.verdict == "invalid":
        assert r["anomalies"]["stale-read"]  # what the checker found is a stale read
    else:
        assert result.verdict == "valid"
    ops = [op for op in load_history(options.out_dir / "history.jsonl") if op.is_client]
    written = {op.invoke.value[1] for op in ops if op.f == "write"}
    reads = [op for op in ops if op.f == "read" and op.type == "ok"]
    writes_ok = [op for op in ops if op.f == "write" and op.type == "ok"]
    assert reads and writes_ok
    # every value read is one a client wrote (or the absent initial value)
    assert {op.value[1] for op in reads} <= written | {None}
    # brokers serve the reads
    assert {op.completion.extra.get("node") for op in reads if op.completion} <= set(
        kafka_peer.brokers)
    # after the heal, every broker's image converges on one written value per key
    for key in (f"{prefix}{i}" for i in range(2)):
        def converged(key: str = key) -> bool:
            values = set(broker_values(kafka_peer, key).values())
            return len(values) == 1 and values <= written
        poll(converged, 30, f"every broker describing one value of {key}")
    assert all(pk.running(n) for n in kafka_peer.file.nodes)
