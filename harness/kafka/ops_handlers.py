"""Kafka APIs that Kafka's own tools and consumers ask about replication: OffsetForLeaderEpoch
(consumers validating their position after a leader change, KIP-320), DescribeQuorum
(kafka-metadata-quorum), ElectLeaders (kafka-leader-election), DescribeLogDirs (kafka-log-dirs)
and DescribeProducers (kafka-transactions describe-producers). Each answers what the CLI and the
admin API already know, from the same places: the broker's replica cores and logs, its metadata
quorum view, the active controller.

- OffsetForLeaderEpoch: on the partition's leader only, the end offset of the largest epoch <=
  the one asked (the log's epoch cache, as a follower's truncation uses); current_leader_epoch is
  checked as for Fetch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
- DescribeQuorum: `__cluster_metadata` partition 0, forwarded to the active controller as Kafka's
  brokers do (KafkaApis.handleDescribeQuorumRequest): the Raft leader alone knows every voter's
  and live observer's log end offset and fetch times (KIP-595, KIP-836 timestamps);
  REQUEST_TIMED_OUT when no controller answers.
- ElectLeaders: each partition forwarded to the active controller as the admin API's
  ElectLeadersRequest (preferred = 0, unclean = 1; a null partition list: every partition of
  every topic).
- DescribeLogDirs: this broker's one data directory, each hosted partition with its size and its
  lag behind the leader's log end offset (0 on the leader).
- DescribeProducers: the leader's idempotence table per partition (producer id, epoch, last
  sequence); no transactions, so no coordinator epoch or open transaction.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kafka.protocol.admin import (  # type: ignore[import-untyped]
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
)
from kafka.protocol.consumer import (  # type: ignore[import-untyped]
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

from harness.drive.controller_rpc import DescribeQuorumAnswer, DescribeQuorumCall
from harness.kafka.answer import Reply
from harness.runtime.broker import BrokerNode
from quorum.controller.messages import ElectLeadersRequest as CoreElect
from quorum.controller.messages import ElectLeadersResponse as CoreElected
from quorum.metadata.errors import Errors

METADATA_TOPIC = "__cluster_metadata"
ELECTION_TYPES = {0: "preferred", 1: "unclean"}

SUPPORTED: dict[int, tuple[Any, Any, int, int]] = {
    OffsetForLeaderEpochRequest.API_KEY: (OffsetForLeaderEpochRequest,
                                          OffsetForLeaderEpochResponse, 2, 4),
    DescribeQuorumRequest.API_KEY: (DescribeQuorumRequest, DescribeQuorumResponse, 0, 2),
    ElectLeadersRequest.API_KEY: (ElectLeadersRequest, ElectLeadersResponse, 0, 2),
    DescribeLogDirsRequest.API_KEY: (DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 4),
    DescribeProducersRequest.API_KEY: (DescribeProducersRequest, DescribeProducersResponse, 0, 0),
}


def _leader_replica(node: BrokerNode, topic: str, partition: int,
                    current_leader_epoch: int = -1) -> tuple[Any, Errors]:  # fmt: skip
    assert node.broker is not None
    replicas = node.broker.replicas
    r, error, _, _ = replicas.lookup(topic, partition)
    if r is None:
        return None, error
    core = r.core
    if not core.is_leader:
        return None, Errors.NOT_LEADER_OR_FOLLOWER
    if current_leader_epoch >= 0 and current_leader_epoch != core.leader_epoch:
        return None, (Errors.FENCED_LEADER_EPOCH if current_leader_epoch < core.leader_epoch
                      else Errors.UNKNOWN_LEADER_EPOCH)  # fmt: skip
    return r, Errors.NONE


def offset_for_leader_epoch(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = OffsetForLeaderEpochResponse[version]
    tcls = cls.OffsetForLeaderTopicResult
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            r, error = _leader_replica(node, t.topic, p.partition, p.current_leader_epoch)
            epoch, end = (-1, -1) if r is None else r.log.end_offset_for(p.leader_epoch)
            parts.append(tcls.EpochEndOffset(error_code=error.code, partition=p.partition,
                                             leader_epoch=epoch, end_offset=end))  # fmt: skip
        topics.append(tcls(topic=t.topic, partitions=parts))
    reply(cls(throttle_time_ms=0, topics=topics))


def describe_quorum(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = DescribeQuorumResponse[version]
    tcls = cls.TopicData
    pcls = tcls.PartitionData
    asked = [(t.topic_name, p.partition_index) for t in request.topics for p in t.partitions]
    if asked != [(METADATA_TOPIC, 0)]:
        reply(cls(error_code=Errors.INVALID_REQUEST.code, error_message="only "
                  f"{METADATA_TOPIC}-0 has a quorum", topics=[], nodes=[]))  # fmt: skip
        return
    assert node.broker is not None
    broker = node.broker
    status = node.raft_status()
    voters = sorted(status.voters)  # the voter set in force (KIP-853), not the bootstrap one
    endpoints = dict(status.voter_endpoints)

    def state(row: tuple[int, int, int, int, bool]) -> Any:
        node_id, leo, last_fetch, last_caught_up, _ = row
        return pcls.ReplicaState(replica_id=node_id, replica_directory_id=None, log_end_offset=leo,
                                 last_fetch_timestamp=last_fetch,
                                 last_caught_up_timestamp=last_caught_up)  # fmt: skip

    async def run() -> None:
        # Only the Raft leader knows every replica's log end offset and fetch times: ask it.
        answer = await broker.call_controller(DescribeQuorumCall())
        if not isinstance(answer, DescribeQuorumAnswer):
            reply(cls(error_code=Errors.REQUEST_TIMED_OUT.code, error_message="no answer from "
                      "the active controller", topics=[], nodes=[]))  # fmt: skip
            return
        part = pcls(partition_index=0, error_code=0, error_message=None,
                    leader_id=answer.leader_id, leader_epoch=answer.leader_epoch,
                    high_watermark=answer.high_watermark,
                    current_voters=[state(r) for r in answer.replicas if r[4]],
                    observers=[state(r) for r in answer.replicas if not r[4]])  # fmt: skip
        nodes = []
        if version >= 2:
            ncls = cls.Node
            for v in voters:
                host, _, port = endpoints.get(v, "").rpartition(":")
                e = node.config.voters.get(v)
                if e is not None:
                    host, port = e.host, str(e.port)
                if not (host and port.isdigit()):
                    continue  # a voter whose address this node does not know
                nodes.append(ncls(node_id=v, listeners=[ncls.Listener(
                    name="CONTROLLER", host=host, port=int(port))]))  # fmt: skip
        reply(cls(error_code=0, error_message=None,
                  topics=[tcls(topic_name=METADATA_TOPIC, partitions=[part])], nodes=nodes))

    node.loop.create_task(run())


def elect_leaders(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = ElectLeadersResponse[version]
    rcls = cls.ReplicaElectionResult
    election = ELECTION_TYPES.get(request.election_type if version >= 1 else 0)
    assert node.broker is not None
    broker = node.broker
    if request.topic_partitions is None:
        wanted = [(t.name, None) for t in node.image.topics()]
    else:
        wanted = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]

    async def one(topic: str, partition: int | None) -> list[tuple[str, int, Errors, str]]:
        if election is None:
            return [(topic, partition or 0, Errors.INVALID_REQUEST, "unknown election type")]
        out = await broker.call_controller(CoreElect(topic, partition, election))
        if not isinstance(out, CoreElected):
            return [(topic, partition or 0, Errors.REQUEST_TIMED_OUT, "no controller answer")]
        if out.error is not Errors.NONE:
            return [(topic, partition or 0, out.error, out.message)]
        return [(r.topic, r.partition, r.error, r.message) for r in out.results]

    async def run() -> None:
        results = [x for xs in await asyncio.gather(*(one(t, p) for t, p in wanted)) for x in xs]
        by_topic: dict[str, list[Any]] = {}
        for topic, partition, error, message in results:
            by_topic.setdefault(topic, []).append(rcls.PartitionResult(
                partition_id=partition, error_code=error.code, error_message=message or None))
        reply(cls(throttle_time_ms=0, error_code=0, replica_election_results=[
            rcls(topic=t, partition_result=ps) for t, ps in by_topic.items()]))  # fmt: skip

    node.loop.create_task(run())


def describe_log_dirs(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = DescribeLogDirsResponse[version]
    rcls = cls.DescribeLogDirsResult
    tcls = rcls.DescribeLogDirsTopic
    assert node.broker is not None
    replicas = node.broker.replicas
    wanted = None if request.topics is None else {
        (t.topic, p) for t in request.topics for p in t.partitions}  # fmt: skip
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), r in sorted(replicas.by_name.items()):
        if wanted is not None and (topic, partition) not in wanted:
            continue
        plog = replicas.log_manager.logs.get((topic, partition))
        size = plog.size_bytes if plog is not None else 0
        status = r.core.status()
        lag = 0 if r.core.is_leader else max(0, status.high_watermark - status.log_end_offset)
        by_topic.setdefault(topic, []).append(tcls.DescribeLogDirsPartition(
            partition_index=partition, partition_size=size, offset_lag=lag,
            is_future_key=False))  # fmt: skip
    result = rcls(error_code=0, log_dir=str(replicas.data_dir), total_bytes=-1, usable_bytes=-1,
                  topics=[tcls(name=t, partitions=ps) for t, ps in by_topic.items()])  # fmt: skip
    reply(cls(throttle_time_ms=0, error_code=0, results=[result]))


def describe_producers(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = DescribeProducersResponse[version]
    tcls = cls.TopicResponse
    pcls = tcls.PartitionResponse
    topics = []
    for t in request.topics:
        parts = []
        for index in t.partition_indexes:
            r, error = _leader_replica(node, t.name, index)
            producers = []
            if r is not None:
                for entry in r.log.log.producer_state.producers.values():
                    producers.append(pcls.ProducerState(
                        producer_id=entry.producer_id, producer_epoch=entry.producer_epoch,
                        last_sequence=entry.last_seq, last_timestamp=-1, coordinator_epoch=-1,
                        current_txn_start_offset=-1))  # fmt: skip
            parts.append(pcls(partition_index=index, error_code=error.code, error_message=None,
                              active_producers=producers))  # fmt: skip
        topics.append(tcls(name=t.name, partitions=parts))
    reply(cls(throttle_time_ms=0, topics=topics))


HANDLERS = {
    OffsetForLeaderEpochRequest.API_KEY: offset_for_leader_epoch,
    DescribeQuorumRequest.API_KEY: describe_quorum,
    ElectLeadersRequest.API_KEY: elect_leaders,
    DescribeLogDirsRequest.API_KEY: describe_log_dirs,
    DescribeProducersRequest.API_KEY: describe_producers,
}
