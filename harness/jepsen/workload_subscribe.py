"""The queue workload's `--subscribe` mode: its consumer workers are members of one consumer
group (confluent-kafka, the Kafka protocol, range assignor: eager rebalances) instead of
readers of every partition. Each member polls, and commits what it polled right after, as an
at-least-once application would (docs/groups.md, docs/jepsen.md).

What is recorded (ops flagged `"group": true`, checked by harness/check/groups.py):
- `subscribe` once per member process (value []), then an `assign` op each time the group hands
  it partitions or takes them away (recorded before the poll that saw it, so the queue
  checker's per-process positions restart with the new assignment);
- `poll` ok with the records, as the queue workload's polls (its checker judges them too);
- `commit` invoke with {tp: next offset}; ok when acknowledged; fail when certainly not
  written (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID);
  info otherwise (the coordinator may have written it: NOT_COORDINATOR after a failover, a
  timeout). After an info the member's process id is retired (Jepsen's rule) and its current
  assignment recorded anew under the next one.

Final phase (`catch_up`): after the final drain, the members keep polling and committing until
the group's acknowledged commits reach every partition's end, or the deadline.

The confluent-kafka consumer blocks, so each call runs in a worker thread (`asyncio.to_thread`):
its rebalance callbacks run inside `consume`, in that thread, and are only queued there; the
event loop records everything after the call returns, so the history is written by one thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.jepsen.recorder import ProcessIds, RunContext

CERTAINLY_NOT_WRITTEN = frozenset({"ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID",
                                   "REBALANCE_IN_PROGRESS", "FENCED_INSTANCE_ID"})  # fmt: skip
SESSION_TIMEOUT_MS = 6_000  # group.min.session.timeout.ms: members of a killed client go soon


def kafka_bootstrap(data_dir: Path) -> str:
    nodes = json.loads((data_dir / "cluster.json").read_text())["nodes"]
    return ",".join(f"{n['host']}:{n['kafka_port']}" for n in nodes if n.get("kafka_port"))


@dataclass(slots=True)
class _Member:
    consumer: Any
    events: list[tuple[str, list[int]]] = field(default_factory=list)  # ("assign"|"revoke", ps)
    assigned: set[int] = field(default_factory=set)


class GroupConsumers:
    """The group members of one run, one per consumer worker."""

    def __init__(self, topic: str, partitions: int, pids: ProcessIds, poll_wait_ms: int,
                 op_timeout_s: float, decode: Callable[[bytes | None], Any]) -> None:  # fmt: skip
        self.topic = topic
        self.decode = decode
        self.acknowledged: dict[str, int] = {}  # tp -> highest acknowledged commit
        self.partitions = partitions
        self.group = f"{topic}-group"
        self.pids = pids
        self.poll_wait_ms = poll_wait_ms
        self.op_timeout_s = op_timeout_s
        self._members: dict[int, _Member] = {}
        self._bootstrap = ""

    def setup(self, bootstrap: str) -> None:
        """The brokers' Kafka listeners the members join through (`host:port,...`): a kraftlab
        cluster's (`kafka_bootstrap`) or an Apache Kafka peer's (peer.json)."""
        self._bootstrap = bootstrap

    def _tp(self, partition: int) -> str:
        return f"{self.topic}-{partition}"

    def _new_member(self, worker: int) -> _Member:
        from confluent_kafka import Consumer

        consumer = Consumer({
            "bootstrap.servers": self._bootstrap, "group.id": self.group,
            "client.id": f"jepsen-{worker}", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "partition.assignment.strategy": "range",
            "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": self.poll_wait_ms,
            "socket.timeout.ms": int(self.op_timeout_s * 1000),
            "reconnect.backoff.ms": 100, "reconnect.backoff.max.ms": 1000,
            # librdkafka logs a line per refused connection: the nemesis makes many
            "log_level": 0})  # fmt: skip
        member = _Member(consumer)

        def on_assign(_c: Any, tps: Any) -> None:
            member.events.append(("assign", [tp.partition for tp in tps]))

        def on_revoke(_c: Any, tps: Any) -> None:
            member.events.append(("revoke", [tp.partition for tp in tps]))

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        return member

    def _record_assignment(self, ctx: RunContext, process: int, member: _Member) -> None:
        tps = [self._tp(p) for p in sorted(member.assigned)]
        ctx.recorder.record(process, "invoke", "assign", tps, group=True)
        ctx.recorder.record(process, "ok", "assign", tps, group=True)

    async def poll(self, ctx: RunContext, worker: int, **flags: Any) -> str:
        member = self._members.get(worker)
        process = self.pids.current(worker)
        if member is None:
            member = self._members[worker] = await asyncio.to_thread(self._new_member, worker)
            ctx.recorder.record(process, "invoke", "subscribe", [], group=True)
            ctx.recorder.record(process, "ok", "subscribe", [], group=True)
        messages = await asyncio.to_thread(member.consumer.consume, 500, self.poll_wait_ms / 1000)
        for kind, partitions in member.events:
            if kind == "assign":
                member.assigned = set(partitions)
            else:
                member.assigned -= set(partitions)
            self._record_assignment(ctx, process, member)
        member.events.clear()
        records: dict[str, list[list[Any]]] = {}
        errors = []
        for m in messages:
            if m.error() is not None:
                errors.append(m.error().name())
                continue
            records.setdefault(self._tp(m.partition()), []).append([m.offset(), self.decode(m.value())])
        ctx.recorder.record(process, "invoke", "poll", None, group=True, **flags)
        ctx.recorder.record(process, "ok", "poll", records, group=True, **flags)
        if not records:
            return "fail" if errors else "ok"
        return await self._commit(ctx, worker, process, member, records, flags)

    async def _commit(self, ctx: RunContext, worker: int, process: int, member: _Member,
                      records: dict[str, list[list[Any]]], flags: dict[str, Any]) -> str:  # fmt: skip
        from confluent_kafka import KafkaException

        offsets = {tp: max(o for o, _ in rows) + 1 for tp, rows in records.items()}
        ctx.recorder.record(process, "invoke", "commit", offsets, group=True, **flags)
        error: str | None = None
        try:
            result = await asyncio.to_thread(member.consumer.commit, asynchronous=False)
            failed = [tp for tp in result or [] if tp.error is not None]
            if failed:
                error = failed[0].error.name()
        except KafkaException as exc:
            error = exc.args[0].name() if exc.args else "UNKNOWN"
        if error is None:
            type_ = "ok"
            for tp, offset in offsets.items():
                self.acknowledged[tp] = max(self.acknowledged.get(tp, 0), offset)
        elif error in CERTAINLY_NOT_WRITTEN:
            type_ = "fail"
        else:
            type_ = "info"
        ctx.recorder.record(process, type_, "commit", offsets if type_ == "ok" else None, error,
                            group=True, **flags)  # fmt: skip
        if type_ == "info":
            self.pids.retire(worker)
            self._record_assignment(ctx, self.pids.current(worker), member)
        return type_

    async def catch_up(self, ctx: RunContext, workers: list[int], ends: dict[int, int],
                       deadline: float) -> bool:  # fmt: skip
        """Poll and commit with every member until the acknowledged commits reach `ends`
        (partition -> end offset) or the deadline."""
        if not workers:
            return False

        def done() -> bool:
            return all(self.acknowledged.get(self._tp(p), 0) >= end for p, end in ends.items())

        while time.monotonic() < deadline:
            if done():
                return True
            await asyncio.gather(*(self.poll(ctx, w, catch_up=True) for w in workers))
        return done()

    def close(self) -> None:
        """Every member leaves the group (LeaveGroup); a broken client is just dropped."""
        from confluent_kafka import KafkaException

        for member in self._members.values():
            with contextlib.suppress(KafkaException, RuntimeError):
                member.consumer.close()
        self._members.clear()

