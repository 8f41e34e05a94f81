"""partition.raft: `replication.mode=raft`, a data partition whose replicas are the voters of one
Raft group running quorum.raft's RaftCore over the partition's own log (sans-IO).

- `replica`: RaftReplica, the core (produce with acks, idempotence, consumer reads below the Raft
  HW, Kafka's error codes), composed with RaftCore through its public API;
- `log`: RaftLogStore, a PartitionLog as a Raft log (the metadata log and raft data partitions,
  one adapter with options), the core's read view, quorum-state;
- `election_states`: every partition's election state of one broker in one file (grouped votes);
- `entries`: how Kafka batches map to Raft entries (one entry per batch, spanning its offsets);
- `idempotence`: the KIP-98 check of produce requests appended together in one call;
- `effects`: the effect list, its executor over the shared Raft executor, grouped-flush stages;
- `mux`: RaftMux and TickGrid, one message per broker pair per round for all partitions;
- `status`: the describe view (leader, epoch, voters with roles and lag);
- `config`: RaftPartitionConfig, data-partition Raft defaults.

docs/replication.md ("replication.mode=raft") states the guarantees and costs.
"""

from partition.raft.config import (
    REPLICATION_MODE_RAFT,
    RaftPartitionConfig,
    data_partition_raft_config,
)
from partition.raft.effects import (
    Effect,
    PartitionEffect,
    PartitionEffectEnv,
    Stage,
    execute_partition_effects,
    flush_stages,
)
from partition.raft.election_states import ELECTION_STATES_FILE, ElectionStates
from partition.raft.log import QUORUM_STATE_FILE, RaftLogStore, RaftPartitionView
from partition.raft.mux import PartitionKey, RaftEnvelope, RaftItem, RaftMux, TickGrid, unbundle
from partition.raft.replica import (
    AnswerLongPolls,
    PeerUnreachable,
    ProducesReceived,
    RaftMessageReceived,
    RaftPartitionInput,
    RaftReplica,
    ResignRequested,
)
from partition.raft.status import (
    MIN_INSYNC_REPLICAS_NOTE,
    RaftPartitionStatus,
    VoterStatus,
    in_sync_voters,
    metadata_leader,
)

__all__ = [
    "ELECTION_STATES_FILE",
    "MIN_INSYNC_REPLICAS_NOTE",
    "QUORUM_STATE_FILE",
    "REPLICATION_MODE_RAFT",
    "AnswerLongPolls",
    "Effect",
    "ElectionStates",
    "PartitionEffect",
    "PartitionEffectEnv",
    "PartitionKey",
    "PeerUnreachable",
    "ProducesReceived",
    "RaftEnvelope",
    "RaftItem",
    "RaftMessageReceived",
    "RaftMux",
    "RaftPartitionConfig",
    "RaftPartitionInput",
    "RaftLogStore",
    "RaftPartitionStatus",
    "RaftPartitionView",
    "RaftReplica",
    "ResignRequested",
    "Stage",
    "TickGrid",
    "VoterStatus",
    "data_partition_raft_config",
    "execute_partition_effects",
    "flush_stages",
    "in_sync_voters",
    "metadata_leader",
    "unbundle",
]
