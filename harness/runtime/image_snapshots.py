"""Snapshots of a node's metadata image (KIP-630): restoring the image from the newest snapshot,
and when and how the node takes the next one (node.py applies the records, this module decides).

Invariants:
- A snapshot is of the image at its applied offset (always <= HW), taken after
  `kraftlab.snapshot.interval.records` applied records or
  `metadata.log.max.record.bytes.between.snapshots` bytes of them, whichever comes first, or when
  records were applied once `metadata.log.max.snapshot.interval.ms` has passed since the last
  snapshot (or since the process started: KIP-876).
- A snapshot is never taken at or below the newest one the log holds.
- A snapshot file is the checksummed envelope of quorum/raft/snapshot.py (the image, and the
  voter set at its offset); at start a corrupt newest snapshot is set aside when the log still
  holds what it replaced, and otherwise the node refuses to start (partition/raft/log.py);
  what was set aside is logged here.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from harness.runtime.config import NodeConfig
from partition.raft.log import RaftLogStore
from quorum.metadata import MetadataImage
from quorum.raft.log import OffsetAndEpoch
from quorum.raft.snapshot import decode_snapshot, encode_snapshot
from quorum.raft.voters import VotersRecord

log = structlog.get_logger()


def log_dropped_snapshots(store: RaftLogStore) -> None:
    """Say which corrupt snapshots the log set aside when it opened."""
    for snapshot, why in store.dropped_snapshots:
        log.error("node.snapshot_corrupt", offset=snapshot.offset, epoch=snapshot.epoch,
                  error=why, action="set aside; state rebuilt from an older snapshot and the log")


def restore_image(store: RaftLogStore) -> MetadataImage:
    """The image of the newest snapshot the log holds (an empty image without one)."""
    snapshot = store.latest_snapshot()
    if snapshot is None:
        return MetadataImage()
    data = store.read_snapshot(snapshot, 0, store.snapshot_size(snapshot))
    image = MetadataImage.restore(decode_snapshot(data).payload)
    log.info("node.image_restored", snapshot_offset=snapshot.offset, epoch=snapshot.epoch)
    return image


class ImageSnapshots:
    """The snapshot triggers of one node and the taking of a snapshot (module docstring)."""

    def __init__(self, config: NodeConfig, now_ms: int) -> None:
        self.config = config
        self.records_since = 0
        self.bytes_since = 0
        self.last_ms = now_ms  # the time-based trigger counts from here

    def applied(self, entry_bytes: int) -> None:
        """One committed entry applied to the image."""
        self.records_since += 1
        self.bytes_since += entry_bytes

    def due(self, now_ms: Callable[[], int]) -> bool:
        config = self.config
        return (self.records_since >= config.snapshot_interval_records
                or self.bytes_since >= config.snapshot_interval_bytes
                or self._overdue(now_ms))  # fmt: skip

    def _overdue(self, now_ms: Callable[[], int]) -> bool:
        """KIP-876: records applied since the last snapshot, and metadata.log.max.snapshot.
        interval.ms passed since it (or since this process started)."""
        interval = self.config.snapshot_interval_ms
        return interval > 0 and self.records_since > 0 and now_ms() - self.last_ms >= interval

    def take(self, store: RaftLogStore, image: MetadataImage,
             voters_at: Callable[[int], VotersRecord],
             now_ms: Callable[[], int]) -> OffsetAndEpoch | None:
        """Write a snapshot of `image` at its applied offset; None if the log has one there."""
        snapshot = OffsetAndEpoch(image.applied_offset + 1, image.applied_epoch)
        latest = store.latest_snapshot()
        if latest is not None and latest.offset >= snapshot.offset:
            return None
        voters = voters_at(snapshot.offset)
        store.write_snapshot(snapshot, encode_snapshot(voters, image.snapshot()))
        self.records_since = 0
        self.bytes_since = 0
        self.last_ms = now_ms()  # after the write: the interval counts from its end
        log.info("node.snapshot_taken", offset=snapshot.offset, epoch=snapshot.epoch)
        return snapshot


__all__ = ["ImageSnapshots", "log_dropped_snapshots", "restore_image"]
