"""The queue workload over the Kafka protocol: against Apache Kafka (`kraftlab jepsen run
--system kafka`, `KafkaQueueWorkload`), and on kraftlab's own Kafka listeners with `--client
kafka` (`KafkaClientQueueWorkload`: the same aiokafka clients on both systems).

The same workload as on kraftlab (harness/jepsen/workload_queue.py: the same producers,
consumers, outcome rules, final probe and drain, and the same checker, harness/check/queue.py),
with what differs on a Kafka cluster started by the peer kit (harness/peers/kafka):

- clients: the Kafka protocol (harness/jepsen/kafka_client.py, aiokafka) to the brokers listed
  in the peer's peer.json, not harness/client's native protocol;
- the topic is created with CreateTopics through a broker, with the topic configs Kafka has
  (`min.insync.replicas`, `unclean.leader.election.enable`); kraftlab's own
  (`replication.mode`, `leader.epoch.enable`) are not Kafka's, so the Kafka target takes only
  replication mode `isr` with leader epochs (the target refuses the others before it starts);
- leaders and ISRs are read from the brokers' Metadata (each partition as the broker with the
  highest leader epoch knows it) instead of the controllers' admin API;
- the replica comparison below the high watermark (`replica-divergence`) reads each broker's
  replica from its log directory (harness/jepsen/replica_logs.py `check_kafka_topic_replicas`:
  the segment files and the checkpointed high watermarks), where kraftlab's brokers answer it
  on their admin API.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from harness.jepsen.kafka_client import (
    INVALID_REPLICATION_FACTOR,
    TOPIC_ALREADY_EXISTS,
    KafkaProtocolClients,
    create_topic,
    describe_topic,
)
from harness.jepsen.recorder import RunContext
from harness.jepsen.replica_logs import check_kafka_topic_replicas
from harness.jepsen.workload_queue import SETUP_TIMEOUT_S, QueueSetupError, QueueWorkload
from harness.jepsen.workload_subscribe import kafka_bootstrap
from harness.peers.kafka import cluster as pk

# kraftlab's topic configs that Kafka does not have (CreateTopics answers INVALID_CONFIG)
KRAFTLAB_ONLY_CONFIGS = ("replication.mode", "leader.epoch.enable")
SETUP_POLL_S = 0.2


class KafkaQueueWorkload(KafkaProtocolClients, QueueWorkload):
    """QueueWorkload on an Apache Kafka peer (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._peer: pk.PeerFile | None = None
        self._data_dir = Path()
        self._kafka_clients_init()

    @property
    def bootstrap(self) -> str:  # type: ignore[override]
        return self.peer.bootstrap

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "client": "kafka"}  # Apache Kafka speaks nothing else

    @property
    def peer(self) -> pk.PeerFile:
        assert self._peer is not None, "setup() first"
        return self._peer

    def _brokers(self) -> list[tuple[str, int]]:
        """The Kafka listeners (host, port) of the brokers whose JVM runs (a killed one would
        only cost a refused connection, a paused one a timeout)."""
        peer = pk.PeerFile.load(self._data_dir)  # as it is now: restarted JVMs, new PIDs
        return [(n.host, n.kafka_port) for n in peer.brokers
                if n.kafka_port is not None and pk.running(n)]  # fmt: skip

    def topic_configs(self) -> dict[str, str]:
        return {k: v for k, v in self.options.topic_configs().items()
                if k not in KRAFTLAB_ONLY_CONFIGS}  # fmt: skip

    # ------------------------------------------------------------------------------- setup

    async def topic_view(self, ctx: RunContext) -> dict[str, Any] | None:
        return await asyncio.to_thread(describe_topic, self._brokers(), self.options.topic)

    async def setup(self, ctx: RunContext) -> None:
        """Create the topic through a broker; wait until every partition is led with a full
        ISR in the brokers' Metadata."""
        if ctx.data_dir is None:
            raise QueueSetupError("the queue workload needs the peer's data dir")
        self._peer = pk.PeerFile.load(ctx.data_dir)
        self._data_dir = ctx.data_dir
        o = self.options
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        created, last, maybe_ours = False, "", False
        while not created and time.monotonic() < deadline:
            for host, port in self._brokers():
                try:
                    code, message = await asyncio.to_thread(
                        create_topic,
                        port,
                        o.topic,
                        o.partitions,
                        o.replication_factor,
                        self.topic_configs(),
                        host,
                    )
                except (OSError, ConnectionError) as exc:
                    last, maybe_ours = type(exc).__name__, True
                    continue
                if code == TOPIC_ALREADY_EXISTS and not maybe_ours:
                    raise QueueSetupError(
                        f"topic {o.topic!r} already exists in this cluster; "
                        "use --topic NAME or a fresh cluster"
                    )
                if code in (0, TOPIC_ALREADY_EXISTS):
                    created = True
                    break
                last = f"error {code}: {message}"
                if code != INVALID_REPLICATION_FACTOR:  # too few unfenced brokers: retry
                    raise QueueSetupError(f"topic {o.topic!r} rejected: {last}")
            if not created:
                await asyncio.sleep(SETUP_POLL_S)  # retry pacing while brokers register
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
            raise QueueSetupError(
                f"topic {o.topic!r} has no leader or full ISR after {SETUP_TIMEOUT_S:.0f} s"
            )
        self._watcher = asyncio.create_task(self._watch_leaders(ctx))
        if self.group is not None:  # --subscribe: the members join through the peer's brokers
            self.group.setup(self.peer.bootstrap)
        if ctx.progress is not None:
            ctx.progress(
                f"topic {o.topic} on Apache Kafka {self.peer.version}: {o.partitions} "
                f"partitions, RF {o.replication_factor}, {self.topic_configs()}, "
                f"acks={o.acks}, idempotence={o.idempotence}"
            )

    # ------------------------------------------------------------------------ final phase

    async def _check_replicas(self, ctx: RunContext, view: dict[str, Any] | None,
                              deadline: float) -> dict[str, Any] | None:  # fmt: skip
        """The brokers' replicas compared below their checkpointed high watermarks, read from
        their log directories (module docstring); None when the assignment is unknown."""
        if view is None:
            return None
        log_dirs = {n.id: n.log_dir for n in self.peer.brokers}
        assignment = {int(p["partition"]): [int(b) for b in p["replicas"]]
                      for p in view.get("partitions", [])}
        result = await check_kafka_topic_replicas(log_dirs, self.options.topic, assignment,
                                                  deadline)
        return {"counts": result.counts, "anomalies": result.anomalies,
                "compared_offsets": result.compared}

    async def final(self, ctx: RunContext, deadline: float) -> dict[str, Any]:
        try:
            return await super().final(ctx, deadline)
        finally:
            await self.close_kafka_clients()


class KafkaClientQueueWorkload(KafkaProtocolClients, QueueWorkload):
    """QueueWorkload on a kraftlab cluster with Kafka clients (`--client kafka`): the topic,
    its leaders and its replicas through the controllers' and brokers' admin APIs as in any
    kraftlab run, the producers and consumers aiokafka to the brokers' Kafka listeners
    (harness/kafka), as the Apache Kafka target drives Kafka's: so one client, with one retry
    and timeout behaviour, drives both systems."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bootstrap = ""
        self._kafka_clients_init()

    async def setup(self, ctx: RunContext) -> None:
        if ctx.data_dir is None:
            raise QueueSetupError("the queue workload needs the cluster's data dir")
        self.bootstrap = kafka_bootstrap(ctx.data_dir)
        if not self.bootstrap:
            raise QueueSetupError("--client kafka: no broker of this cluster has a Kafka "
                                  "listener")
        await super().setup(ctx)

    async def final(self, ctx: RunContext, deadline: float) -> dict[str, Any]:
        try:
            return await super().final(ctx, deadline)
        finally:
            await self.close_kafka_clients()
