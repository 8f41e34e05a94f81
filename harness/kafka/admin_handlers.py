"""Kafka admin APIs of the broker's Kafka listener: CreateTopics, DeleteTopics, DescribeCluster.

CreateTopics / DeleteTopics are forwarded to the active controller as the same
CreateTopicRequest / DeleteTopicRequest the admin API proposes (quorum/controller), over the
broker's controller channel (BrokerLifecycle.call_controller), as a Kafka broker forwards them
(KIP-590). The answer arrives when the controller committed the records; the broker's own image
may learn the topic a little later, so clients meet UNKNOWN_TOPIC_OR_PARTITION or
LEADER_NOT_AVAILABLE for a moment and retry, as with Kafka.

Invariants: one controller call per topic, each answered (an unanswered call becomes
REQUEST_TIMED_OUT after request.timeout.ms); error codes are the controller's Kafka codes.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kafka.protocol.admin import (  # type: ignore[import-untyped]
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DescribeClusterResponse,
)

from harness.kafka.answer import Reply, topic_uuid
from harness.runtime.broker import BrokerNode
from quorum.controller.messages import (
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
)
from quorum.metadata.errors import Errors

BROKER_ENDPOINT_TYPE = 1
# A kraftlab guard (Kafka has none): one CreateTopics must not make the controller build
# millions of partition records from a single (possibly garbage) request.
MAX_PARTITIONS = 10_000


def _topic_uuid(topic_id: str) -> uuid.UUID:
    return topic_uuid(topic_id) if topic_id else uuid.UUID(int=0)


def create_topics(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = CreateTopicsResponse[version]
    rcls = cls.CreatableTopicResult
    assert node.broker is not None
    broker = node.broker

    async def one(topic: Any) -> Any:
        # -1: the broker's num.partitions and default.replication.factor, as Kafka's
        partitions = (node.config.num_partitions if topic.num_partitions == -1
                      else topic.num_partitions)  # fmt: skip
        rf = (node.config.default_replication_factor if topic.replication_factor == -1
              else topic.replication_factor)  # fmt: skip
        if partitions > MAX_PARTITIONS:
            return Errors.INVALID_PARTITIONS, f"at most {MAX_PARTITIONS} partitions per topic", ""
        if topic.assignments:
            return Errors.INVALID_REQUEST, "manual replica assignments are not supported", ""
        configs = tuple((c.name, c.value) for c in topic.configs)
        response = await broker.call_controller(
            CreateTopicRequest(topic.name, partitions, rf, configs,
                               validate_only=bool(request.validate_only))
        )
        if not isinstance(response, CreateTopicResponse):
            return Errors.REQUEST_TIMED_OUT, "no answer from the controller", ""
        return response.error, response.message, response.topic_id

    async def run() -> None:
        results = await asyncio.gather(*(one(t) for t in request.topics))
        topics = []
        for topic, (error, message, topic_id) in zip(request.topics, results, strict=True):
            ok = error is Errors.NONE
            rf = (node.config.default_replication_factor if topic.replication_factor == -1
                  else topic.replication_factor)  # fmt: skip
            topics.append(rcls(name=topic.name, topic_id=_topic_uuid(topic_id),
                               error_code=error.code, error_message=message or None,
                               num_partitions=(topic.num_partitions if topic.num_partitions != -1
                                               else node.config.num_partitions) if ok else -1,
                               replication_factor=rf if ok else -1, configs=[]))  # fmt: skip
        reply(cls(throttle_time_ms=0, topics=topics))

    node.loop.create_task(run())


def delete_topics(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    cls = DeleteTopicsResponse[version]
    rcls = cls.DeletableTopicResult
    assert node.broker is not None
    broker = node.broker

    async def one(name: str) -> tuple[Errors, str]:
        response = await broker.call_controller(DeleteTopicRequest(name))
        if not isinstance(response, DeleteTopicResponse):
            return Errors.REQUEST_TIMED_OUT, "no answer from the controller"
        return response.error, response.message

    async def run() -> None:
        names = list(request.topic_names)
        topic_ids = {}
        for name in names:
            topic = node.image.topic(name)
            topic_ids[name] = _topic_uuid(topic.topic_id if topic is not None else "")
        results = await asyncio.gather(*(one(n) for n in names))
        reply(cls(throttle_time_ms=0, responses=[
            rcls(name=n, topic_id=topic_ids[n], error_code=e.code, error_message=m or None)
            for n, (e, m) in zip(names, results, strict=True)]))  # fmt: skip

    node.loop.create_task(run())


def describe_cluster(node: BrokerNode, version: int, request: Any) -> Any:
    cls = DescribeClusterResponse[version]
    image = node.image
    if version >= 1 and request.endpoint_type != BROKER_ENDPOINT_TYPE:
        return cls(throttle_time_ms=0, error_code=Errors.INVALID_REQUEST.code,
                   error_message="only broker endpoints are served", cluster_id=node.cluster_id,
                   controller_id=-1, brokers=[], endpoint_type=request.endpoint_type)  # fmt: skip
    brokers = []
    for b in image.brokers():
        endpoint = b.endpoint("kafka")
        if endpoint is not None and image.is_broker_usable(b.broker_id):
            brokers.append(cls.DescribeClusterBroker(broker_id=b.broker_id, host=endpoint.host,
                                                     port=endpoint.port, rack=b.rack))  # fmt: skip
    return cls(throttle_time_ms=0, error_code=0, error_message=None, cluster_id=node.cluster_id,
               controller_id=node.node_id, brokers=brokers,
               endpoint_type=BROKER_ENDPOINT_TYPE)  # fmt: skip
