"""Helpers of the consumer group tests (test_groups.py, test_z_groups_failover.py): producing
numbered records, consumer loops that commit after processing, and reading a group's committed
offsets through the Kafka protocol."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.kafka.conftest import KafkaCluster

# Short sessions so a member that goes away is noticed within the tests' deadlines; still within
# the coordinator's default [group.min.session.timeout.ms, group.max.session.timeout.ms].
SESSION_MS = 6_000
HEARTBEAT_MS = 500


def produce(c: KafkaCluster, topic: str, prefix: str, n: int, partitions: int) -> list[bytes]:
    """n records, record i to partition i % partitions, acks=all; their values."""
    from kafka import KafkaProducer

    values = [f"{prefix}-{i:05d}".encode() for i in range(n)]
    producer = KafkaProducer(bootstrap_servers=c.bootstrap, acks="all", linger_ms=5,
                             enable_idempotence=True)  # fmt: skip
    try:
        futures = [producer.send(topic, value=v, partition=i % partitions)
                   for i, v in enumerate(values)]  # fmt: skip
        producer.flush(60)
        for f in futures:
            f.get(timeout=10)
    finally:
        producer.close(10)
    return values


@dataclass
class Member:
    """One group member consuming in its own thread: poll, process (record), commit, repeat."""

    name: str
    records: list[tuple[int, int, bytes]] = field(default_factory=list)  # (partition, offset, v)
    partitions: set[int] = field(default_factory=set)  # every partition it was ever assigned
    assigned: set[int] = field(default_factory=set)  # its current assignment
    errors: list[str] = field(default_factory=list)
    commit_errors: list[str] = field(default_factory=list)  # tolerated: at-least-once then
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self, loop: Callable[[Member], None]) -> Member:
        def run() -> None:
            try:
                loop(self)
            except Exception as exc:  # reported by the test, with the member's name
                self.errors.append(f"{type(exc).__name__}: {exc}")

        self.thread = threading.Thread(target=run, name=self.name, daemon=True)
        self.thread.start()
        return self

    def join(self, timeout_s: float = 60) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), f"{self.name} did not stop"


def kafka_python_loop(c: KafkaCluster, topic: str, group: str, *, tolerate_commit_errors: bool = False,
                      **config: Any) -> Callable[[Member], None]:  # fmt: skip
    """kafka-python: subscribe; after each poll, process then commit synchronously, before the
    next poll (the rebalance runs inside poll with the eager protocol: partitions are handed over
    with everything processed committed)."""

    def loop(m: Member) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        consumer = KafkaConsumer(bootstrap_servers=c.bootstrap, group_id=group,
                                 client_id=m.name, enable_auto_commit=False,
                                 auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                                 heartbeat_interval_ms=HEARTBEAT_MS, fetch_max_wait_ms=200,
                                 partition_assignment_strategy=_range_assignor(),
                                 **config)  # fmt: skip

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                # Nothing to commit: all that poll returned was committed before the next poll.
                m.assigned -= {tp.partition for tp in revoked}

            def on_partitions_assigned(self, assigned: Any) -> None:
                m.assigned |= {tp.partition for tp in assigned}
                m.partitions |= m.assigned

        consumer.subscribe([topic], listener=Listener())

        def commit() -> None:
            commit_with(consumer, m)

        try:
            while not m.stop.is_set():
                batch = consumer.poll(timeout_ms=200)
                for tp, records in batch.items():
                    m.records += [(tp.partition, r.offset, r.value) for r in records]
                if batch:
                    commit()
        finally:
            consumer.close()  # LeaveGroup

    def commit_with(consumer: Any, m: Member) -> None:
        from kafka.errors import KafkaError

        try:
            consumer.commit()
        except KafkaError as exc:  # the coordinator died under the commit: records come again
            if not tolerate_commit_errors:
                raise
            m.commit_errors.append(repr(exc))

    return loop


def confluent_loop(c: KafkaCluster, topic: str, group: str) -> Callable[[Member], None]:
    """confluent-kafka: subscribe (range assignor, eager); process then commit synchronously."""

    def loop(m: Member) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group,
                             "client.id": m.name, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest",
                             "session.timeout.ms": SESSION_MS,
                             "heartbeat.interval.ms": HEARTBEAT_MS,
                             "partition.assignment.strategy": "range",
                             "fetch.wait.max.ms": 200})  # fmt: skip

        def on_assign(_consumer: Any, assigned: Any) -> None:
            m.assigned = {tp.partition for tp in assigned}
            m.partitions |= m.assigned

        def on_revoke(_consumer: Any, revoked: Any) -> None:
            m.assigned = set()

        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not m.stop.is_set():
                msgs = [x for x in consumer.consume(num_messages=500, timeout=0.2)
                        if x.error() is None]  # fmt: skip
                m.records += [(x.partition(), x.offset(), x.value()) for x in msgs]
                if msgs:
                    consumer.commit(asynchronous=False)
        finally:
            consumer.close()

    return loop


def _range_assignor() -> tuple[Any, ...]:
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    return (RangePartitionAssignor,)


def wait_for(what: str, check: Callable[[], bool], timeout_s: float, *members: Member) -> None:
    """Poll `check` until true (every 50 ms), failing early if a member reported an error. A
    Kafka error raised by `check` (a retriable COORDINATOR_NOT_AVAILABLE while the offsets topic
    is created, say) counts as "not yet"."""
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        for m in members:
            assert not m.errors, f"{m.name}: {m.errors}"
        try:
            if check():
                return
        except KafkaError as exc:
            last = exc
        time.sleep(0.05)  # poll interval
    raise AssertionError(f"timed out waiting for {what} (last error: {last!r})")


def group_state(c: KafkaCluster, group: str) -> tuple[str, list[str]]:
    """(state, member client ids) from DescribeGroups at the group's coordinator."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
    try:
        g = admin.describe_groups([group])[group]
    finally:
        admin.close()
    return g["group_state"], sorted(m["client_id"] for m in g["members"])


def committed(c: KafkaCluster, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets (OffsetFetch through kafka-python's admin client)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=10_000)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()}
