"""Auto topic creation, as a Kafka broker does it (KafkaApis.getTopicMetadata and
AutoTopicCreationManager): a Metadata request that allows it (`allow_auto_topic_creation`, and
always before Metadata v4) naming a topic that does not exist, on a broker with
`auto.create.topics.enable` (default true), makes the broker ask the active controller for the
topic with `num.partitions` partitions of `default.replication.factor` replicas (Kafka's
defaults, 1 and 1) and the cluster's default configs (so its replication mode is the default
one). The Metadata answer does not wait: the topic stays UNKNOWN_TOPIC_OR_PARTITION (retriable)
until the controller has committed it and this broker's image shows it, and then its partitions
are LEADER_NOT_AVAILABLE until they are led, so the client asks again. (Apache Kafka 4.4 answers
a topic it is creating this way: the differential test's "auto-create" scenario.)

- A name Kafka could never create is INVALID_TOPIC_EXCEPTION at once; an internal topic
  (`__consumer_offsets`) is never created here: its coordinator creates it with its own
  settings (harness/runtime/group_host.py).
- One creation per topic is in flight per broker (AutoTopicCreationManager's inflightTopics):
  a client polling Metadata does not send the controller one CreateTopic per poll. A failed
  creation (too few brokers for the replication factor, say) is logged and forgotten, and the
  next Metadata asks again, as Kafka's does.
- Produce and Fetch never create a topic; only Metadata does.
"""

from __future__ import annotations

import structlog

from harness.runtime.broker import BrokerNode
from quorum.controller.messages import CreateTopicRequest, CreateTopicResponse
from quorum.controller.topics import valid_topic_name
from quorum.metadata.configs import INTERNAL_TOPICS
from quorum.metadata.errors import Errors

_log = structlog.get_logger("kafka")


def allowed(node: BrokerNode, version: int, request: object) -> bool:
    """Whether this Metadata request may create the unknown topics it names."""
    return bool(node.config.auto_create_topics_enable and node.broker is not None and (
        version < 4 or getattr(request, "allow_auto_topic_creation", False)))


def create(node: BrokerNode, name: str) -> Errors:
    """The topic's error in this Metadata answer; starts its creation if none is in flight."""
    if not valid_topic_name(name):
        return Errors.INVALID_TOPIC_EXCEPTION
    if name in INTERNAL_TOPICS:
        return Errors.UNKNOWN_TOPIC_OR_PARTITION
    broker = node.broker
    assert broker is not None
    if name not in broker.topics_being_created:
        broker.topics_being_created[name] = node.loop.create_task(_create(node, name))
    return Errors.UNKNOWN_TOPIC_OR_PARTITION


async def _create(node: BrokerNode, name: str) -> None:
    broker = node.broker
    assert broker is not None
    config = node.config
    try:
        response = await broker.call_controller(CreateTopicRequest(
            name, config.num_partitions, config.default_replication_factor))
        if isinstance(response, CreateTopicResponse) and response.error in (
                Errors.NONE, Errors.TOPIC_ALREADY_EXISTS):
            _log.info("kafka.topic_auto_created", topic=name,
                      partitions=config.num_partitions,
                      replication_factor=config.default_replication_factor,
                      error=response.error.name)
        else:
            _log.warning("kafka.topic_auto_create_failed", topic=name,
                         error=getattr(response, "error", Errors.REQUEST_TIMED_OUT).name,
                         message=getattr(response, "message", "no answer from the controller"))
    finally:
        broker.topics_being_created.pop(name, None)
