"""A KRaft-style Raft core (KIP-595, KIP-996 pre-vote, check-quorum, KIP-630 snapshots), sans-IO.

Public surface (see docs/quorum.md): `RaftCore` and its results (`Accepted`, `NotLeader`,
`QuorumStatus`), `RaftConfig`, the messages in `quorum.raft.messages`, the effects in
`quorum.raft.effects`, the log protocol in `quorum.raft.log`, and the exceptions.
"""

from quorum.raft.config import RaftConfig
from quorum.raft.core import (
    Accepted,
    NotLeader,
    ProposeResult,
    QuorumStatus,
    RaftCore,
    ReplicaStatus,
)
from quorum.raft.errors import InvariantViolation, RaftUsageError

__all__ = [
    "Accepted",
    "InvariantViolation",
    "NotLeader",
    "ProposeResult",
    "QuorumStatus",
    "RaftConfig",
    "RaftCore",
    "RaftUsageError",
    "ReplicaStatus",
]
