"""Checkpoint files in Kafka's text format, always replaced atomically.

Per log directory (Kafka's OffsetCheckpointFile): `recovery-point-offset-checkpoint`,
`replication-offset-checkpoint` (high watermarks), `log-start-offset-checkpoint`:

    0                       <- version
    2                       <- number of entries
    orders 0 1042           <- topic partition offset
    orders 1 977

Per partition directory (LeaderEpochCheckpointFile): `leader-epoch-checkpoint`:

    0
    2
    3 0                     <- epoch start_offset
    5 812

Atomic replacement (Kafka's Utils.atomicMoveWithFallback after an fsync): write `<name>.tmp`,
fsync it, rename over `<name>`, fsync the directory. A crash at any step leaves either the old
file or the new one whole under `<name>`, never a mix; a stale `.tmp` is ignored and overwritten.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping

from partition.log.errors import CheckpointError
from partition.log.storage import Storage, StorageError, read_whole

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# kraftlab, replication.mode=quorum: the highest fenced leader epoch this replica reported its
# position at (one line "<epoch>" after the version/count lines). A replica never follows a
# leader of an earlier epoch again, also after a restart (partition/replica/quorum_mode.py).
FENCED_EPOCH_CHECKPOINT = "quorum-fenced-epoch-checkpoint"
CHECKPOINT_VERSION = 0
# Per partition directory (Kafka's PartitionMetadataFile, KIP-516): the id of the topic whose
# log this is, so a directory left by a deleted topic is never taken for a new topic of the same
# name (LogManager.get_or_create renames it aside). Two lines:
#     version: 0
#     topic_id: <id>
PARTITION_METADATA_FILE = "partition.metadata"
PARTITION_METADATA_VERSION = 0


def write_atomically(storage: Storage, path: str, data: bytes) -> None:
    """Replace `path` with `data`: tmp, fsync, rename, fsync dir. Either old or new survives."""
    tmp = path + ".tmp"
    handle = storage.open(tmp)
    try:
        handle.truncate(0)  # a .tmp left by an earlier crash
        handle.append(data)
        handle.fsync()
    finally:
        handle.close()
    storage.rename(tmp, path)
    storage.fsync_dir(posixpath.dirname(path))


def _format(rows: Iterable[str]) -> bytes:
    lines = list(rows)
    return ("\n".join([str(CHECKPOINT_VERSION), str(len(lines)), *lines]) + "\n").encode()


def _parse(storage: Storage, path: str, fields: int) -> list[list[str]]:
    """Lines of a checkpoint file split into `fields` fields; [] when the file is absent."""
    if not storage.exists(path):
        return []
    try:
        text = read_whole(storage, path).decode("ascii")
    except (StorageError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: unreadable ({exc})") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or lines[0] != str(CHECKPOINT_VERSION):
        raise CheckpointError(f"{path}: bad version line {lines[:1]!r}")
    try:
        count = int(lines[1])
    except ValueError as exc:
        raise CheckpointError(f"{path}: bad count line {lines[1]!r}") from exc
    rows = [line.split(" ") for line in lines[2:]]
    if count != len(rows) or any(len(r) != fields for r in rows):
        raise CheckpointError(f"{path}: expected {count} lines of {fields} fields")
    return rows


def write_offsets(storage: Storage, path: str, offsets: Mapping[tuple[str, int], int]) -> None:
    """Write a per-log-dir offset checkpoint: {(topic, partition): offset}."""
    rows = (f"{t} {p} {o}" for (t, p), o in sorted(offsets.items()))
    write_atomically(storage, path, _format(rows))


def read_offsets(storage: Storage, path: str) -> dict[tuple[str, int], int]:
    """Read a per-log-dir offset checkpoint; {} when absent."""
    try:
        return {(t, int(p)): int(o) for t, p, o in _parse(storage, path, 3)}
    except ValueError as exc:
        raise CheckpointError(f"{path}: non-numeric field ({exc})") from exc


def write_epochs(storage: Storage, path: str, epochs: Iterable[tuple[int, int]]) -> None:
    """Write a leader-epoch-checkpoint: (epoch, start_offset) pairs in order."""
    write_atomically(storage, path, _format(f"{e} {o}" for e, o in epochs))


def write_fenced_epoch(storage: Storage, path: str, epoch: int) -> None:
    """Write the quorum-mode fenced epoch (FENCED_EPOCH_CHECKPOINT), atomically."""
    write_atomically(storage, path, _format([str(epoch)]))


def read_fenced_epoch(storage: Storage, path: str) -> int:
    """The quorum-mode fenced epoch; -1 when the file is absent."""
    rows = _parse(storage, path, 1)
    if len(rows) != 1:
        return -1
    try:
        return int(rows[0][0])
    except ValueError as exc:
        raise CheckpointError(f"{path}: non-numeric field ({exc})") from exc


def write_partition_metadata(storage: Storage, path: str, topic_id: str) -> None:
    """Write PARTITION_METADATA_FILE, atomically (a crash leaves no file or a whole one)."""
    if not topic_id or any(c.isspace() for c in topic_id):
        raise ValueError(f"topic id {topic_id!r}: must be non-empty without whitespace")
    text = f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {topic_id}\n"
    write_atomically(storage, path, text.encode("ascii"))


def read_partition_metadata(storage: Storage, path: str) -> str | None:
    """The topic id in PARTITION_METADATA_FILE; None when the file is absent (a directory of an
    older layout). CheckpointError when it does not parse or has an unknown version."""
    if not storage.exists(path):
        return None
    try:
        lines = read_whole(storage, path).decode("ascii").split("\n")
    except (StorageError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: unreadable ({exc})") from exc
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != 2 or lines[0] != f"version: {PARTITION_METADATA_VERSION}":
        raise CheckpointError(f"{path}: expected 'version: {PARTITION_METADATA_VERSION}' and "
                              f"'topic_id: <id>', got {lines!r}")  # fmt: skip
    key, _, topic_id = lines[1].partition(": ")
    if key != "topic_id" or not topic_id or any(c.isspace() for c in topic_id):
        raise CheckpointError(f"{path}: bad topic_id line {lines[1]!r}")
    return topic_id


def read_epochs(storage: Storage, path: str) -> list[tuple[int, int]]:
    """Read a leader-epoch-checkpoint; [] when absent."""
    try:
        return [(int(e), int(o)) for e, o in _parse(storage, path, 2)]
    except ValueError as exc:
        raise CheckpointError(f"{path}: non-numeric field ({exc})") from exc
