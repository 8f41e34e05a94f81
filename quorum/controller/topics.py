"""Topic creation and deletion (CreateTopics/DeleteTopics on the active controller).

Validation order and error names are Kafka's: INVALID_TOPIC_EXCEPTION (name), TOPIC_ALREADY_EXISTS,
INVALID_PARTITIONS (1..MAX_PARTITIONS_PER_TOPIC), INVALID_REPLICATION_FACTOR (at most
MAX_REPLICATION_FACTOR, counted against unfenced brokers), INVALID_CONFIG
(quorum.metadata.configs decides). A new partition has ISR = replicas and its first replica as
leader, both epochs 0 (a raft partition: no leader yet, its replicas elect one). Topic ids are derived, not drawn (a core uses no randomness).
"""

from __future__ import annotations

import base64
import hashlib
import re

import structlog

from quorum.controller.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
)
from quorum.controller.placement import assign_replicas
from quorum.controller.result import ControllerResult, PendingRecords
from quorum.metadata.configs import (
    INTERNAL_TOPICS,
    MIN_INSYNC_REPLICAS,
    REPLICATION_MODE,
    REPLICATION_MODE_RAFT,
    TOPIC_CONFIG_DEFAULTS,
    canonical_topic_config,
    topic_configs_problem,
    validate_topic_config,
)
from quorum.metadata.errors import Errors
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import (
    NO_LEADER,
    Config,
    Partition,
    PartitionChange,
    RemoveTopic,
    Topic,
)

_log = structlog.get_logger("controller")

# Kafka's Topic.validate: legal characters, at most 249 of them.
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
# kraftlab guards (Kafka has none): one CreateTopic is one batch of records built at once, so a
# (possibly garbage) request must not make the controller build millions of them; the admin API
# and the Kafka listener refuse the same bounds before asking (harness/admin/topics.py).
MAX_PARTITIONS_PER_TOPIC = 10_000
MAX_REPLICATION_FACTOR = 1_000


def valid_topic_name(name: str) -> bool:
    """Kafka's Topic.validate: 1-249 of [a-zA-Z0-9._-], and not "." or ".."."""
    return bool(_TOPIC_NAME.match(name)) and name not in (".", "..")


def create_topic(req: CreateTopicRequest, image: MetadataImage) -> ControllerResult:
    def fail(error: Errors, message: str) -> ControllerResult:
        return ControllerResult(response=CreateTopicResponse(error, message))

    if not valid_topic_name(req.name):
        return fail(Errors.INVALID_TOPIC_EXCEPTION, f"invalid topic name {req.name!r}")
    if image.topic(req.name) is not None:
        return fail(Errors.TOPIC_ALREADY_EXISTS, f"topic {req.name!r} already exists")
    if req.partitions < 1:
        return fail(Errors.INVALID_PARTITIONS, "number of partitions must be at least 1")
    if req.partitions > MAX_PARTITIONS_PER_TOPIC:
        return fail(Errors.INVALID_PARTITIONS,
                    f"at most {MAX_PARTITIONS_PER_TOPIC} partitions per topic")  # fmt: skip
    if req.replication_factor > MAX_REPLICATION_FACTOR:
        return fail(Errors.INVALID_REPLICATION_FACTOR,
                    f"replication factor {req.replication_factor} exceeds "
                    f"{MAX_REPLICATION_FACTOR}")  # fmt: skip
    usable = [b for b in image.brokers() if image.is_broker_usable(b.broker_id)]
    if req.replication_factor < 1 or req.replication_factor > len(usable):
        return fail(
            Errors.INVALID_REPLICATION_FACTOR,
            f"replication factor {req.replication_factor} cannot be reached: "
            f"{len(usable)} unfenced broker(s)",
        )
    configs = dict(req.configs)
    if len(configs) != len(req.configs):
        return fail(Errors.INVALID_CONFIG, "duplicate config names")
    for name, value in sorted(configs.items()):
        problem = validate_topic_config(name, value, internal=req.name in INTERNAL_TOPICS)
        if problem is not None:
            return fail(Errors.INVALID_CONFIG, problem)
    configs = {name: canonical_topic_config(name, value) for name, value in configs.items()}
    problem = topic_configs_problem(configs)
    if problem is not None:
        return fail(Errors.INVALID_CONFIG, problem)
    topic_id = _topic_id(image, req.name)
    assignment = assign_replicas(
        [b.broker_id for b in usable],
        {b.broker_id: b.rack for b in usable},
        req.partitions,
        req.replication_factor,
        start_index=len(image.topics()),
    )
    if req.validate_only:  # ReplicationControlManager.createTopics: the records are not written
        return ControllerResult(response=CreateTopicResponse(Errors.NONE))
    _log.info(
        "controller.creating_topic",
        topic=req.name,
        topic_id=topic_id,
        partitions=req.partitions,
        replication_factor=req.replication_factor,
    )
    batch = PendingRecords(image)
    batch.add(Topic(req.name, topic_id, tuple(sorted(configs.items()))))
    # A raft partition starts without a leader: its replicas elect one (raft_leaders.py).
    raft = configs.get(REPLICATION_MODE) == REPLICATION_MODE_RAFT
    for p, replicas in enumerate(assignment):
        batch.add(Partition(topic_id, p, replicas, replicas, NO_LEADER if raft else replicas[0]))
    return batch.result(CreateTopicResponse(Errors.NONE, topic_id=topic_id))


def delete_topic(req: DeleteTopicRequest, image: MetadataImage) -> ControllerResult:
    topic = image.topic(req.name)
    if topic is None:
        return ControllerResult(
            response=DeleteTopicResponse(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {req.name!r}"
            )
        )
    return ControllerResult((RemoveTopic(topic.topic_id),), DeleteTopicResponse(Errors.NONE))


def _topic_id(image: MetadataImage, name: str) -> str:
    """A Kafka-style 22-character topic id, derived (not drawn: cores use no randomness) from the
    name and the image position, so a re-created topic gets a new id."""
    salt = 0
    while True:
        digest = hashlib.sha256(f"{name}\0{image.applied_offset}\0{salt}".encode()).digest()
        topic_id = base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")
        if image.topic_by_id(topic_id) is None:
            return topic_id
        salt += 1


def alter_topic_configs(req: AlterConfigsRequest, image: MetadataImage) -> ControllerResult:
    """Config records for a topic's overrides (value None: back to the default). Validated like
    creation: UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG (also for a change of replication.mode:
    a topic keeps its mode for life). A changed min.insync.replicas clears
    the ELRs of the topic's partitions (KIP-966: they were computed against the old value)."""
    if image.topic(req.topic) is None:
        return ControllerResult(
            response=AlterConfigsResponse(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {req.topic!r}"
            )
        )
    names = [name for name, _ in req.configs]
    if len(set(names)) != len(names):
        return ControllerResult(
            response=AlterConfigsResponse(Errors.INVALID_CONFIG, "duplicate config names")
        )
    for name, value in req.configs:
        if value is None:  # back to the default: only the name must be known
            problem = None if name in TOPIC_CONFIG_DEFAULTS else f"unknown topic config {name!r}"
        else:
            problem = validate_topic_config(name, value)
        if problem is not None:
            return ControllerResult(response=AlterConfigsResponse(Errors.INVALID_CONFIG, problem))
    pending = PendingRecords(image)
    before = image.topic_configs(req.topic)[MIN_INSYNC_REPLICAS]
    for name, value in req.configs:
        stored = None if value is None else canonical_topic_config(name, value)
        pending.add(Config("topic", req.topic, name, stored))
    if pending.view.topic_configs(req.topic)[REPLICATION_MODE] != image.topic_configs(
        req.topic
    )[REPLICATION_MODE]:
        # The replicas commit by the mode they were created with, and the elections' safety
        # rests on it (an ISR election after majority commits, or the reverse, can lose
        # acknowledged writes): a topic keeps its mode for life.
        return ControllerResult(response=AlterConfigsResponse(
            Errors.INVALID_CONFIG,
            f"{REPLICATION_MODE} cannot change on an existing topic"))  # fmt: skip
    problem = topic_configs_problem(pending.view.topic_configs(req.topic))
    if problem is not None:
        return ControllerResult(response=AlterConfigsResponse(Errors.INVALID_CONFIG, problem))
    if pending.view.topic_configs(req.topic)[MIN_INSYNC_REPLICAS] != before:
        topic = pending.view.topic(req.topic)
        assert topic is not None
        for part in pending.view.partitions(topic.topic_id):
            if part.elr or part.last_known_elr:
                pending.add(
                    PartitionChange(
                        part.topic_id,
                        part.partition,
                        elr=(),
                        last_known_elr=(),
                        expected_partition_epoch=part.partition_epoch,
                    )
                )
    return pending.result(AlterConfigsResponse(Errors.NONE))
