"""Replica configuration: Kafka's broker/topic config names and defaults (ReplicaManager,
Partition, LogConfig), plus kraftlab's `replication.mode` and `leader.epoch.enable` switches.

Invariants (checked at construction): positive intervals; `replica.fetch.wait.max.ms` <=
`replica.lag.time.max.ms` (Kafka refuses the opposite: a long poll would look like lag);
`replication.mode` is "isr" or "quorum" (a `raft` partition is partition.raft's, not a ReplicaCore).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from quorum.metadata.configs import (
    LEADER_EPOCH_ENABLE,
    MAX_MESSAGE_BYTES,
    MIN_INSYNC_REPLICAS,
    REPLICATION_MODE,
    REPLICATION_MODE_ISR,
    REPLICATION_MODE_QUORUM,
    TOPIC_CONFIG_DEFAULTS,
)

# The modes a ReplicaCore runs (replication.mode=raft partitions run partition.raft).
REPLICA_CORE_MODES = (REPLICATION_MODE_ISR, REPLICATION_MODE_QUORUM)


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    replica_lag_time_max_ms: int = 30_000  # replica.lag.time.max.ms (KIP-537: 10 s before 2.5)
    min_insync_replicas: int = 1  # min.insync.replicas (topic)
    replication_mode: str = "isr"  # replication.mode (kraftlab): "isr" (Kafka) or "quorum"
    leader_epoch_enable: bool = True  # leader.epoch.enable (kraftlab): False = pre-KIP-101
    # max.message.bytes (topic; broker default message.max.bytes): a larger produced batch is
    # answered MESSAGE_TOO_LARGE and not written (Kafka's RecordTooLargeException).
    max_message_bytes: int = 1024 * 1024 + 12
    replica_fetch_wait_max_ms: int = 500  # replica.fetch.wait.max.ms (long poll)
    replica_fetch_max_bytes: int = 1 << 20  # replica.fetch.max.bytes
    replica_fetch_backoff_ms: int = 1_000  # replica.fetch.backoff.ms (after a fetch error)
    replica_socket_timeout_ms: int = 30_000  # replica.socket.timeout.ms (fetch given up, resent)
    alter_partition_timeout_ms: int = 30_000  # request.timeout.ms of the AlterPartition channel
    alter_partition_backoff_ms: int = 100  # retry backoff after a retriable AlterPartition error
    # replication.mode=quorum (kraftlab): while fenced (no leader), the replica re-sends its
    # position report this often (the first goes at once; a new controller needs them again).
    position_report_interval_ms: int = 500

    def __post_init__(self) -> None:
        if self.replica_lag_time_max_ms <= 0:
            raise ValueError("replica.lag.time.max.ms must be > 0")
        if self.min_insync_replicas < 1:
            raise ValueError("min.insync.replicas must be >= 1")
        if self.replication_mode not in REPLICA_CORE_MODES:
            raise ValueError(f"replication.mode must be one of {REPLICA_CORE_MODES}")
        if not 0 <= self.replica_fetch_wait_max_ms <= self.replica_lag_time_max_ms:
            raise ValueError("replica.fetch.wait.max.ms must be in [0, replica.lag.time.max.ms]")
        for name in ("replica_fetch_max_bytes", "replica_fetch_backoff_ms",
                     "replica_socket_timeout_ms", "alter_partition_timeout_ms",
                     "position_report_interval_ms"):  # fmt: skip
            if getattr(self, name) <= 0:
                raise ValueError(f"{name.replace('_', '.')} must be > 0")

    @property
    def is_quorum_mode(self) -> bool:
        return self.replication_mode == "quorum"

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str], **broker: int | bool) -> ReplicaConfig:
        """A topic's effective configs (quorum.metadata.configs.effective_topic_configs) plus
        broker-level settings given as keyword arguments."""
        return cls(
            min_insync_replicas=int(configs.get(MIN_INSYNC_REPLICAS, "1")),
            replication_mode=configs.get(REPLICATION_MODE, "isr"),
            leader_epoch_enable=configs.get(LEADER_EPOCH_ENABLE, "true") == "true",
            max_message_bytes=int(configs.get(MAX_MESSAGE_BYTES,
                                              TOPIC_CONFIG_DEFAULTS[MAX_MESSAGE_BYTES])),
            **broker,
        )
