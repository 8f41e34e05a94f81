"""kraftlab beside Apache Kafka in one run: the same client, the same requests, the same faults,
on two clusters of the same shape (3 controllers + brokers 101-103, Kafka's default timeouts
on both, or the same `--config` overrides), one after the other so they never share the cores.

Per system (the `kafka` section of `kraftlab bench table`, docs/benchmarks.md):
- produce: RF 3, 1 partition, `records` of 100 B with confluent-kafka (librdkafka), acks=all
  and acks=1, records/s (harness/bench/kafka_produce.py's sender: delivery reports only for
  failures, so librdkafka and the brokers are measured, not a Python callback per record), and
  the node processes' CPU seconds per 100k records;
- produce latency: one record at a time (linger.ms 0, produce then flush), p50 / p99;
- consume: the acks=all records read back from offset 0 with a confluent-kafka Consumer;
- metadata commit: CreateTopics of a 1-partition RF 3 topic, sequentially; both answer once
  the controller has committed the topic's records (Kafka's ControllerApis and kraftlab's
  controller reply after commit);
- controller failover: kill -9 / SIGSTOP of the active controller (DescribeQuorum's leader),
  then time until a CreateTopics through a broker succeeds, i.e. until a new controller has
  been elected and commits; the node is restarted / resumed and caught up between trials;
- partition leader failover: kill -9 of the partition's leader broker, then time until an
  acks=all Produce to the leader that Metadata names next succeeds (fencing after
  broker.session.timeout.ms, the election, the client's metadata refresh); restarted and back
  in the ISR between trials.

A fault loop is bounded (FAULT_BOUND_S per trial) and every node is stopped by PID at the end.
"""

from __future__ import annotations

import os
import signal
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.bench.kafka_produce import confluent_sender
from harness.bench.quorum import cpu_seconds, percentile
from harness.kafka.wire import Wire
from harness.launcher import cluster as cl
from harness.peers.kafka import cluster as pk
from partition.log import batch as rb

BROKERS = (101, 102, 103)
FAULT_BOUND_S = 90.0
RECORD_BYTES = 100
REQUEST_TIMEOUT_MS = 2_000
# During a fault: short request timeouts and a short socket timeout, so a request parked on a
# dead or paused node is replaced within this bound and a failover is timed, not a timeout.
FAULT_REQUEST_TIMEOUT_MS = 250


@dataclass
class System:
    """One running cluster as the measurements see it."""

    name: str
    ports: dict[int, int]  # broker id -> Kafka listener port
    pids: Callable[[], dict[int, int | None]]
    signal: Callable[[int, signal.Signals], bool]
    restart: Callable[[int], None]  # start a killed node again and wait until it serves

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def wire(self, broker: int, timeout_s: float = 5.0) -> Wire:
        return Wire(self.ports[broker], timeout_s=timeout_s)

    def cpu(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.pids().values())


@contextmanager
def kraftlab_system(overrides: Mapping[str, str]) -> Iterator[System]:
    base = Path(tempfile.mkdtemp(prefix="kraftlab-vs-kafka-")).resolve()
    cluster = cl.create_cluster(base, 3, dict(overrides), brokers=3)
    try:
        for node in cluster.nodes:
            cl.start_node(cluster, base, node)
        cl.wait_for_leader(cluster, [n.id for n in cluster.controllers], 60)
        cl.wait_for_brokers(cluster, list(BROKERS), 60)

        def restart(node_id: int) -> None:
            node = cluster.node(node_id)
            epochs = cl.broker_epochs(cluster, 10) if node_id in BROKERS else {}
            cl.start_node(cluster, base, node)
            if node_id in BROKERS:
                cl.wait_for_brokers(cluster, [node_id], 60, newer_than=epochs)
            else:
                cl.wait_for_leader(cluster, [n.id for n in cluster.controllers], 60)

        yield System(
            "kraftlab", {b: _port(cluster.node(b).kafka_port) for b in BROKERS},
            lambda: {n.id: n.pid for n in cluster.nodes},
            lambda i, sig: cl.signal_node(cluster.node(i), sig), restart)
    finally:
        for node in cluster.nodes:
            if node.pid is not None:
                cl.signal_node(node, signal.SIGCONT)
            cl.stop_node(node, force=True, timeout_s=5)
            node.pid = None
        cluster.save(base)


@contextmanager
def kafka_system(overrides: Mapping[str, str]) -> Iterator[System]:
    base = Path(tempfile.mkdtemp(prefix="kraftlab-kafka-peer-")).resolve()
    peer = pk.up(base, layout="split", controllers=3, brokers=3, overrides=overrides,
                 timeout_s=180)
    try:
        def restart(node_id: int) -> None:
            pk.start_node(peer, base, peer.node(node_id))
            pk.wait_ready(peer, 120, [node_id])

        yield System(
            "apache-kafka", {b: _port(peer.node(b).kafka_port) for b in BROKERS},
            lambda: {n.id: n.pid for n in peer.nodes},
            lambda i, sig: pk.signal_node(peer.node(i), sig), restart)
    finally:
        peer.save(base)
        pk.down(base, force=True)


def _port(port: int | None) -> int:
    assert port is not None
    return port


# --- requests through the raw wire client (the same bytes to both) ------------------------------


def create_topic(system: System, name: str, *, broker: int = BROKERS[0],
                 configs: Mapping[str, str] | None = None,
                 timeout_ms: int = REQUEST_TIMEOUT_MS) -> int:
    """CreateTopics of one RF 3 partition; its error code (-1: no answer in time)."""
    from kafka.protocol.admin import CreateTopicsRequest  # type: ignore[import-untyped]

    cls = CreateTopicsRequest[5]
    topic = cls.CreatableTopic(
        name=name, num_partitions=1, replication_factor=3, assignments=[],
        configs=[cls.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()])  # fmt: skip
    try:
        with system.wire(broker, timeout_s=timeout_ms / 1000 + 1) as w:
            answer = w.call(cls(topics=[topic], timeout_ms=timeout_ms, validate_only=False))
        return int(answer.topics[0].error_code)
    except OSError:
        return -1


def partition_view(system: System, topic: str, brokers: tuple[int, ...] = BROKERS) -> Any:
    """Metadata of partition 0 from the first broker that answers, or None."""
    for b in brokers:
        try:
            with system.wire(b, timeout_s=2) as w:
                t = w.metadata([topic]).topics[0]
            if t.error_code == 0 and t.partitions:
                return t.partitions[0]
        except OSError:
            continue
    return None


def wait_led(system: System, topic: str, isr: int = 3, bound_s: float = 60) -> Any:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        p = partition_view(system, topic)
        if p is not None and p.leader_id >= 0 and len(p.isr_nodes) >= isr:
            return p
        time.sleep(0.05)  # poll interval
    raise TimeoutError(f"{system.name}: {topic} not led with an ISR of {isr} in {bound_s} s")


def produce_one(system: System, broker: int, topic: str, value: bytes,
                timeout_ms: int = REQUEST_TIMEOUT_MS) -> int:
    from kafka.protocol.producer import ProduceRequest  # type: ignore[import-untyped]

    cls = ProduceRequest[9]
    data = rb.encode_batch([rb.Record(value, None, timestamp_ms=int(time.time() * 1000))])
    t = cls.TopicProduceData(name=topic, partition_data=[
        cls.TopicProduceData.PartitionProduceData(index=0, records=data)])
    try:
        with system.wire(broker, timeout_s=timeout_ms / 1000 + 1) as w:
            answer = w.call(cls(transactional_id=None, acks=-1, timeout_ms=timeout_ms,
                                topic_data=[t]))
        return int(answer.responses[0].partition_responses[0].error_code)
    except OSError:
        return -1


def controller_leader(system: System) -> int:
    for b in BROKERS:
        try:
            with system.wire(b, timeout_s=2) as w:
                p = w.describe_quorum().topics[0].partitions[0]
            if p.error_code == 0 and p.leader_id > 0:
                return int(p.leader_id)
        except OSError:
            continue
    raise RuntimeError(f"{system.name}: no controller leader in DescribeQuorum")


# --- measurements ---------------------------------------------------------------------------------


def produce_throughput(system: System, topic: str, acks: int, records: int) -> dict[str, Any]:
    send, close = confluent_sender(system.bootstrap, acks)
    try:
        send(topic, [os.urandom(RECORD_BYTES) for _ in range(max(1, records // 10))], 1)
        values = [os.urandom(RECORD_BYTES) for _ in range(records)]
        cpu0 = system.cpu()
        started = time.monotonic()
        count = send(topic, values, 1)
        elapsed = time.monotonic() - started
        cpu = system.cpu() - cpu0
    finally:
        close()
    return {"records": count, "elapsed_s": round(elapsed, 3),
            "records_per_s": round(count / elapsed),
            "node_cpu_s_per_100k": round(cpu * 100_000 / count, 2)}


def produce_latency(system: System, topic: str, acks: int, samples: int) -> dict[str, float]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": system.bootstrap, "acks": str(acks),
                         "linger.ms": 0, "enable.idempotence": acks == -1})
    value = os.urandom(RECORD_BYTES)
    out = []
    for i in range(samples + samples // 10):
        started = time.perf_counter()
        producer.produce(topic, value, partition=0)
        if producer.flush(30) != 0:
            raise RuntimeError(f"{system.name}: a record was not acknowledged within 30 s")
        if i >= samples // 10:  # the first tenth warms up the connection and the JIT
            out.append((time.perf_counter() - started) * 1000)
    return _pcts(out)


def consume(system: System, topic: str, expected: int) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": system.bootstrap, "group.id": f"bench-{topic}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "fetch.max.bytes": 52_428_800})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = time.monotonic()
    deadline = started + 300
    while got < expected and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    elapsed = time.monotonic() - started
    consumer.close()
    if got < expected:
        raise RuntimeError(f"{system.name}: read {got} of {expected} records in 300 s")
    return {"records": got, "elapsed_s": round(elapsed, 3), "records_per_s": round(got / elapsed)}


def topic_create(system: System, samples: int) -> dict[str, float]:
    out = []
    for i in range(samples):
        started = time.perf_counter()
        error = create_topic(system, f"create-{i}-{os.urandom(3).hex()}")
        if error != 0:
            raise RuntimeError(f"{system.name}: CreateTopics answered {error}")
        out.append((time.perf_counter() - started) * 1000)
    return _pcts(out)


def controller_failover(system: System, fault: str, trials: int,
                        say: Callable[[str], None]) -> list[float]:
    """ms from the fault on the active controller to the first committed CreateTopics."""
    sig = signal.SIGKILL if fault == "kill" else signal.SIGSTOP
    out = []
    for trial in range(trials):
        victim = controller_leader(system)
        started = time.monotonic()
        assert system.signal(victim, sig), f"{system.name}: controller {victim} not running"
        n = 0
        while create_topic(system, f"failover-{fault}-{trial}-{n}-{os.urandom(2).hex()}",
                           timeout_ms=FAULT_REQUEST_TIMEOUT_MS) != 0:
            n += 1
            if time.monotonic() - started > FAULT_BOUND_S:
                raise RuntimeError(f"{system.name}: no metadata commit {FAULT_BOUND_S} s after "
                                   f"{fault} of controller {victim}")
        elapsed = (time.monotonic() - started) * 1000
        out.append(round(elapsed, 1))
        say(f"[kafka] {system.name}: controller {fault} of {victim}: {elapsed:.0f} ms")
        if fault == "kill":
            system.restart(victim)
        else:
            system.signal(victim, signal.SIGCONT)
        _caught_up(system)
    return out


def partition_failover(system: System, trials: int, say: Callable[[str], None]) -> list[float]:
    """ms from kill -9 of a partition's leader broker to the first acks=all produce that
    succeeds at the leader Metadata names next."""
    out = []
    for trial in range(trials):
        topic = f"leader-failover-{trial}-{os.urandom(3).hex()}"
        assert create_topic(system, topic, configs={"min.insync.replicas": "2"}) == 0
        leader = wait_led(system, topic).leader_id
        # Kafka's brokers publish a partition to their metadata before their ReplicaManager
        # makes it leader (BrokerMetadataPublisher): a produce right after Metadata names the
        # leader can meet NOT_LEADER_OR_FOLLOWER for a moment, which a client retries
        deadline = time.monotonic() + FAULT_BOUND_S
        while produce_one(system, leader, topic, b"before") != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{system.name}: broker {leader} never took a produce to "
                                   f"{topic}")
            time.sleep(0.05)  # retry pacing, as a client's retry backoff
        others = tuple(b for b in BROKERS if b != leader)
        started = time.monotonic()
        assert system.signal(leader, signal.SIGKILL)
        while True:
            p = partition_view(system, topic, others)
            if (p is not None and p.leader_id in others
                    and produce_one(system, p.leader_id, topic, b"after",
                                    FAULT_REQUEST_TIMEOUT_MS) == 0):
                break
            if time.monotonic() - started > FAULT_BOUND_S:
                raise RuntimeError(f"{system.name}: no produce {FAULT_BOUND_S} s after kill of "
                                   f"broker {leader}")
            time.sleep(0.01)  # poll interval
        elapsed = (time.monotonic() - started) * 1000
        out.append(round(elapsed, 1))
        say(f"[kafka] {system.name}: kill of partition leader {leader}: {elapsed:.0f} ms")
        system.restart(leader)
        wait_led(system, topic, isr=3, bound_s=120)
    return out


def _caught_up(system: System, bound_s: float = 60) -> None:
    """Until every voter's log end offset reaches the high watermark seen first."""
    deadline = time.monotonic() + bound_s
    target = None
    while time.monotonic() < deadline:
        try:
            with system.wire(BROKERS[0], timeout_s=2) as w:
                p = w.describe_quorum().topics[0].partitions[0]
            if p.error_code == 0 and p.leader_id > 0:
                target = p.high_watermark if target is None else target
                if all(v.log_end_offset >= target for v in p.current_voters):
                    return
        except OSError:
            pass
        time.sleep(0.1)  # poll interval
    raise TimeoutError(f"{system.name}: the voters did not catch up in {bound_s} s")


def _pcts(samples: list[float]) -> dict[str, float]:
    return {"n": len(samples), "p50_ms": round(statistics.median(samples), 2),
            "p99_ms": round(percentile(samples, 99), 2)}


def measure(system: System, *, records: int, latency_samples: int, create_samples: int,
            trials: int, say: Callable[[str], None]) -> dict[str, Any]:
    """Every figure of one system (module docstring), in this order."""
    out: dict[str, Any] = {"system": system.name}
    for acks, name in ((-1, "all"), (1, "1")):
        topic = f"produce-acks-{name}"
        assert create_topic(system, topic, configs={"min.insync.replicas": "2"}) == 0
        wait_led(system, topic)
        say(f"[kafka] {system.name}: produce {records:,} records acks={name}")
        out[f"produce_acks_{name}"] = produce_throughput(system, topic, acks, records)
        out[f"latency_acks_{name}"] = produce_latency(system, topic, acks, latency_samples)
    say(f"[kafka] {system.name}: consume")
    out["consume"] = consume(system, "produce-acks-all", records + max(1, records // 10)
                             + latency_samples + latency_samples // 10)
    say(f"[kafka] {system.name}: {create_samples} topic creates")
    out["topic_create"] = topic_create(system, create_samples)
    for fault in ("kill", "pause"):
        out[f"controller_failover_{fault}_ms"] = controller_failover(system, fault, trials, say)
    out["partition_failover_kill_ms"] = partition_failover(system, trials, say)
    return out


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs else "-"


def rows(k: dict[str, Any], a: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(key, label, "kraftlab X; Apache Kafka Y; ratio") rows of the table from `measure` of
    kraftlab (`k`) and of Apache Kafka (`a`); ratios are kraftlab / Kafka."""
    out = []
    for acks in ("all", "1"):
        pk_, pa = k[f"produce_acks_{acks}"], a[f"produce_acks_{acks}"]
        out.append((f"vs_kafka_produce_{acks}",
                    f"produce RF 3 acks={acks}, 100 B, 1 partition, confluent-kafka: records/s "
                    "(node CPU s per 100k records)",
                    f"kraftlab {pk_['records_per_s']:,} ({pk_['node_cpu_s_per_100k']}); "
                    f"Apache Kafka {pa['records_per_s']:,} ({pa['node_cpu_s_per_100k']}); "
                    f"ratio {_ratio(pk_['records_per_s'], pa['records_per_s'])}"))
        lk, la = k[f"latency_acks_{acks}"], a[f"latency_acks_{acks}"]
        out.append((f"vs_kafka_latency_{acks}",
                    f"produce latency acks={acks}, one record at a time, p50 / p99",
                    f"kraftlab {lk['p50_ms']:.2f} / {lk['p99_ms']:.2f} ms; Apache Kafka "
                    f"{la['p50_ms']:.2f} / {la['p99_ms']:.2f} ms; p50 ratio "
                    f"{_ratio(lk['p50_ms'], la['p50_ms'])}"))
    ck, ca = k["consume"], a["consume"]
    out.append(("vs_kafka_consume", "consume from offset 0, confluent-kafka: records/s",
                f"kraftlab {ck['records_per_s']:,}; Apache Kafka {ca['records_per_s']:,}; "
                f"ratio {_ratio(ck['records_per_s'], ca['records_per_s'])}"))
    tk, ta = k["topic_create"], a["topic_create"]
    out.append(("vs_kafka_create", "metadata commit: CreateTopics (1 partition, RF 3), p50 / p99",
                f"kraftlab {tk['p50_ms']:.1f} / {tk['p99_ms']:.1f} ms; Apache Kafka "
                f"{ta['p50_ms']:.1f} / {ta['p99_ms']:.1f} ms; p50 ratio "
                f"{_ratio(tk['p50_ms'], ta['p50_ms'])}"))
    for key, label in (("controller_failover_kill_ms",
                        "controller failover, kill -9 of the active controller, to the next "
                        "committed CreateTopics: median (trials)"),
                       ("controller_failover_pause_ms",
                        "controller failover, SIGSTOP of the active controller, to the next "
                        "committed CreateTopics: median (trials)"),
                       ("partition_failover_kill_ms",
                        "partition leader failover, kill -9 of the leader broker, to the next "
                        "acks=all produce: median (trials)")):
        sk, sa = k[key], a[key]
        mk, ma = statistics.median(sk), statistics.median(sa)
        out.append((f"vs_kafka_{key.removesuffix('_ms')}", label,
                    f"kraftlab {mk:,.0f} ms ({', '.join(f'{s:,.0f}' for s in sk)}); Apache "
                    f"Kafka {ma:,.0f} ms ({', '.join(f'{s:,.0f}' for s in sa)}); ratio "
                    f"{_ratio(mk, ma)}"))
    return out
