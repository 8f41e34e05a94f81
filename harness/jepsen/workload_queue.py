"""The `queue` workload: producers and consumers on a replicated topic, over harness/client.

The run creates its topic (`partitions`, `replication_factor`, `min.insync.replicas`,
`unclean.leader.election.enable`, `replication.mode`) through the admin API, then runs
`producers + consumers` workers, each a Jepsen client (a logical process):

- a producer worker sends unique integer values (ASCII bytes) one at a time, each to a random
  partition, through its own `Producer` (acks and idempotence as configured); the send is
  recorded `invoke [tp, value]` and, acknowledged, `ok [tp, [offset, value]]` (the offset the
  broker returned, Jepsen's shape);
- a consumer worker assigns every partition from offset 0 (an `assign` op) and polls; each ok
  poll records every (offset, value) it returned: `{tp: [[offset, value], ...]}`.

Outcome rules (`fail` must mean "did not happen"):
- a send is `ok` only with its RecordMetadata; a send whose record was never handed to a
  producer (the producer could not be created: InitProducerId failed) is `fail`; anything else
  (an error after the record was queued, the op timeout) is `info`: the producer may have
  delivered it, or may still (an idempotent producer retries). acks=0 gives no offset, so an
  acks=0 send is `info` with error `NO_ACKNOWLEDGEMENT`;
- a poll that timed out is `info`; one that raised a Kafka error is `fail` (a read changes
  nothing). OFFSET_OUT_OF_RANGE (the new leader's log ends below this consumer's position: an
  unclean election or a truncation) is a `fail`, and the consumer restarts that partition from
  offset 0 under a new process id, so the reset is not a nonmonotonic poll of one process;
- after an `info` the worker's process id is retired (Jepsen's rule) and the worker gets a
  fresh client: a producer worker a new Producer (new producer id; the old one is aborted), a
  consumer worker a new Consumer at the old positions, recorded as a new `assign`.

Final phase (after the runner healed and the controllers agreed on a leader), bounded by its
deadline, under process ids above every worker's:
1. recovery probe: one send per partition with acks=all, retried until acknowledged. An
   acknowledged acks=all send means the leader's high watermark covers it and everything
   before it in its log; `probe_recovery_s` is the end of the final heal -> the last
   partition's probe acknowledged;
2. final drain: one `poll` op per partition, flagged `"final": true`, that reads the partition
   from offset 0 until its position reaches the high watermark and passes the probe; a drain
   that does not finish within `drain_timeout_s` is recorded `fail` (nothing claimed) and
   retried. The checker treats a final poll as the partition's complete contents, so only a
   complete drain is ever recorded ok.
Probe sends and drain polls carry `"final": true` so availability counts leave them out.

Leader elections (`partition_leader_elections`): from setup to the final phase a watcher
describes the topic every WATCH_INTERVAL_S and keeps each partition's (leader_epoch, leader)
states; `count_elections` counts the changes to a real leader among them, merged with the
brokers' logged states (harness/check/elections.py: not the leader epoch's rise, which counts a
quorum-mode fence as an election).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from harness.check import elections as el
from harness.check.groups import check_groups
from harness.check.history import Operation
from harness.check.queue import check_queue
from harness.client import (
    Bootstrap,
    ClientError,
    ClusterClient,
    Consumer,
    ConsumerConfig,
    ConsumerRecord,
    OffsetOutOfRange,
    Producer,
    ProducerConfig,
)
from harness.jepsen.recorder import CheckOutcome, ProcessIds, RunContext
from harness.jepsen.replica_logs import check_topic_replicas
from harness.jepsen.workload_subscribe import GroupConsumers, kafka_bootstrap
from harness.launcher import cluster as cl

ACKS = {"0": 0, "1": 1, "all": -1}
CLIENTS = ("native", "kafka")  # QueueOptions.client
SETUP_TIMEOUT_S = 20.0
WATCH_INTERVAL_S = 0.1  # how often the leader watcher describes the topic
WATCH_MAX_SAMPLES = 36_000  # the watcher's own bound (an hour at WATCH_INTERVAL_S)


class QueueSetupError(RuntimeError):
    """The topic could not be created or never got leaders."""


@dataclass(frozen=True, slots=True)
class QueueOptions:
    topic: str = "jepsen-queue"
    partitions: int = 3
    replication_factor: int = 3
    acks: str = "all"  # "0" | "1" | "all"
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    idempotence: bool = True
    replication_mode: str = "isr"  # "isr" | "quorum" | "raft" (the topic's replication.mode)
    producers: int = 3
    consumers: int = 2
    rate: float = 60.0  # sends per second, all producers together
    op_timeout_s: float = 2.5
    poll_wait_ms: int = 300  # fetch.max.wait.ms of workload polls
    drain_timeout_s: float = 5.0  # one drain op
    subscribe: bool = False  # consumers are one consumer group (workload_subscribe.py)
    # The topic's leader.epoch.enable (False: the UNSAFE pre-0.11 follower, KIP-101; isr only).
    leader_epoch_enable: bool = True
    # The producers' and consumers' protocol: "native" (harness/client, kraftlab's RPC
    # listeners) or "kafka" (aiokafka to the brokers' Kafka listeners,
    # harness/jepsen/kafka_client.py), the client Apache Kafka runs always use.
    client: str = "native"

    def __post_init__(self) -> None:
        if self.acks not in ACKS:
            raise ValueError(f"acks must be one of {', '.join(ACKS)}, got {self.acks!r}")
        if self.replication_mode not in ("isr", "quorum", "raft"):
            raise ValueError("replication_mode must be 'isr', 'quorum' or 'raft'")
        if self.partitions < 1 or self.replication_factor < 1 or self.producers < 1:
            raise ValueError("partitions, replication_factor and producers must be >= 1")
        if self.consumers < 0 or self.rate <= 0 or self.op_timeout_s <= 0:
            raise ValueError("consumers >= 0, rate > 0 and op_timeout_s > 0 are required")
        if not 1 <= self.min_insync_replicas <= self.replication_factor:
            raise ValueError("min_insync_replicas must be in [1, replication_factor]")
        if self.idempotence and self.acks != "all":
            raise ValueError("idempotence needs acks=all (Kafka: enable.idempotence requires "
                             "acks=all); pass --no-idempotence with acks 0 or 1")
        if self.client not in CLIENTS:
            raise ValueError(f"client must be one of {', '.join(CLIENTS)}, got {self.client!r}")
        if self.poll_wait_ms < 0 or self.poll_wait_ms >= self.op_timeout_s * 1000:
            raise ValueError("poll_wait_ms must be in [0, op_timeout_s)")

    def topic_configs(self) -> dict[str, str]:
        configs = {"min.insync.replicas": str(self.min_insync_replicas),
                   "unclean.leader.election.enable": str(self.unclean_leader_election).lower(),
                   "replication.mode": self.replication_mode}
        if not self.leader_epoch_enable:
            configs["leader.epoch.enable"] = "false"
        return configs


def _decode(value: bytes | None) -> Any:
    """Workload values are ASCII integers; anything else is kept as text (a foreign record)."""
    if value is None:
        return None
    text = value.decode("utf-8", errors="replace")
    return int(text) if text.isdigit() else text


def producer_timeouts_ms(op_timeout_s: float) -> tuple[int, int, int]:
    """The run's producers' (request.timeout.ms, delivery.timeout.ms, retry.backoff.ms): one
    attempt per operation timeout, four attempts' worth (at least 10 s) to deliver."""
    request = int(op_timeout_s * 1000)
    return request, max(request * 4, 10_000), 50


class QueueWorkload:
    name = "queue"

    def __init__(self, options: QueueOptions) -> None:
        self.options = options
        self.concurrency = options.producers + options.consumers
        self.op_timeout_s = options.op_timeout_s
        self.tps = [f"{options.topic}-{p}" for p in range(options.partitions)]
        self.pids = ProcessIds(self.concurrency)
        self._values = itertools.count(1)
        self._client: ClusterClient | None = None
        self._producers: dict[int, Producer] = {}
        self._aborted: list[Producer] = []
        self._consumers: dict[int, Consumer] = {}
        self._final_pids = itertools.count(0)
        self.final_info: dict[str, Any] = {}
        self.leader_epochs_start: dict[int, int] = {}
        # (leader_epoch, leader) states seen in the controllers' metadata (harness/jepsen/
        # elections.py): the setup's, the watcher's during the run, the final phase's
        self.leader_states: el.States = {}
        self._watcher: asyncio.Task[None] | None = None
        self._drain_ends: dict[int, int] = {}  # partition -> end of its final drain
        self.group = GroupConsumers(options.topic, options.partitions, self.pids,
                                    options.poll_wait_ms, options.op_timeout_s, _decode
                                    ) if options.subscribe else None  # fmt: skip

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {"topic": o.topic, "partitions": o.partitions,
                "replication_factor": o.replication_factor, "acks": o.acks,
                "min_insync_replicas": o.min_insync_replicas,
                "unclean_leader_election": o.unclean_leader_election,
                "idempotence": o.idempotence, "replication_mode": o.replication_mode,
                "producers": o.producers, "consumers": o.consumers, "rate": o.rate,
                "subscribe": o.subscribe, "leader_epoch_enable": o.leader_epoch_enable,
                "client": o.client, "concurrency": self.concurrency,
                "op_timeout_s": self.op_timeout_s}

    def is_producer(self, worker: int) -> bool:
        return worker < self.options.producers

    @property
    def client(self) -> ClusterClient:
        assert self._client is not None, "setup() first"
        return self._client

    # -------------------------------------------------------------------------------- setup

    async def topic_view(self, ctx: RunContext) -> dict[str, Any] | None:
        """GET /topics/{topic} from the first controller that answers, or None."""
        for url in ctx.admin_urls.values():
            try:
                async with ctx.session.get(
                    f"{url}/topics/{self.options.topic}", timeout=aiohttp.ClientTimeout(total=1.0)
                ) as resp:
                    data = await resp.json(content_type=None)
                    if resp.status == 200 and isinstance(data, dict):
                        return data
            except (aiohttp.ClientError, TimeoutError, ValueError):
                continue
        return None

    async def setup(self, ctx: RunContext) -> None:
        """Create the topic and wait until every partition has a leader and a full ISR."""
        if ctx.data_dir is None:
            raise QueueSetupError("the queue workload needs the cluster's data dir")
        o = self.options
        body = {"name": o.topic, "partitions": o.partitions,
                "replication_factor": o.replication_factor, "configs": o.topic_configs()}
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        created, last = False, ""
        maybe_ours = False  # an earlier create may have happened although we got no answer
        while not created and time.monotonic() < deadline:
            for url in ctx.admin_urls.values():
                try:
                    async with ctx.session.post(f"{url}/topics", json=body,
                                                timeout=aiohttp.ClientTimeout(total=3.0)) as resp:
                        data = await resp.json(content_type=None)
                except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                    last = type(exc).__name__
                    maybe_ours = True
                    continue
                error = data.get("error") if isinstance(data, dict) else None
                if error == "TOPIC_ALREADY_EXISTS" and not maybe_ours:
                    # values restart at 1 every run: an old topic's records would look like
                    # duplicates and inconsistent offsets
                    raise QueueSetupError(f"topic {o.topic!r} already exists in this cluster; "
                                          "use --topic NAME or a fresh cluster")
                if resp.status == 201 or error == "TOPIC_ALREADY_EXISTS":
                    created = True
                    break
                maybe_ours = maybe_ours or resp.status >= 500
                last = f"{resp.status} {data}"
                # too few unfenced brokers may be temporary (one restarting): retry until the
                # deadline; any other bad request is final
                if resp.status == 400 and error != "INVALID_REPLICATION_FACTOR":
                    raise QueueSetupError(f"topic {o.topic!r} rejected: {data}")
            if not created:
                await asyncio.sleep(0.2)  # retry pacing while brokers register
        if not created:
            raise QueueSetupError(f"could not create topic {o.topic!r}: {last}")
        while time.monotonic() < deadline:
            view = await self.topic_view(ctx)
            parts = (view or {}).get("partitions", [])
            if len(parts) == o.partitions and all(
                p["leader"] is not None and len(p["isr"]) == o.replication_factor for p in parts
            ):
                self.leader_epochs_start = {p["partition"]: p["leader_epoch"] for p in parts}
                self._observe(view)
                break
            await asyncio.sleep(0.05)  # poll interval
        else:
            raise QueueSetupError(f"topic {o.topic!r} has no leader or full ISR after "
                                  f"{SETUP_TIMEOUT_S:.0f} s")
        self._client = ClusterClient(Bootstrap.from_cluster_file(ctx.data_dir),
                                     request_timeout_ms=int(o.op_timeout_s * 1000))
        self._watcher = asyncio.create_task(self._watch_leaders(ctx))
        if self.group is not None:
            self.group.setup(kafka_bootstrap(ctx.data_dir))
        if ctx.progress is not None:
            ctx.progress(f"topic {o.topic}: {o.partitions} partitions, RF "
                         f"{o.replication_factor}, {o.topic_configs()}, acks={o.acks}, "
                         f"idempotence={o.idempotence}")

    # ---------------------------------------------------------------------------- elections

    def _observe(self, view: dict[str, Any] | None) -> None:
        for p in (view or {}).get("partitions", []):
            if isinstance(p.get("partition"), int) and isinstance(p.get("leader_epoch"), int):
                el.add_state(self.leader_states, p["partition"], p["leader_epoch"], p["leader"])

    async def _watch_leaders(self, ctx: RunContext) -> None:
        """Describe the topic every WATCH_INTERVAL_S until final() stops it, so the leader
        changes of the run are seen one by one (elections are counted from them)."""
        for _ in range(WATCH_MAX_SAMPLES):
            self._observe(await self.topic_view(ctx))
            await asyncio.sleep(WATCH_INTERVAL_S)  # sampling cadence

    async def _stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
            self._watcher = None

    def count_elections(self, logs_dir: Path | None = None) -> dict[str, Any]:
        """Partition leader elections since setup (elections.py's rule: changes to a real
        leader), from the watched states merged with the brokers' logged states."""
        states = self.leader_states
        if logs_dir is not None and logs_dir.is_dir():
            states = el.merge(states, el.broker_log_states(logs_dir, self.options.topic))
        per = el.leader_elections(states, self.leader_epochs_start,
                                  quorum_mode=self.options.replication_mode == "quorum",
                                  raft_mode=self.options.replication_mode == "raft")
        changes = sum(el.epoch_changes(states.get(p, {}), e)
                      for p, e in self.leader_epochs_start.items())
        return {"partition_leader_elections": sum(per.values()),
                "partition_leader_changes": changes}

    # ---------------------------------------------------------------------------- producers

    def _producer_config(self, acks: str, idempotence: bool) -> ProducerConfig:
        request, delivery, backoff = producer_timeouts_ms(self.options.op_timeout_s)
        return ProducerConfig(acks=ACKS[acks], linger_ms=0, enable_idempotence=idempotence,
                              delivery_timeout_ms=delivery, request_timeout_ms=request,
                              retry_backoff_ms=backoff)

    # The clients: harness/client's, over kraftlab's native protocol. A target with another
    # protocol overrides these three (workload_queue_kafka.py: Apache Kafka's).

    async def _new_producer(self, config: ProducerConfig) -> Producer:
        return await Producer.create(self.client, config)

    def _new_consumer(self, config: ConsumerConfig) -> Consumer:
        return Consumer(self.client, config)

    async def _release_consumer(self, consumer: Consumer) -> None:
        """A consumer the workload no longer uses (harness/client's hold nothing of their own)."""

    async def _producer(self, worker: int) -> Producer:
        producer = self._producers.get(worker)
        if producer is None:
            config = self._producer_config(self.options.acks, self.options.idempotence)
            producer = await self._new_producer(config)
            self._producers[worker] = producer
        return producer

    def _retire_producer(self, worker: int) -> None:
        producer = self._producers.pop(worker, None)
        if producer is not None:
            producer.abort()
            self._aborted.append(producer)

    async def _send(self, producer_for: Any, partition: int, value: int,
                    timeout_s: float) -> tuple[str, int | None, str | None]:
        """(type, offset, error) of one send. `producer_for()` returns the producer."""
        queued = False
        try:
            async with asyncio.timeout(timeout_s):
                try:
                    producer = await producer_for()
                except (ClientError, OSError) as exc:
                    return "fail", None, f"NO_PRODUCER:{getattr(exc, 'error', type(exc).__name__)}"
                future = await producer.send(self.options.topic, str(value).encode(),
                                             partition=partition)
                queued = True
                meta = await future
        except TimeoutError:
            return ("info" if queued else "fail"), None, "REQUEST_TIMED_OUT"
        except ClientError as exc:
            return ("info" if queued else "fail"), None, exc.error
        except OSError as exc:
            return ("info" if queued else "fail"), None, type(exc).__name__
        if meta.offset < 0:
            return "info", None, "NO_ACKNOWLEDGEMENT"  # acks=0: nothing was acknowledged
        return "ok", meta.offset, None

    async def send(self, ctx: RunContext, worker: int, partition: int) -> str:
        process = self.pids.current(worker)
        tp, value = self.tps[partition], next(self._values)
        ctx.recorder.record(process, "invoke", "send", [tp, value])
        type_, offset, error = await self._send(lambda: self._producer(worker), partition,
                                                value, self.options.op_timeout_s)
        out = [tp, [offset, value]] if type_ == "ok" else [tp, value]
        ctx.recorder.record(process, type_, "send", out, error)
        if type_ == "info":
            self.pids.retire(worker)
            self._retire_producer(worker)
        return type_

    # ---------------------------------------------------------------------------- consumers

    def _consumer_config(self) -> ConsumerConfig:
        return ConsumerConfig(max_wait_ms=self.options.poll_wait_ms, auto_offset_reset="none",
                              request_timeout_ms=int(self.options.op_timeout_s * 1000))

    async def _assign(self, ctx: RunContext, worker: int,
                      positions: dict[int, int] | None = None) -> Consumer:  # fmt: skip
        """A new consumer for the worker's current process, recorded as an `assign` op."""
        process = self.pids.current(worker)
        consumer = self._new_consumer(self._consumer_config())
        ctx.recorder.record(process, "invoke", "assign", list(self.tps))
        for p in range(self.options.partitions):
            await consumer.assign(self.options.topic, p, (positions or {}).get(p, 0))
        ctx.recorder.record(process, "ok", "assign", list(self.tps))
        old = self._consumers.get(worker)
        self._consumers[worker] = consumer
        if old is not None:
            await self._release_consumer(old)
        return consumer

    @staticmethod
    def poll_value(records: Sequence[ConsumerRecord]) -> dict[str, list[list[Any]]]:
        out: dict[str, list[list[Any]]] = {}
        for r in records:
            out.setdefault(f"{r.topic}-{r.partition}", []).append([r.offset, _decode(r.value)])
        return out

    async def poll(self, ctx: RunContext, worker: int) -> str:
        if self.group is not None:
            return await self.group.poll(ctx, worker)
        consumer = self._consumers.get(worker) or await self._assign(ctx, worker)
        process = self.pids.current(worker)
        ctx.recorder.record(process, "invoke", "poll", None)
        reset: int | None = None
        try:
            async with asyncio.timeout(self.options.op_timeout_s):
                records = await consumer.poll()
            type_, value, error = "ok", self.poll_value(records), None
        except TimeoutError:
            type_, value, error = "info", None, "REQUEST_TIMED_OUT"
        except OffsetOutOfRange as exc:
            type_, value, error, reset = "fail", None, exc.error, exc.partition
        except ClientError as exc:
            type_, value, error = "fail", None, exc.error
        except OSError as exc:
            type_, value, error = "fail", None, type(exc).__name__
        ctx.recorder.record(process, type_, "poll", value, error)
        if type_ == "info" or reset is not None:
            self.pids.retire(worker)
            positions = {p: consumer.position(self.options.topic, p) or 0
                         for p in range(self.options.partitions)}
            if reset is not None:
                positions[reset] = 0  # start that partition again from its beginning
            await self._assign(ctx, worker, positions)
        return type_

    # ---------------------------------------------------------------------------- workers

    async def run_worker(self, ctx: RunContext, worker: int, deadline: float) -> None:
        rng = random.Random(ctx.rng.random())
        producer = self.is_producer(worker)
        interval_s = self.options.producers / self.options.rate
        while time.monotonic() < deadline:
            started = time.monotonic()
            if producer:
                await self.send(ctx, worker, rng.randrange(self.options.partitions))
                # pacing (the rate option), jittered so workers do not march in step
                pause = rng.uniform(0.5, 1.5) * interval_s - (time.monotonic() - started)
            else:
                await self.poll(ctx, worker)  # long-polls up to poll_wait_ms when idle
                pause = 0.01 - (time.monotonic() - started)  # never spin on instant errors
            remaining = deadline - time.monotonic()
            if pause > 0 and remaining > 0:
                await asyncio.sleep(min(pause, remaining))

    # ---------------------------------------------------------------------------- final phase

    def _final_process(self) -> int:
        base = max(self.pids.current(w) for w in range(self.pids.workers)) + 1
        return base + next(self._final_pids)

    async def _probe(self, ctx: RunContext, partition: int, deadline: float) -> int | None:
        """One acks=all send to `partition`, retried until acknowledged; its offset."""
        producer: Producer | None = None

        async def make() -> Producer:
            nonlocal producer
            if producer is None:
                producer = await self._new_producer(self._producer_config("all", True))
            return producer

        try:
            while time.monotonic() < deadline:
                process = self._final_process()
                tp, value = self.tps[partition], next(self._values)
                ctx.recorder.record(process, "invoke", "send", [tp, value], final=True)
                type_, offset, error = await self._send(
                    make, partition, value, min(self.options.op_timeout_s,
                                                max(deadline - time.monotonic(), 0.1)))
                out = [tp, [offset, value]] if type_ == "ok" else [tp, value]
                ctx.recorder.record(process, type_, "send", out, error, final=True)
                if type_ == "ok":
                    return offset
                if producer is not None:
                    producer.abort()
                    producer = None
                await asyncio.sleep(0.05)  # retry pacing while leaders settle
            return None
        finally:
            if producer is not None:
                producer.abort()

    async def _drain_once(self, partition: int, after: int,
                          timeout_s: float) -> list[list[Any]] | None:  # fmt: skip
        """Every record of the partition from offset 0 to its high watermark (which must pass
        `after`), or None if that did not finish in time."""
        topic = self.options.topic
        consumer = self._new_consumer(self._consumer_config())
        await consumer.assign(topic, partition, 0)
        rows: list[list[Any]] = []
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    for r in await consumer.poll():
                        rows.append([r.offset, _decode(r.value)])
                    position = consumer.position(topic, partition) or 0
                    hw = consumer.high_watermarks.get((topic, partition))
                    if hw is not None and position >= hw and position > after:
                        return rows
        except (TimeoutError, ClientError, OSError):
            return None
        finally:
            await self._release_consumer(consumer)

    async def _drain(self, ctx: RunContext, partition: int, after: int,
                     deadline: float) -> bool:  # fmt: skip
        tp = self.tps[partition]
        while time.monotonic() < deadline:
            process = self._final_process()
            ctx.recorder.record(process, "invoke", "poll", None, final=True)
            budget = min(self.options.drain_timeout_s, max(deadline - time.monotonic(), 0.1))
            rows = await self._drain_once(partition, after, budget)
            if rows is not None:
                ctx.recorder.record(process, "ok", "poll", {tp: rows}, final=True)
                self._drain_ends[partition] = max([after + 1] + [o + 1 for o, _ in rows])
                return True
            ctx.recorder.record(process, "fail", "poll", None, "DRAIN_INCOMPLETE", final=True)
        return False

    async def final(self, ctx: RunContext, deadline: float) -> dict[str, Any]:
        """Abort the workers' producers, probe every partition, drain every partition."""
        for worker in list(self._producers):
            self._retire_producer(worker)
        await self._stop_watching()
        started = float(ctx.stats.get("healed_at", time.monotonic()))
        offsets = await asyncio.gather(*(self._probe(ctx, p, deadline)
                                         for p in range(self.options.partitions)))
        probed = all(o is not None for o in offsets)
        recovery_s = round(time.monotonic() - started, 3) if probed else None
        drained = []
        for p, offset in enumerate(offsets):
            if await self._drain(ctx, p, -1 if offset is None else offset, deadline):
                drained.append(self.tps[p])
        caught_up = None
        if self.group is not None:
            workers = [w for w in range(self.concurrency) if not self.is_producer(w)]
            caught_up = await self.group.catch_up(ctx, workers, self._drain_ends, deadline)
            self.group.close()
        view = await self.topic_view(ctx)
        self._observe(view)
        replicas = await self._check_replicas(ctx, view, deadline)
        self.final_info = {"probe_recovery_s": recovery_s, "drained_partitions": drained,
                           "drain_complete": len(drained) == self.options.partitions,
                           "group_caught_up": caught_up,
                           **self.count_elections(),  # the runner adds the brokers' logs
                           "final_topic": view, "replica_check": replicas}
        for producer in self._aborted:
            producer.abort()
        if self._client is not None:
            self._client.close()
        return self.final_info

    async def _check_replicas(self, ctx: RunContext, view: dict[str, Any] | None,
                              deadline: float) -> dict[str, Any] | None:
        """Every replica's log compared below the high watermarks (harness/check/replicas.py:
        `replica-divergence`); None when the topic's assignment or the brokers are unknown."""
        if view is None or ctx.data_dir is None or self.options.replication_mode != "isr":
            return None
        cluster = cl.ClusterFile.load(ctx.data_dir)
        urls = {n.id: n.admin_url for n in cluster.brokers}
        assignment = {int(p["partition"]): [int(b) for b in p["replicas"]]
                      for p in view.get("partitions", [])}
        result = await check_topic_replicas(ctx.session, urls, self.options.topic, assignment,
                                            deadline)
        return {"counts": result.counts, "anomalies": result.anomalies,
                "compared_offsets": result.compared}

    # ------------------------------------------------------------------------------ checker

    def check(self, ops: Sequence[Operation], out_dir: Path) -> CheckOutcome:
        result = check_queue(ops)
        report = result.to_json()
        anomalies = {name: {"count": result.counts[name], "examples": result.anomalies[name]}
                     for name in report["anomaly_types"]}
        verdict = "valid" if result.valid else "invalid"
        if self.group is not None:
            groups = check_groups(ops)
            anomalies.update({name: {"count": n, "examples": groups.anomalies[name]}
                              for name, n in groups.counts.items() if n})  # fmt: skip
            report["group"] = {"counts": groups.counts, "anomalies": groups.anomalies,
                               "stats": groups.stats}  # fmt: skip
            if not groups.valid:
                verdict = "invalid"
            elif verdict == "valid" and not groups.stats["group_caught_up"]:
                verdict = "unknown"  # the group never consumed up to the end
        replicas = self.final_info.get("replica_check") or {}
        for name, count in replicas.get("counts", {}).items():
            anomalies[name] = {"count": count, "examples": replicas["anomalies"][name]}
            verdict = "invalid"
        if verdict == "valid" and not self.final_info.get("drain_complete", False):
            verdict = "unknown"  # nothing wrong seen, but some partition was never drained
        return CheckOutcome(verdict, anomalies, report)
