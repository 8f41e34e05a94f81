"""One Kafka client library against a kraftlab cluster: the rows of docs/kafka-protocol.md's
compatibility table. Standalone (the library and the standard library only), so it runs in any
environment that has the library, e.g. a virtualenv with kafka-python 2.x, which cannot sit
beside kafka-python 3 in the project's:

    python tests/kafka/compat_client.py LIBRARY BOOTSTRAP PREFIX

LIBRARY is kafka-python, confluent-kafka or aiokafka. Each check prints one JSON line
{"check": ..., "ok": bool, "detail": ...}:
- produce: an acks=all producer writes 20 records to partition 0 of a new 2-partition topic;
- idempotence: the same with enable.idempotence (InitProducerId, sequence numbers);
- assign-consume: a manually assigned consumer reads them back, in order;
- group-consume: a subscribed consumer of a group reads both partitions and commits; the
  group's committed offsets are then read back (OffsetFetch);
- admin: the library's admin client creates a topic and lists the consumer groups.
The exit code is the number of failed checks.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from typing import Any

N = 20


def report(check: str, fn: Callable[[], Any]) -> bool:
    try:
        detail = fn()
        ok = True
    except Exception as exc:  # a client library's failure, reported as the row's cell
        detail, ok = f"{type(exc).__name__}: {exc}"[:300], False
    print(json.dumps({"check": check, "ok": ok, "detail": detail}), flush=True)
    return ok


# --- kafka-python (2.x and 3.x) ---------------------------------------------------------------


def kafka_python(bootstrap: str, prefix: str) -> int:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    topic = f"{prefix}-kp"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)

    def create(name: str) -> None:
        admin.create_topics([NewTopic(name, 2, 3)])

    create(topic)

    def produce(idempotent: bool) -> list[int]:
        extra = {"enable_idempotence": True} if idempotent else {}
        p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **extra)
        futures = [p.send(topic, f"v{i}".encode(), partition=0) for i in range(N)]
        p.flush(30)
        p.close()
        return [f.get(10).offset for f in futures][-1:]

    def assign() -> int:
        c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < 2 * N and time.monotonic() < deadline:
            for records in c.poll(500).values():
                got += [r.value for r in records]
        c.close()
        assert got == [f"v{i}".encode() for i in range(N)] * 2, got[:5]
        return len(got)

    def group() -> dict[str, int]:
        c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"{prefix}-kp-group",
                          enable_auto_commit=False, auto_offset_reset="earliest")  # fmt: skip
        got = 0
        deadline = time.monotonic() + 30
        while got < 2 * N and time.monotonic() < deadline:
            got += sum(len(r) for r in c.poll(500).values())
        c.commit()
        committed = c.committed(TopicPartition(topic, 0))
        c.close()
        assert got == 2 * N and committed == 2 * N, (got, committed)
        return {"records": got, "committed": committed}

    def admin_check() -> list[str]:
        create(f"{topic}-admin")
        groups = admin.list_consumer_groups() if hasattr(admin, "list_consumer_groups") \
            else admin.list_groups()  # fmt: skip
        return sorted(str(g[0] if isinstance(g, tuple) else g["group_id"]) for g in groups)

    results = [report("produce", lambda: produce(False)), report("idempotence", lambda: produce(True)),
               report("assign-consume", assign), report("group-consume", group),
               report("admin", admin_check)]  # fmt: skip
    admin.close()
    return results.count(False)


# --- confluent-kafka ----------------------------------------------------------------------------


def confluent(bootstrap: str, prefix: str) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"{prefix}-ck"
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def create(name: str) -> None:
        admin.create_topics([NewTopic(name, 2, 3)])[name].result(30)

    create(topic)

    def produce(idempotent: bool) -> int:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                      "enable.idempotence": idempotent})  # fmt: skip
        errors: list[Any] = []
        for i in range(N):
            p.produce(topic, f"v{i}".encode(), partition=0,
                      on_delivery=lambda e, _m: errors.append(e) if e else None)
        assert p.flush(30) == 0 and not errors, errors
        return N

    def assign() -> int:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                      "enable.auto.commit": False})  # fmt: skip
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < 2 * N and time.monotonic() < deadline:
            got += [m.value() for m in c.consume(100, 0.5) if m.error() is None]
        c.close()
        assert got == [f"v{i}".encode() for i in range(N)] * 2, got[:5]
        return len(got)

    def group() -> dict[str, int]:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{prefix}-ck-group",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < 2 * N and time.monotonic() < deadline:
            got += sum(1 for m in c.consume(100, 0.5) if m.error() is None)
        c.commit(asynchronous=False)
        [tp] = c.committed([TopicPartition(topic, 0)], timeout=10)
        c.close()
        assert got == 2 * N and tp.offset == 2 * N, (got, tp.offset)
        return {"records": got, "committed": tp.offset}

    def admin_check() -> list[str]:
        create(f"{topic}-admin")
        listed = admin.list_consumer_groups().result(10)
        return sorted(g.group_id for g in listed.valid)

    results = [report("produce", lambda: produce(False)), report("idempotence", lambda: produce(True)),
               report("assign-consume", assign), report("group-consume", group),
               report("admin", admin_check)]  # fmt: skip
    return results.count(False)


# --- aiokafka -----------------------------------------------------------------------------------


def aiokafka(bootstrap: str, prefix: str) -> int:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = f"{prefix}-aio"

    async def create(name: str) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(name, 2, 3)])
        finally:
            await admin.close()

    async def produce(idempotent: bool) -> int:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                             enable_idempotence=idempotent)  # fmt: skip
        await p.start()
        try:
            for i in range(N):
                await p.send_and_wait(topic, f"v{i}".encode(), partition=0)
        finally:
            await p.stop()
        return N

    async def assign() -> int:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await c.start()
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        got: list[bytes] = []
        try:
            async with asyncio.timeout(20):
                while len(got) < 2 * N:
                    for records in (await c.getmany(timeout_ms=500)).values():
                        got += [r.value for r in records]
        finally:
            await c.stop()
        assert got == [f"v{i}".encode() for i in range(N)] * 2, got[:5]
        return len(got)

    async def group() -> dict[str, int]:
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"{prefix}-aio-group",
                             enable_auto_commit=False, auto_offset_reset="earliest")  # fmt: skip
        await c.start()
        got = 0
        try:
            async with asyncio.timeout(30):
                while got < 2 * N:
                    got += sum(len(r) for r in (await c.getmany(timeout_ms=500)).values())
            await c.commit()
            committed = await c.committed(TopicPartition(topic, 0))
        finally:
            await c.stop()
        assert got == 2 * N and committed == 2 * N, (got, committed)
        return {"records": got, "committed": committed}

    async def admin_check() -> list[str]:
        await create(f"{topic}-admin")
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            groups = await admin.list_consumer_groups()
        finally:
            await admin.close()
        return sorted(str(g[0]) for g in groups)

    asyncio.run(create(topic))
    results = [report(name, lambda f=f: asyncio.run(f())) for name, f in (
        ("produce", lambda: produce(False)), ("idempotence", lambda: produce(True)),
        ("assign-consume", assign), ("group-consume", group), ("admin", admin_check))]  # fmt: skip
    return results.count(False)


LIBRARIES = {"kafka-python": kafka_python, "confluent-kafka": confluent, "aiokafka": aiokafka}

MODULES = {"kafka-python": "kafka", "confluent-kafka": "confluent_kafka", "aiokafka": "aiokafka"}

if __name__ == "__main__":
    library, bootstrap, prefix = sys.argv[1:4]
    from importlib.metadata import version

    print(json.dumps({"check": "version", "ok": True, "detail": version(library)}), flush=True)
    sys.exit(LIBRARIES[library](bootstrap, prefix))
