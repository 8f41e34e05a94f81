"""partition.replica: the sans-IO replica state machine of a data partition (Kafka's Partition +
ReplicaManager + ReplicaFetcher rules, KIP-101/279/320/497/841/903/966), driven like the Raft
core: `handle(input, now_ms)`, `tick(now_ms)`, `next_deadline_ms()`.

- `core`: ReplicaCore, role transitions, dispatch; `leader` and `follower`: the rules, functions
  over `local_replica.LocalReplica` (the replica's explicit state) and the role they apply to;
- `messages`: Fetch/Produce wire types and the MetadataUpdated input; `effects`: what it asks for;
- `local_log`: the read-only log view it reads (ReplicaLog) and the PartitionLog adapter that
  executes its log effects; `config`: Kafka's names and defaults; `quorum_mode`: the fencing election and
  epoch marker of replication.mode=quorum (with the argument why nothing committed is lost).

docs/replication.md states the rules, configs, error codes and guarantees.
"""

from partition.replica.config import ReplicaConfig
from partition.replica.core import (
    FollowerStatus,
    ReplicaCore,
    ReplicaInput,
    ReplicaStatus,
    metadata_update_from_image,
)
from partition.replica.effects import (
    AppendAsFollower,
    AppendAsLeader,
    CompleteProduce,
    Effect,
    IncrementLogStartOffset,
    LeadershipChanged,
    LogEffect,
    SendAlterPartition,
    SendFetch,
    SendFetchResponse,
    SendReplicaPosition,
    TruncateFully,
    TruncateTo,
    UpdateHighWatermark,
)
from partition.replica.errors import InvariantViolation, ReplicaUsageError
from partition.replica.local_log import LocalReplicaLog, ReplicaLog
from partition.replica.messages import (
    ACKS_ALL,
    ACKS_LEADER,
    ACKS_NONE,
    CONSUMER_REPLICA_ID,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    MetadataUpdated,
    ProduceRequest,
    ProduceResponse,
    ReplicaPosition,
)
from partition.replica.quorum_mode import (
    EPOCH_MARKER_KEY,
    choose_quorum_leader,
    epoch_marker_batch,
    position_report,
)

__all__ = [
    "ACKS_ALL",
    "ACKS_LEADER",
    "ACKS_NONE",
    "CONSUMER_REPLICA_ID",
    "EPOCH_MARKER_KEY",
    "AppendAsFollower",
    "AppendAsLeader",
    "CompleteProduce",
    "Effect",
    "EpochEndOffset",
    "FetchRequest",
    "FetchResponse",
    "FollowerStatus",
    "InvariantViolation",
    "LeadershipChanged",
    "LocalReplicaLog",
    "LogEffect",
    "MetadataUpdated",
    "ProduceRequest",
    "ProduceResponse",
    "ReplicaConfig",
    "ReplicaCore",
    "ReplicaInput",
    "ReplicaLog",
    "ReplicaPosition",
    "ReplicaStatus",
    "ReplicaUsageError",
    "SendAlterPartition",
    "SendFetch",
    "SendFetchResponse",
    "SendReplicaPosition",
    "IncrementLogStartOffset",
    "TruncateFully",
    "TruncateTo",
    "UpdateHighWatermark",
    "choose_quorum_leader",
    "epoch_marker_batch",
    "metadata_update_from_image",
    "position_report",
]
