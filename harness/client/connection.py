"""Connections and cluster metadata for the native data client.

`BrokerConnection`: one pipelined connection to a broker's RPC listener (harness/net/pipelined.py:
requests matched to responses by request id, writes batched per loop iteration; a lost
connection fails every outstanding call with `ConnectionResetError`, an unanswered one with
`TimeoutError`).

`ClusterClient`: the bootstrap list, one connection per broker (opened on demand), and the
partition leaders learned from MetadataCall (served by any broker from its metadata image).
`leader_for` answers from the cache; `refresh_metadata` asks the brokers again (after
NOT_LEADER_OR_FOLLOWER and the like: Kafka's metadata refresh on retriable errors).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.net.data_protocol import (
    FetchCall,
    FetchResult,
    InitProducerIdCall,
    InitProducerIdResult,
    MetadataCall,
    MetadataResult,
    PartitionMetadata,
    ProduceCall,
    ProduceResult,
)
from harness.net.pipelined import PipelinedConnection

CONNECT_TIMEOUT_S = 3.0


class ClientError(Exception):
    """A request failed with a Kafka error name (`error`), after any retries."""

    def __init__(self, error: str, message: str = "") -> None:
        self.error = error
        super().__init__(f"{error}: {message}" if message else error)


def _shared_failure(exc: BaseException, what: str) -> BaseException:
    """What the *other* waiters of a shared connect or refresh see when it failed.

    The caller that started it may be cancelled (its own timeout); handing that
    CancelledError to the others would cancel tasks nobody cancelled (a Jepsen worker died of
    it). They get a retriable ConnectionError instead; the starter still sees its own
    cancellation."""
    if isinstance(exc, asyncio.CancelledError):
        return ConnectionError(f"{what} was abandoned by the caller that started it")
    return exc


class BrokerConnection(PipelinedConnection):
    """A pipelined connection to one broker (harness/net/pipelined.py)."""

    _ids = itertools.count(1)

    def __init__(self, broker_id: int, host: str, port: int) -> None:
        super().__init__(host, port, f"broker {broker_id}")
        self.broker_id = broker_id

    async def connect(self, cluster_id: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        await super().connect(cluster_id, timeout_s)

    @classmethod
    def next_id(cls) -> int:
        return next(cls._ids)


@dataclass(frozen=True, slots=True)
class Bootstrap:
    cluster_id: str
    brokers: tuple[tuple[int, str, int], ...]  # (broker id, host, rpc port)

    @classmethod
    def from_cluster_file(cls, data_dir: Path) -> Bootstrap:
        """The brokers of a local cluster (`kraftlab cluster up`'s cluster.json)."""
        from harness.launcher.cluster import ClusterFile

        cluster = ClusterFile.load(data_dir)
        brokers = tuple((n.id, n.host, n.rpc_port) for n in cluster.brokers)
        if not brokers:
            raise ClientError("BROKER_NOT_AVAILABLE", f"the cluster in {data_dir} has no brokers")
        return cls(cluster.cluster_id, brokers)


class ClusterClient:
    """Connections to the brokers of one cluster plus the partition-leader cache."""

    def __init__(self, bootstrap: Bootstrap, request_timeout_ms: int = 30_000) -> None:
        self.cluster_id = bootstrap.cluster_id
        self.request_timeout_ms = request_timeout_ms
        self.addresses: dict[int, tuple[str, int]] = {b: (h, p) for b, h, p in bootstrap.brokers}
        self.partitions: dict[tuple[str, int], PartitionMetadata] = {}
        self.partition_counts: dict[str, int] = {}
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Future[BrokerConnection]] = {}
        self._refresh: asyncio.Future[None] | None = None

    # --- connections ----------------------------------------------------------------------------

    async def connection(self, broker_id: int) -> BrokerConnection:
        conn = self._conns.get(broker_id)
        if conn is not None and conn.is_open:
            return conn
        waiting = self._connecting.get(broker_id)
        if waiting is not None:
            return await asyncio.shield(waiting)
        address = self.addresses.get(broker_id)
        if address is None:
            raise ConnectionRefusedError(f"unknown broker {broker_id}")
        future: asyncio.Future[BrokerConnection] = asyncio.get_running_loop().create_future()
        self._connecting[broker_id] = future
        try:
            conn = BrokerConnection(broker_id, *address)
            await conn.connect(self.cluster_id)
            self._conns[broker_id] = conn
            future.set_result(conn)
            return conn
        except BaseException as exc:
            future.set_exception(_shared_failure(exc, f"connect to broker {broker_id}"))
            future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        finally:
            del self._connecting[broker_id]

    async def call(self, broker_id: int, message: Any, timeout_ms: int | None = None) -> Any:
        conn = await self.connection(broker_id)
        timeout_s = (timeout_ms or self.request_timeout_ms) / 1000
        return await conn.submit(message, timeout_s)

    async def call_any(self, make: Any, timeout_ms: int = 5_000) -> Any:
        """`make(request_id)` to the first broker that answers, in broker id order."""
        last: BaseException | None = None
        for broker_id in list(self.addresses):
            try:
                return await self.call(broker_id, make(BrokerConnection.next_id()), timeout_ms)
            except (OSError, TimeoutError) as exc:
                last = exc
        raise ClientError("BROKER_NOT_AVAILABLE", f"no broker answered ({last!r})")

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    # --- metadata -------------------------------------------------------------------------------

    async def refresh_metadata(self, topics: Iterable[str] = ()) -> None:
        """Ask a broker for brokers and leaders; concurrent callers share one request."""
        if self._refresh is not None and not self._refresh.done():
            await asyncio.shield(self._refresh)
            return
        self._refresh = asyncio.get_running_loop().create_future()
        try:
            result: MetadataResult = await self.call_any(
                lambda rid: MetadataCall(rid, tuple(topics)))  # fmt: skip
            for b in result.brokers:
                self.addresses[b.broker_id] = (b.host, b.rpc_port)
            counts: dict[str, int] = {}
            for p in result.partitions:
                self.partitions[(p.topic, p.partition)] = p
                counts[p.topic] = max(counts.get(p.topic, 0), p.partition + 1)
            self.partition_counts.update(counts)
            self._refresh.set_result(None)
        except BaseException as exc:
            self._refresh.set_exception(_shared_failure(exc, "metadata refresh"))
            self._refresh.exception()
            raise

    async def leader_for(self, topic: str, partition: int) -> int:
        """The cached leader, refreshing once if unknown; raises ClientError if none."""
        p = self.partitions.get((topic, partition))
        if p is None or p.leader_id < 0:
            await self.refresh_metadata([topic])
            p = self.partitions.get((topic, partition))
        if p is None:
            raise ClientError("UNKNOWN_TOPIC_OR_PARTITION", f"{topic}-{partition}")
        if p.leader_id < 0:
            raise ClientError("LEADER_NOT_AVAILABLE", f"{topic}-{partition} has no leader")
        return p.leader_id

    async def partition_count(self, topic: str) -> int:
        if topic not in self.partition_counts:
            await self.refresh_metadata([topic])
        count = self.partition_counts.get(topic)
        if not count:
            raise ClientError("UNKNOWN_TOPIC_OR_PARTITION", f"unknown topic {topic!r}")
        return count

    # --- typed calls ----------------------------------------------------------------------------

    async def init_producer_id(self) -> tuple[int, int]:
        result: InitProducerIdResult = await self.call_any(InitProducerIdCall)
        if result.error != "NONE":
            raise ClientError(result.error, "InitProducerId")
        return result.producer_id, result.producer_epoch

    def produce_future(self, conn: BrokerConnection, topic: str, partition: int, records: bytes,
                       acks: int, timeout_ms: int) -> asyncio.Future[ProduceResult]:  # fmt: skip
        call = ProduceCall(BrokerConnection.next_id(), topic, partition, records, acks, timeout_ms)
        return conn.submit(call, (timeout_ms + self.request_timeout_ms) / 1000)

    async def fetch(self, topic: str, partition: int, offset: int, max_bytes: int,
                    max_wait_ms: int) -> FetchResult:  # fmt: skip
        leader = await self.leader_for(topic, partition)
        call = FetchCall(BrokerConnection.next_id(), topic, partition, offset, max_bytes,
                         max_wait_ms)  # fmt: skip
        result: FetchResult = await self.call(leader, call, max_wait_ms + self.request_timeout_ms)
        return result
