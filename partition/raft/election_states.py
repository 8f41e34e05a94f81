"""The election states (epoch, vote, leader: KIP-595's quorum-state) of every raft partition of
one broker in ONE file, so that a driver makes all the votes of an event-loop round durable with
one atomic write: a multi-Raft broker's grouped persist (CockroachDB keeps every range's
HardState in one storage engine, Redpanda in its key-value store, for the same reason). An
election among 1,000 partitions is then a few writes per round, not 1,000 fsynced files: with one
file per partition the votes alone kept a loaded broker's event loop busy past the election
timeouts, and the elections never converged.

The per-partition `quorum-state` file (partition.raft.log, Kafka's FileQuorumStateStore) is the
single-group way and stays; a driver uses one or the other (the runtime's durability port,
harness/runtime/raft_partitions.py, uses this one and reads a partition's own file only if this
one has no entry for it; the simulator's uses the per-partition files).

Format (JSON, like quorum-state): {"version": 0, "partitions": {"<topic id>/<partition>":
{"leaderEpoch": E, "votedId": V, "leaderId": L}}} with -1 for "none".

Invariants: `write` replaces the file atomically (tmp, fsync, rename, fsync dir), so a crash
leaves the old states or the new ones, never a mix; `load` raises CheckpointError on a file it
cannot read (refuse to start rather than forget a vote and vote twice in one epoch).
"""

from __future__ import annotations

import json

from partition.log.checkpoint import write_atomically
from partition.log.errors import CheckpointError
from partition.log.storage import Storage, read_whole
from partition.raft.mux import PartitionKey
from quorum.raft.effects import ElectionState

__all__ = ["ELECTION_STATES_FILE", "ElectionStates"]

ELECTION_STATES_FILE = "raft-election-states"
_VERSION = 0


def _encode_key(key: PartitionKey) -> str:
    return f"{key[0]}/{key[1]}"


class ElectionStates:
    """Every raft partition's ElectionState on one broker, kept in memory, written whole."""

    def __init__(self, storage: Storage, path: str) -> None:
        self.storage = storage
        self.path = path
        self._states: dict[PartitionKey, ElectionState] = {}
        self.writes = 0

    def load(self) -> None:
        if not self.storage.exists(self.path):
            return
        try:
            doc = json.loads(read_whole(self.storage, self.path))
            if doc["version"] != _VERSION:
                raise ValueError(f"version {doc['version']}")
            states = {}
            for name, s in doc["partitions"].items():
                topic_id, _, partition = name.rpartition("/")
                voted, leader = int(s["votedId"]), int(s["leaderId"])
                states[(topic_id, int(partition))] = ElectionState(
                    int(s["leaderEpoch"]), None if voted < 0 else voted,
                    None if leader < 0 else leader)  # fmt: skip
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CheckpointError(f"{self.path}: unreadable election states ({exc})") from exc
        self._states = states

    def get(self, key: PartitionKey) -> ElectionState | None:
        return self._states.get(key)

    def put(self, key: PartitionKey, state: ElectionState) -> None:
        """Set in memory; durable at the next `write`."""
        self._states[key] = state

    def forget(self, key: PartitionKey) -> None:
        """A partition no longer hosted (its topic deleted): dropped at the next `write`."""
        self._states.pop(key, None)

    def write(self) -> None:
        doc = {"version": _VERSION, "partitions": {
            _encode_key(k): {"leaderEpoch": s.epoch,
                             "votedId": -1 if s.voted_id is None else s.voted_id,
                             "leaderId": -1 if s.leader_id is None else s.leader_id}
            for k, s in sorted(self._states.items())}}  # fmt: skip
        write_atomically(self.storage, self.path, json.dumps(doc, separators=(",", ":")).encode())
        self.writes += 1
