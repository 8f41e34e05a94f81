"""The `quorum-state` file: the durable Raft election state (epoch, voted id, leader id).

Kafka keeps it as JSON in the metadata log directory (`FileQuorumStateStore`). It must survive a
crash at any instant (KIP-595: a vote is never granted before it is durable), so it is written
atomically: write `quorum-state.tmp`, fsync it, rename it over `quorum-state`, fsync the directory.
A torn or unreadable file is an error at startup, never silently a fresh state.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from quorum.raft.effects import ElectionState

DATA_VERSION = 0


class QuorumStateError(RuntimeError):
    """The quorum-state file exists but cannot be read (refuse to start rather than forget a vote)."""


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class QuorumStateFile:
    def __init__(self, path: Path, cluster_id: str) -> None:
        self.path = path
        self.cluster_id = cluster_id
        self.writes = 0

    def read(self) -> ElectionState:
        """The persisted state, or epoch 0 with no vote when the file does not exist."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return ElectionState(epoch=0)
        try:
            doc = json.loads(text)
            if doc.get("clusterId") != self.cluster_id:
                raise QuorumStateError(
                    f"{self.path}: cluster id {doc.get('clusterId')!r} != {self.cluster_id!r}"
                )
            leader = doc.get("leaderId", -1)
            voted = doc.get("votedId", -1)
            return ElectionState(
                epoch=int(doc["leaderEpoch"]),
                voted_id=None if voted in (-1, None) else int(voted),
                leader_id=None if leader in (-1, None) else int(leader),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise QuorumStateError(f"{self.path}: unreadable quorum state: {exc}") from exc

    def write(self, state: ElectionState) -> None:
        """Atomically replace the file with `state` and make it durable."""
        doc = {
            "clusterId": self.cluster_id,
            "leaderId": -1 if state.leader_id is None else state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": -1 if state.voted_id is None else state.voted_id,
            "data_version": DATA_VERSION,
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, json.dumps(doc).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
        self.writes += 1
