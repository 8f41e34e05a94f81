"""A broker answering the native data protocol (harness/net/data_protocol.py) from its replica
manager: produce, consumer fetch, metadata from the local image, producer ids.

Answers go through callbacks and `conn.reply` (batched per loop iteration by the transport):
no task per produce or fetch. A controller, or a broker not yet registered, answers every data
call with an error naming what is wrong (NOT_LEADER_OR_FOLLOWER / BROKER_NOT_AVAILABLE).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, assert_never

from harness.net.data_protocol import (
    ACKS_VALUES,
    BrokerAddress,
    DataCall,
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
from harness.runtime.broker import BrokerNode
from partition.replica import FetchResponse, ProduceResponse
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import Partition

MAX_FETCH_BYTES = 16 << 20
MAX_WAIT_MS = 30_000


def produce_result(request_id: int, r: ProduceResponse) -> ProduceResult:
    return ProduceResult(request_id, r.error.name, r.base_offset, r.last_offset, r.leader_epoch,
                         r.leader_id, r.log_start_offset, r.message)  # fmt: skip


def fetch_result(request_id: int, r: FetchResponse) -> FetchResult:
    return FetchResult(request_id, r.error.name, r.high_watermark, r.log_start_offset,
                       r.records, r.leader_id, r.leader_epoch)  # fmt: skip


def answer_data_call(node: BrokerNode, conn: Any, call: DataCall) -> None:
    broker = node.broker
    match call:
        case MetadataCall():
            leader_for = None if broker is None else broker.replicas.leader_for
            conn.reply(metadata_result(node.image, call, leader_for))
            return
        case _:
            pass
    if broker is None:
        conn.reply(_error(call, "NOT_LEADER_OR_FOLLOWER"))
        return
    replicas = broker.replicas
    match call:
        case ProduceCall(request_id=rid):
            if call.acks not in ACKS_VALUES or not 0 <= call.timeout_ms <= 2**31 - 1:
                conn.reply(ProduceResult(rid, "INVALID_REQUEST", message="acks or timeout_ms"))
                return
            replicas.produce(call.topic, call.partition, call.records, call.acks, call.timeout_ms,
                             lambda r: conn.reply(produce_result(rid, r)))  # fmt: skip
        case FetchCall(request_id=rid):
            if call.offset < 0 or not 0 < call.max_bytes <= MAX_FETCH_BYTES or not (
                0 <= call.max_wait_ms <= MAX_WAIT_MS
            ):
                conn.reply(FetchResult(rid, "INVALID_REQUEST"))
                return
            replicas.fetch(call.topic, call.partition, call.offset, call.max_bytes,
                           call.max_wait_ms, lambda r: conn.reply(fetch_result(rid, r)))  # fmt: skip
        case InitProducerIdCall(request_id=rid):
            task = node.loop.create_task(replicas.allocate_producer_id())

            def done(t: asyncio.Task[Any]) -> None:
                error, pid = t.result()
                conn.reply(InitProducerIdResult(rid, error.name, pid, 0 if pid >= 0 else -1))

            task.add_done_callback(done)
        case MetadataCall():
            pass
        case _:
            assert_never(call)


def _error(call: DataCall, error: str) -> Any:
    match call:
        case ProduceCall():
            return ProduceResult(call.request_id, error)
        case FetchCall():
            return FetchResult(call.request_id, error)
        case InitProducerIdCall():
            return InitProducerIdResult(call.request_id, error)
        case MetadataCall():
            return MetadataResult(call.request_id, error)
        case _:
            assert_never(call)


def metadata_result(image: MetadataImage, call: MetadataCall,
                    leader_for: Callable[[Partition], tuple[int, int]] | None = None,
                    ) -> MetadataResult:  # fmt: skip
    """Brokers and partition leaders as this node's image has them (may be a little stale:
    a client that meets NOT_LEADER_OR_FOLLOWER refreshes and retries); `leader_for` (a
    broker's) may name a newer leader of a raft partition it hosts (raft_leadership.py)."""
    brokers = []
    for b in image.brokers():
        rpc = b.endpoint("rpc")
        if rpc is not None:
            brokers.append(BrokerAddress(b.broker_id, rpc.host, rpc.port, b.fenced))
    names = call.topics or tuple(t.name for t in image.topics())
    partitions = []
    unknown = []
    for name in names:
        topic = image.topic(name)
        if topic is None:
            unknown.append(name)
            continue
        for p in image.partitions(topic.topic_id):
            leader, epoch = (p.leader, p.leader_epoch) if leader_for is None else leader_for(p)
            partitions.append(PartitionMetadata(name, p.partition, leader, epoch, p.replicas,
                                                p.isr))  # fmt: skip
    return MetadataResult(call.request_id, "NONE", tuple(brokers), tuple(partitions),
                          tuple(unknown))  # fmt: skip
