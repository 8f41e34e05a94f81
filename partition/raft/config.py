"""Configuration of a `replication.mode=raft` partition: the Raft timing of quorum.raft's RaftConfig
(named after Kafka's controller.quorum.* configs) with data-partition defaults, plus the produce
limits a partition leader enforces.

Defaults that differ from the metadata quorum's, and why:
- `max_idle_interval_ms` = 0: no idle no-op entry. The metadata log writes one every 500 ms so
  observers see time pass; a data partition has no such reader, and 1,000 idle partitions would
  each append and fsync twice a second. A new leader's first entry (the LeaderChange control
  batch) is still written, and is what lets its HW move (Raft thesis 3.6.2).
- `append_linger_ms` = 0 (required): the leader checks a produced batch's producer sequence against
  the log's producer state, which must already hold every batch accepted before (KIP-98); with
  linger, an accepted batch would sit in the core, invisible to that check, and a retry of it could
  be appended twice. Group commit still happens: the driver flushes once per event-loop round.

Invariants (checked at construction): linger is 0; max.message.bytes is positive.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from quorum.metadata.configs import MAX_MESSAGE_BYTES, REPLICATION_MODE_RAFT, TOPIC_CONFIG_DEFAULTS
from quorum.raft.config import RaftConfig

__all__ = ["REPLICATION_MODE_RAFT", "RaftPartitionConfig", "data_partition_raft_config"]


def data_partition_raft_config(**overrides: Any) -> RaftConfig:
    """RaftConfig with the data-partition defaults above; `overrides` by field name."""
    # The controller owns a data partition's replica set (dynamic_voters off: no log scan at start).
    base = RaftConfig(max_idle_interval_ms=0, append_linger_ms=0, dynamic_voters=False)
    return replace(base, **overrides)


@dataclass(frozen=True, slots=True)
class RaftPartitionConfig:
    raft: RaftConfig = field(default_factory=data_partition_raft_config)
    # max.message.bytes (topic): a larger produced batch is answered MESSAGE_TOO_LARGE.
    max_message_bytes: int = 1024 * 1024 + 12

    def __post_init__(self) -> None:
        if self.raft.append_linger_ms != 0:
            raise ValueError("append_linger_ms must be 0 for raft partitions (idempotence check)")
        if self.max_message_bytes <= 0:
            raise ValueError("max.message.bytes must be > 0")

    @classmethod
    def from_topic_configs(
        cls, configs: Mapping[str, str], raft: RaftConfig | None = None
    ) -> RaftPartitionConfig:
        """A topic's effective configs (quorum.metadata.configs.effective_topic_configs) and
        the broker's Raft settings for data partitions."""
        max_bytes = configs.get(MAX_MESSAGE_BYTES, TOPIC_CONFIG_DEFAULTS[MAX_MESSAGE_BYTES])
        return cls(raft or data_partition_raft_config(), int(max_bytes))
