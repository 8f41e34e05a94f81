"""Kafka API handlers of the broker's Kafka listener (harness/kafka/server.py): ApiVersions,
Metadata, Produce, Fetch, ListOffsets, InitProducerId (the admin APIs CreateTopics, DeleteTopics
and DescribeCluster are in admin_handlers.py; DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs in config_handlers.py; FindCoordinator and the group APIs in
group_handlers.py; OffsetForLeaderEpoch, DescribeQuorum, ElectLeaders, DescribeLogDirs and
DescribeProducers in ops_handlers.py).

Every data request goes through the broker's ReplicaManager (harness/runtime/replica_manager.py),
the same path as the native protocol and the admin API: there is no second produce or fetch
implementation. Produce hands the client's RecordBatch v2 bytes to the partition's ReplicaCore,
which validates them (CRC, magic, producer sequence) and patches only base offset and partition
leader epoch; Fetch returns the log's bytes untouched, below the high watermark only.

Invariants:
- Only the versions in SUPPORTED are advertised (ApiVersions) or accepted (server.py closes the
  connection on any other).
- Error codes are Kafka's (quorum.metadata.errors.Errors values are Kafka's numbers); a
  NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH answer carries the leader hint where the version
  has the field (KIP-951: Produce v10+, Fetch v12+ CurrentLeader).
- A request answers exactly once (answer.py `Reply`), whatever mix of partition callbacks
  complete it.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

import structlog
from kafka.protocol.admin import (  # type: ignore[import-untyped]
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.consumer import (  # type: ignore[import-untyped]
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafka.protocol.metadata import (  # type: ignore[import-untyped]
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (  # type: ignore[import-untyped]
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

from harness.kafka import (
    admin_handlers,
    auto_create,
    config_handlers,
    group_handlers,
    ops_handlers,
    produce_codec,
)
from harness.kafka.answer import Reply, topic_uuid
from harness.runtime.broker import BrokerNode
from partition.log import batch as rb
from partition.replica import FetchResponse as CoreFetch
from partition.replica import ProduceResponse as CoreProduce
from quorum.metadata.configs import INTERNAL_TOPICS
from quorum.metadata.errors import Errors
from quorum.metadata.records import NO_LEADER

log = structlog.get_logger()

UNSUPPORTED_VERSION = 35
MAX_PARTITION_FETCH_BYTES = 16 << 20  # as data_requests.MAX_FETCH_BYTES
MAX_WAIT_MS = 30_000
LEADER_HINT_ERRORS = (Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH)
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3  # KIP-734
SCAN_BYTES = 1 << 20

# api key -> (request class, response class, min version, max version). The ranges are what
# both kafka-python 3.0 and librdkafka 2.x negotiate against, and stop below versions whose
# semantics we do not implement (Fetch v13+ / Produce v13 address topics by id, Produce v11+ is
# KIP-890 transactions, ListOffsets v8+
# adds max-timestamp and tiered-storage lookups, InitProducerId v5+ is for KIP-890 transactions).
SUPPORTED: dict[int, tuple[Any, Any, int, int]] = {
    ProduceRequest.API_KEY: (ProduceRequest, ProduceResponse, 3, 10),
    FetchRequest.API_KEY: (FetchRequest, FetchResponse, 4, 12),
    ListOffsetsRequest.API_KEY: (ListOffsetsRequest, ListOffsetsResponse, 1, 7),
    # v0 too: older aiokafka and kafka-python 2.x open with it (Kafka 4.0 kept v0-3, KIP-896).
    MetadataRequest.API_KEY: (MetadataRequest, MetadataResponse, 0, 12),
    ApiVersionsRequest.API_KEY: (ApiVersionsRequest, ApiVersionsResponse, 0, 3),
    InitProducerIdRequest.API_KEY: (InitProducerIdRequest, InitProducerIdResponse, 0, 4),
    # admin_handlers.py. DeleteTopics v6 names topics by id; DescribeCluster v2 adds fenced brokers.
    CreateTopicsRequest.API_KEY: (CreateTopicsRequest, CreateTopicsResponse, 2, 7),
    DeleteTopicsRequest.API_KEY: (DeleteTopicsRequest, DeleteTopicsResponse, 1, 5),
    DescribeClusterRequest.API_KEY: (DescribeClusterRequest, DescribeClusterResponse, 0, 1),
    # config_handlers.py: topic configs (kafka-configs.sh; KIP-339 incremental alter).
    DescribeConfigsRequest.API_KEY: (DescribeConfigsRequest, DescribeConfigsResponse, 0, 4),
    AlterConfigsRequest.API_KEY: (AlterConfigsRequest, AlterConfigsResponse, 0, 2),
    IncrementalAlterConfigsRequest.API_KEY: (IncrementalAlterConfigsRequest,
                                             IncrementalAlterConfigsResponse, 0, 1),
    # group_handlers.py: FindCoordinator and the classic group protocol (docs/groups.md).
    **group_handlers.SUPPORTED,
    # ops_handlers.py: OffsetForLeaderEpoch, DescribeQuorum, ElectLeaders, DescribeLogDirs,
    # DescribeProducers (Kafka's own tools).
    **ops_handlers.SUPPORTED,
}


def no_response(api_key: int, request: Any) -> bool:
    return bool(api_key == ProduceRequest.API_KEY and request.acks == 0)


def handle(node: BrokerNode, api_key: int, version: int, request: Any, reply: Reply) -> None:
    if api_key == ApiVersionsRequest.API_KEY:
        reply(api_versions_body(version, 0))
    elif api_key == MetadataRequest.API_KEY:
        reply(metadata_body(node, version, request))
    elif api_key == ProduceRequest.API_KEY:
        produce(node, version, request, reply)
    elif api_key == FetchRequest.API_KEY:
        fetch(node, version, request, reply)
    elif api_key == ListOffsetsRequest.API_KEY:
        reply(list_offsets_body(node, version, request))
    elif api_key == InitProducerIdRequest.API_KEY:
        init_producer_id(node, version, request, reply)
    elif api_key == CreateTopicsRequest.API_KEY:
        admin_handlers.create_topics(node, version, request, reply)
    elif api_key == DeleteTopicsRequest.API_KEY:
        admin_handlers.delete_topics(node, version, request, reply)
    elif api_key == DescribeClusterRequest.API_KEY:
        reply(admin_handlers.describe_cluster(node, version, request))
    elif api_key == DescribeConfigsRequest.API_KEY:
        reply(config_handlers.describe_configs(node, version, request))
    elif api_key == AlterConfigsRequest.API_KEY:
        config_handlers.alter_configs(node, version, request, reply)
    elif api_key == IncrementalAlterConfigsRequest.API_KEY:
        config_handlers.incremental_alter_configs(node, version, request, reply)
    elif api_key in group_handlers.HANDLERS:
        group_handlers.HANDLERS[api_key](node, version, request, reply)
    elif api_key in ops_handlers.HANDLERS:
        ops_handlers.HANDLERS[api_key](node, version, request, reply)
    else:  # server.py only routes keys in SUPPORTED
        raise AssertionError(f"api key {api_key} not routed")


# --- ApiVersions ------------------------------------------------------------------------------


def api_versions_body(version: int, error_code: int) -> Any:
    cls = ApiVersionsResponse[version]
    keys = [cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (_, _, lo, hi) in sorted(SUPPORTED.items())]  # fmt: skip
    return cls(error_code=error_code, api_keys=keys, throttle_time_ms=0)


# --- Metadata -----------------------------------------------------------------------------------


def metadata_body(node: BrokerNode, version: int, request: Any) -> Any:
    """Brokers (unfenced, with a Kafka listener) and topics from this broker's image. An
    unknown topic is UNKNOWN_TOPIC_OR_PARTITION, and when the request and the broker allow it,
    its creation is started (auto_create.py). A raft partition
    hosted here names the leader its Raft replica knows when that is newer than the image
    (harness/runtime/raft_leadership.py: clients find it with every controller down)."""
    cls = MetadataResponse[version]
    image = node.image
    leader_for = None if node.broker is None else node.broker.replicas.leader_for
    brokers = []
    for b in image.brokers():
        endpoint = b.endpoint("kafka")
        if endpoint is not None and image.is_broker_usable(b.broker_id):
            brokers.append(cls.MetadataResponseBroker(node_id=b.broker_id, host=endpoint.host,
                                                      port=endpoint.port, rack=b.rack))  # fmt: skip
    if request.topics is None or (version == 0 and not request.topics):
        names = [t.name for t in image.topics()]  # v0: an empty list means every topic
    else:
        names = [t.name for t in request.topics if t.name is not None]
    topics = []
    tcls = cls.MetadataResponseTopic
    may_create = auto_create.allowed(node, version, request)
    for name in names:
        topic = image.topic(name)
        if topic is None:
            missing = (auto_create.create(node, name) if may_create
                       else Errors.UNKNOWN_TOPIC_OR_PARTITION)
            topics.append(tcls(error_code=missing.code, name=name,
                               topic_id=uuid.UUID(int=0), is_internal=False, partitions=[]))  # fmt: skip
            continue
        parts = []
        for p in image.partitions(topic.topic_id):
            leader, epoch = (p.leader, p.leader_epoch) if leader_for is None else leader_for(p)
            leader = -1 if leader == NO_LEADER else leader
            offline = [r for r in p.replicas if not image.is_broker_usable(r)]
            error = Errors.LEADER_NOT_AVAILABLE if leader < 0 else Errors.NONE
            parts.append(tcls.MetadataResponsePartition(
                error_code=error.code, partition_index=p.partition, leader_id=leader,
                leader_epoch=epoch, replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr), offline_replicas=offline))  # fmt: skip
        topics.append(tcls(error_code=0, name=name, topic_id=topic_uuid(topic.topic_id),
                           is_internal=name in INTERNAL_TOPICS, partitions=parts))  # fmt: skip
    # KRaft brokers hand clients a random live broker as "controller"; we name ourselves.
    return cls(throttle_time_ms=0, brokers=brokers, cluster_id=node.cluster_id,
               controller_id=node.node_id, topics=topics)  # fmt: skip


# --- Produce ------------------------------------------------------------------------------------


def produce(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    """Every partition through ReplicaManager.produce; answer when the last one completes
    (acks=all: when the HW passes it, or the core's timeout / ISR errors). `request` is
    produce_codec's ProduceData or kafka-python's decoded request (same attribute names); the
    answer is encoded by produce_codec."""
    assert node.broker is not None
    replicas = node.broker.replicas
    acks, timeout_ms = request.acks, request.timeout_ms
    slots: list[tuple[str, list[Any]]] = []
    pending = [0]

    hinted: set[int] = set()  # leaders named in KIP-951 hints: their endpoints go along

    def finish() -> None:
        endpoints = None
        if version >= 10 and hinted:
            endpoints = node_endpoints(node, produce_codec.NodeEndpoint, hinted)
        reply(produce_codec.ProduceAnswer(version, slots, endpoints))

    def answer(parts: list[Any], i: int, index: int, r: CoreProduce) -> None:
        leader = None
        if version >= 10 and r.error in LEADER_HINT_ERRORS and r.leader_id >= 0:
            # KIP-951: the new leader, so the client need not wait for a Metadata refresh.
            leader = (r.leader_id, r.leader_epoch)
            hinted.add(r.leader_id)
        parts[i] = produce_codec.PartitionAnswer(
            index, r.error.code, r.base_offset if r.error is Errors.NONE else -1,
            r.log_start_offset, r.message or None, leader)  # fmt: skip
        pending[0] -= 1
        if pending[0] == 0:
            finish()

    # ReplicaManager.appendRecords: acks outside -1, 0, 1 is INVALID_REQUIRED_ACKS per partition
    bad = (Errors.INVALID_REQUIRED_ACKS if acks not in (-1, 0, 1) else
           Errors.INVALID_REQUEST if request.transactional_id is not None else None)
    calls = []
    for topic in request.topic_data:
        parts: list[Any] = [None] * len(topic.partition_data)
        slots.append((topic.name, parts))
        for i, pd in enumerate(topic.partition_data):
            pending[0] += 1
            calls.append((topic.name, parts, i, pd.index, pd.records))
    if not calls:
        finish()
        return
    for name, parts, i, index, records in calls:
        if bad is not None or not records:
            error = bad if bad is not None else Errors.CORRUPT_MESSAGE
            answer(parts, i, index, CoreProduce(0, error, message="transactions unsupported"
                                                if request.transactional_id else ""))  # fmt: skip
            continue
        replicas.produce(
            name,
            index,
            records if type(records) is bytes else bytes(records),
            acks,
            max(0, timeout_ms),
            functools.partial(answer, parts, i, index),
        )


def node_endpoints(node: BrokerNode, endpoint_cls: Any, broker_ids: set[int]) -> list[Any]:
    """KIP-951 NodeEndpoints: the Kafka listener of every broker a leader hint names."""
    out = []
    for broker_id in sorted(broker_ids):
        b = node.image.broker(broker_id)
        endpoint = None if b is None else b.endpoint("kafka")
        if b is not None and endpoint is not None:
            out.append(endpoint_cls(node_id=broker_id, host=endpoint.host, port=endpoint.port,
                                    rack=b.rack))  # fmt: skip
    return out


# --- Fetch --------------------------------------------------------------------------------------


def fetch(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    """Consumer fetch below the HW. First every partition without waiting; if that returns no
    bytes and the client allows a wait, again with a long poll, answering as soon as one
    partition has data or an error (Kafka's DelayedFetch on min_bytes = 1), or all time out."""
    assert node.broker is not None
    replicas = node.broker.replicas
    wanted = []
    for topic in request.topics:
        for p in topic.partitions:
            max_bytes = min(max(p.partition_max_bytes, 1), MAX_PARTITION_FETCH_BYTES)
            epoch = p.current_leader_epoch if version >= 9 else -1
            wanted.append((topic.topic, p.partition, p.fetch_offset, max_bytes, epoch))
    results: dict[tuple[str, int], CoreFetch] = {}
    max_wait_ms = min(max(request.max_wait_ms, 0), MAX_WAIT_MS)

    def send() -> None:
        reply(fetch_body(version, wanted, results))

    def round_(wait_ms: int) -> None:
        remaining = [len(wanted)]

        def got(key: tuple[str, int], r: CoreFetch) -> None:
            if reply.done:
                return
            results[key] = r
            remaining[0] -= 1
            has_data = bool(r.records) or r.error is not Errors.NONE
            if wait_ms == 0:
                if remaining[0] == 0:
                    total = sum(len(x.records) for x in results.values())
                    errors = any(x.error is not Errors.NONE for x in results.values())
                    if total or errors or max_wait_ms == 0 or request.min_bytes <= 0:
                        send()
                    else:
                        round_(max_wait_ms)
            elif has_data or remaining[0] == 0:
                send()

        for topic, partition, offset, max_bytes, epoch in wanted:
            # KIP-392: from v11 a consumer's fetch carries client metadata (rack_id), and any
            # replica may serve it (Kafka's FetchParams.fetchOnlyLeader is false then)
            replicas.fetch(topic, partition, offset, max_bytes, wait_ms,
                           functools.partial(got, (topic, partition)),
                           current_leader_epoch=epoch, follower_read=version >= 11)  # fmt: skip

    if not wanted:
        send()
        return
    round_(0)


def fetch_body(version: int, wanted: list[tuple[str, int, int, int, int]],
               results: dict[tuple[str, int], CoreFetch]) -> Any:  # fmt: skip
    cls = FetchResponse[version]
    tcls = cls.FetchableTopicResponse
    pcls = tcls.PartitionData
    by_topic: dict[str, list[Any]] = {}
    for topic, partition, offset, _, _ in wanted:
        r = results.get((topic, partition))
        if r is None:  # not answered before another partition completed the request
            r = CoreFetch("", partition, Errors.NONE, offset)
        # An errored partition carries no offsets (ReplicaManager.readFromLog's error result:
        # high watermark, last stable and log start offset all -1), whatever this replica has.
        ok = r.error is Errors.NONE
        hw = r.high_watermark if ok else -1
        pd = pcls(partition_index=partition, error_code=r.error.code, high_watermark=hw,
                  last_stable_offset=hw, log_start_offset=r.log_start_offset if ok else -1,
                  aborted_transactions=None, preferred_read_replica=-1,
                  records=bytes(r.records))  # fmt: skip
        if version >= 12 and r.error is not Errors.NONE:
            pd.current_leader = pcls.LeaderIdAndEpoch(
                leader_id=r.leader_id, leader_epoch=r.leader_epoch
            )
        by_topic.setdefault(topic, []).append(pd)
    return cls(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[tcls(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


# --- ListOffsets --------------------------------------------------------------------------------


def list_offsets_body(node: BrokerNode, version: int, request: Any) -> Any:
    """Earliest (-2: the log start offset), latest (-1: the HW, which is also the last stable
    offset: there are no transactions), max timestamp (-3, v7+) and by timestamp (>= 0)."""
    cls = ListOffsetsResponse[version]
    tcls = cls.ListOffsetsTopicResponse
    pcls = tcls.ListOffsetsPartitionResponse
    assert node.broker is not None
    replicas = node.broker.replicas
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            error, offset, found_ms, epoch = _list_offset(
                replicas,
                topic.name,
                p.partition_index,
                p.timestamp,
                p.current_leader_epoch if version >= 4 else -1,
            )
            parts.append(pcls(partition_index=p.partition_index, error_code=error.code,
                              timestamp=found_ms, offset=offset, leader_epoch=epoch))  # fmt: skip
        topics.append(tcls(name=topic.name, partitions=parts))
    return cls(throttle_time_ms=0, topics=topics)


def _list_offset(replicas: Any, topic: str, partition: int, timestamp: int,
                 current_leader_epoch: int) -> tuple[Errors, int, int, int]:  # fmt: skip
    error, view = replicas.offsets_view(topic, partition)  # any replication mode
    if view is None:
        return error, -1, -1, -1
    if not view.is_leader:
        return Errors.NOT_LEADER_OR_FOLLOWER, -1, -1, -1
    if current_leader_epoch >= 0 and current_leader_epoch != view.leader_epoch:
        error = (Errors.FENCED_LEADER_EPOCH if current_leader_epoch < view.leader_epoch
                 else Errors.UNKNOWN_LEADER_EPOCH)  # fmt: skip
        return error, -1, -1, -1
    if timestamp == EARLIEST_TIMESTAMP:
        return Errors.NONE, view.log_start_offset, -1, view.leader_epoch
    if timestamp == LATEST_TIMESTAMP:
        return Errors.NONE, view.high_watermark, -1, view.leader_epoch
    if timestamp == MAX_TIMESTAMP or timestamp >= 0:
        offset, found_ms = offset_for_timestamp(view.log, view.log_start_offset,
                                                view.high_watermark, timestamp)  # fmt: skip
        return Errors.NONE, offset, found_ms, view.leader_epoch if offset >= 0 else -1
    return Errors.INVALID_REQUEST, -1, -1, -1


def offset_for_timestamp(log: Any, start: int, high_watermark: int,
                         timestamp: int) -> tuple[int, int]:  # fmt: skip
    """(offset, timestamp) of the first record below the HW whose timestamp >= `timestamp`, or
    (MAX_TIMESTAMP) of the first record with the largest timestamp; (-1, -1) if none. Control
    batches are skipped. A scan of the batch headers from the log start (only the batch found is
    decoded): O(log size), unlike Kafka's time index lookup (the log exposes none yet)."""
    best: Any = None
    offset = start
    while offset < high_watermark:
        buf = log.read(offset, SCAN_BYTES, max_offset=high_watermark)
        if not buf:
            break
        for h in rb.iter_headers(buf, check_crc=False):
            offset = h.base_offset + h.last_offset_delta + 1
            if h.attributes & rb.CONTROL_BIT:
                continue
            if timestamp == MAX_TIMESTAMP:
                if best is None or h.max_timestamp_ms > best[1].max_timestamp_ms:
                    best = (buf, h)
            elif h.max_timestamp_ms >= timestamp:
                best = (buf, h)
                break
        if best is not None and timestamp != MAX_TIMESTAMP:
            break
    if best is None:
        return -1, -1
    buf, h = best
    target = h.max_timestamp_ms if timestamp == MAX_TIMESTAMP else timestamp
    for record in rb.decode_records(buf, h):
        if record.timestamp_ms >= target:
            return record.offset, record.timestamp_ms
    return -1, -1


# --- InitProducerId -----------------------------------------------------------------------------


def init_producer_id(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    """A fresh producer id (epoch 0) from the broker's block (KIP-730), for idempotence.
    Transactional ids are not supported (no transaction coordinator)."""
    cls = InitProducerIdResponse[version]
    if request.transactional_id is not None:
        reply(cls(throttle_time_ms=0, error_code=Errors.INVALID_REQUEST.code, producer_id=-1,
                  producer_epoch=-1))  # fmt: skip
        return
    assert node.broker is not None
    task = node.loop.create_task(node.broker.replicas.allocate_producer_id())

    def done(t: Any) -> None:
        if t.cancelled() or t.exception() is not None:
            reply(cls(throttle_time_ms=0, error_code=Errors.REQUEST_TIMED_OUT.code,
                      producer_id=-1, producer_epoch=-1))  # fmt: skip
            return
        error, pid = t.result()
        reply(cls(throttle_time_ms=0, error_code=error.code, producer_id=pid,
                  producer_epoch=0 if pid >= 0 else -1))  # fmt: skip

    task.add_done_callback(done)
