"""The simulated `quorum-state` file: the durable election state (epoch, voted id, leader id) kept
on a node's SimStorage, written the way harness/node writes the real one (KIP-595: durable before
a vote is granted): write `quorum-state.tmp`, fsync it, rename it over `quorum-state`, fsync the
directory. A crash between those steps leaves the old state, never a torn one, and the simulator
checks that the core never relied on a write that had not completed.
"""

from __future__ import annotations

import json

from partition.log.storage import SimStorage, read_whole
from quorum.raft.effects import ElectionState

DIRECTORY = "meta"
PATH = f"{DIRECTORY}/quorum-state"


class SimQuorumStateStore:
    """Reads and atomically writes the election state on simulated storage."""

    __slots__ = ("_storage", "writes")

    def __init__(self, storage: SimStorage) -> None:
        self._storage = storage
        self._storage.make_dirs(DIRECTORY)
        self.writes = 0

    def read(self) -> ElectionState:
        """The durable state, or epoch 0 with no vote when it was never written."""
        if not self._storage.exists(PATH):
            return ElectionState(epoch=0)
        doc = json.loads(read_whole(self._storage, PATH))
        return ElectionState(
            epoch=int(doc["leaderEpoch"]),
            voted_id=None if doc["votedId"] < 0 else int(doc["votedId"]),
            leader_id=None if doc["leaderId"] < 0 else int(doc["leaderId"]),
        )

    def write(self, state: ElectionState) -> None:
        doc = {
            "leaderEpoch": state.epoch,
            "votedId": -1 if state.voted_id is None else state.voted_id,
            "leaderId": -1 if state.leader_id is None else state.leader_id,
        }
        tmp = PATH + ".tmp"
        if self._storage.exists(tmp):
            self._storage.remove(tmp)
        handle = self._storage.open(tmp)
        handle.append(json.dumps(doc, sort_keys=True).encode())
        handle.fsync()
        handle.close()
        self._storage.rename(tmp, PATH)
        self._storage.fsync_dir(DIRECTORY)
        self.writes += 1
