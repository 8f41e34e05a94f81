"""The group coordinator's configuration: Kafka's broker config names and defaults
(GroupCoordinatorConfig.java), in milliseconds where Kafka's are.

    offsets.topic.num.partitions            50        partitions of __consumer_offsets
    offsets.topic.replication.factor        3         its replication factor (for the runtime
                                                      that creates the topic; the core ignores it)
    group.initial.rebalance.delay.ms        3000      the first rebalance of an empty group waits
                                                      this long for more members (and again, up to
                                                      the rebalance timeout, while more arrive)
    group.min.session.timeout.ms            6000      JoinGroup session timeouts outside
    group.max.session.timeout.ms            1800000   [min, max] get INVALID_SESSION_TIMEOUT
    group.max.size                          2^31-1    members per group (GROUP_MAX_SIZE_REACHED)
    group.classic.new.member.join.timeout.ms 300000   a new member that never completes its first
                                                      join is removed after this long
    offset.metadata.max.bytes               4096      longer commit metadata gets
                                                      OFFSET_METADATA_TOO_LARGE
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GroupCoordinatorConfig"]


@dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    group_initial_rebalance_delay_ms: int = 3_000
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = (1 << 31) - 1
    new_member_join_timeout_ms: int = 300_000
    offset_metadata_max_bytes: int = 4_096

    def __post_init__(self) -> None:
        if self.offsets_topic_num_partitions <= 0:
            raise ValueError("offsets.topic.num.partitions must be positive")
        if self.offsets_topic_replication_factor <= 0:
            raise ValueError("offsets.topic.replication.factor must be positive")
        if self.group_initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must not be negative")
        if not 0 < self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms:
            raise ValueError(
                "need 0 < group.min.session.timeout.ms <= group.max.session.timeout.ms"
            )
        if self.group_max_size <= 0:
            raise ValueError("group.max.size must be positive")
        if self.new_member_join_timeout_ms <= 0:
            raise ValueError("group.classic.new.member.join.timeout.ms must be positive")
        if self.offset_metadata_max_bytes < 0:
            raise ValueError("offset.metadata.max.bytes must not be negative")
