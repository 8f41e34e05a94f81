"""`kafka-topics.sh --describe` output from the image (TopicCommand's format), so every tool that
prints topics prints the same lines:

    Topic: t<TAB>TopicId: id<TAB>PartitionCount: N<TAB>ReplicationFactor: R<TAB>Configs: k=v,...
    <TAB>Topic: t<TAB>Partition: p<TAB>Leader: <id|none><TAB>Replicas: 1,2,3<TAB>Isr: 1,2<TAB>Elr: <ids><TAB>LastKnownElr: <ids>

Configs lists the topic's overrides only (as Kafka lists non-default topic configs).
Elr and LastKnownElr: with KIP-966's `eligible.leader.replicas.version` finalized in the log
(FeatureLevel), the lists as they are, empty ones printed empty (`Elr: `), as Kafka 4.x's
TopicCommand prints what DescribeTopicPartitions returns; without the feature, `N/A` (Kafka
prints N/A when the answer carries no ELR fields).
"""

from __future__ import annotations

from quorum.metadata.image import MetadataImage
from quorum.metadata.records import (
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    NO_LEADER,
    LeaderRecoveryState,
    Partition,
    Topic,
)


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in ids)


def describe_partition(topic: Topic, part: Partition, *, elr_enabled: bool = False) -> str:
    leader = "none" if part.leader == NO_LEADER else str(part.leader)
    fields = [
        f"Topic: {topic.name}",
        f"Partition: {part.partition}",
        f"Leader: {leader}",
        f"Replicas: {_ids(part.replicas)}",
        f"Isr: {_ids(part.isr)}",
    ]
    if part.leader_recovery_state == LeaderRecoveryState.RECOVERING:
        fields.append("LeaderRecoveryState: RECOVERING")
    if elr_enabled:
        fields.append(f"Elr: {_ids(part.elr)}")
        fields.append(f"LastKnownElr: {_ids(part.last_known_elr)}")
    else:
        fields.append(f"Elr: {_ids(part.elr) or 'N/A'}")
        fields.append(f"LastKnownElr: {_ids(part.last_known_elr) or 'N/A'}")
    return "\t" + "\t".join(fields)


def describe_topic(image: MetadataImage, name: str) -> list[str]:
    """The describe lines of topic `name` (header, then one line per partition); [] if unknown."""
    topic = image.topic(name)
    if topic is None:
        return []
    parts = image.partitions(topic.topic_id)
    rf = len(parts[0].replicas) if parts else 0
    configs = ",".join(f"{k}={v}" for k, v in sorted(image.topic_config_overrides(name).items()))
    header = (
        f"Topic: {topic.name}\tTopicId: {topic.topic_id}\tPartitionCount: {len(parts)}\t"
        f"ReplicationFactor: {rf}\tConfigs: {configs}"
    )
    elr = image.feature_level(ELIGIBLE_LEADER_REPLICAS_VERSION) >= 1
    return [header, *(describe_partition(topic, p, elr_enabled=elr) for p in parts)]


def describe_topics(image: MetadataImage) -> list[str]:
    """Every topic's describe lines, topics by name."""
    return [line for t in image.topics() for line in describe_topic(image, t.name)]
