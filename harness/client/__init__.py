"""harness.client: the async Python client of kraftlab's native data protocol (msgpack frames over
TCP to the brokers' RPC listeners; harness/net/data_protocol.py).

Public API (what `kraftlab produce`/`consume`, the benchmarks and Jepsen workloads use):

    from harness.client import (Bootstrap, ClusterClient, Producer, ProducerConfig,
                                Consumer, ConsumerConfig, ClientError)

    client = ClusterClient(Bootstrap.from_cluster_file(data_dir))   # or Bootstrap(cluster_id,
                                                                    #   ((101, host, port), ...))
    producer = await Producer.create(client, ProducerConfig(acks=-1, linger_ms=5))
    future = await producer.send(topic, value, key=None, partition=None)
    await producer.flush(); meta = future.result()   # RecordMetadata(topic, partition, offset, ...)
    consumer = Consumer(client, ConsumerConfig(max_wait_ms=500))
    await consumer.assign(topic, partition, offset=0)
    records = await consumer.poll()                  # list[ConsumerRecord]
    await producer.close(); client.close()

Semantics: producer.py and consumer.py docstrings (idempotent retries, ordering, offset reset).
Failures surface as `ClientError(error=KAFKA_ERROR_NAME)` on the record's future or the call.

For histories (Jepsen's invoke/ok/fail/info): a record future that resolves is `ok` with its
offset. A failed one is `info` (unknown) unless you know better: the producer retries a batch
after a timeout or a lost connection, so an earlier attempt may have been written even if the
last answer is an error (REQUEST_TIMED_OUT after delivery.timeout.ms is the common case). Only
an error on a batch's first and only attempt (INVALID_REQUEST, CORRUPT_MESSAGE) means "not
written". Consumers see only records below the high watermark, in offset order per partition.
"""

import asyncio
from typing import Any

from harness.client.connection import Bootstrap, BrokerConnection, ClientError, ClusterClient
from harness.client.consumer import (
    Consumer,
    ConsumerConfig,
    ConsumerRecord,
    OffsetOutOfRange,
    RawBatches,
)
from harness.client.producer import Producer, ProducerConfig, RecordFuture, RecordMetadata

__all__ = [
    "Bootstrap",
    "BrokerConnection",
    "ClientError",
    "ClusterClient",
    "Consumer",
    "ConsumerConfig",
    "ConsumerRecord",
    "OffsetOutOfRange",
    "Producer",
    "ProducerConfig",
    "RawBatches",
    "RecordFuture",
    "RecordMetadata",
    "run",
]


def run(main: Any) -> Any:
    """Run a coroutine on uvloop when installed (as the nodes do), else asyncio.run."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
