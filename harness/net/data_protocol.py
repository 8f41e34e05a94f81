"""The native data protocol between clients and brokers: frozen dataclasses registered with
quorum.codec under `client.*` tags (tags are wire format: never rename or reuse one).

Framing and handshake are those of harness/net/transport.py (4-byte length + msgpack; the first frame
is `{"kraftlab": 1, "cluster_id", "client": true}`), the same as the key/value native path
(harness/net/client.py). Requests are pipelined on one connection; every request carries a
`request_id` that its response echoes, so responses may come back in any order.

Payloads are RecordBatch v2 bytes (partition/log/batch.py) both ways: a producer sends one batch
per partition request (idempotent batches carry producer id, epoch and base sequence in the
batch header, KIP-98), a consumer receives whole batches below the high watermark. The broker
never decodes records on these paths.

Errors are Kafka error names (`"NONE"`, `"NOT_LEADER_OR_FOLLOWER"`, ...); `leader_id` and
`leader_epoch` are the hint that comes with NOT_LEADER_OR_FOLLOWER (KIP-951).
"""

from __future__ import annotations

from dataclasses import dataclass

from quorum import codec

ACKS_VALUES = (0, 1, -1)  # -1 is acks=all (Kafka's wire value)


@codec.register("client.ProduceCall")
@dataclass(frozen=True, slots=True)
class ProduceCall:
    request_id: int
    topic: str
    partition: int
    records: bytes  # RecordBatch v2 (one batch if idempotent)
    acks: int = -1
    timeout_ms: int = 30_000


@codec.register("client.ProduceResult")
@dataclass(frozen=True, slots=True)
class ProduceResult:
    request_id: int
    error: str
    base_offset: int = -1
    last_offset: int = -1
    leader_epoch: int = -1
    leader_id: int = -1
    log_start_offset: int = -1
    message: str = ""


@codec.register("client.FetchCall")
@dataclass(frozen=True, slots=True)
class FetchCall:
    request_id: int
    topic: str
    partition: int
    offset: int
    max_bytes: int = 1 << 20
    max_wait_ms: int = 500


@codec.register("client.FetchResult")
@dataclass(frozen=True, slots=True)
class FetchResult:
    request_id: int
    error: str
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    leader_id: int = -1
    leader_epoch: int = -1


@codec.register("client.MetadataCall")
@dataclass(frozen=True, slots=True)
class MetadataCall:
    request_id: int
    topics: tuple[str, ...] = ()  # empty: every topic


@codec.register("client.BrokerAddress")
@dataclass(frozen=True, slots=True)
class BrokerAddress:
    broker_id: int
    host: str
    rpc_port: int
    fenced: bool = False


@codec.register("client.PartitionMetadata")
@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader_id: int  # -1: no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@codec.register("client.MetadataResult")
@dataclass(frozen=True, slots=True)
class MetadataResult:
    request_id: int
    error: str
    brokers: tuple[BrokerAddress, ...] = ()
    partitions: tuple[PartitionMetadata, ...] = ()
    unknown_topics: tuple[str, ...] = ()


@codec.register("client.InitProducerIdCall")
@dataclass(frozen=True, slots=True)
class InitProducerIdCall:
    request_id: int


@codec.register("client.InitProducerIdResult")
@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    request_id: int
    error: str
    producer_id: int = -1
    producer_epoch: int = -1


DataCall = ProduceCall | FetchCall | MetadataCall | InitProducerIdCall
DataResult = ProduceResult | FetchResult | MetadataResult | InitProducerIdResult

# Kafka's retriable errors for produce/fetch: retry after a metadata refresh.
RETRIABLE = frozenset({
    "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "REQUEST_TIMED_OUT", "UNKNOWN_TOPIC_OR_PARTITION",
    "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "NOT_CONTROLLER", "BROKER_NOT_AVAILABLE",
    "NETWORK_EXCEPTION",
})  # fmt: skip
