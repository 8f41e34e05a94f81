"""Metadata invariants, checked on a node's image every time it applied something (the metadata
run's controllers and brokers, the data-plane runs' controller voters):

- PartitionLeaderInIsr: a partition's leader is in its ISR (or -1), unless the election was
  unclean (leader_recovery_state RECOVERING, KIP-704);
- MonotonicPartitionEpochs: in one node incarnation, a partition's leader_epoch and
  partition_epoch never decrease;
- SingleLeaderPerEpoch: across all nodes and all time, one (partition, leader_epoch) names one
  leader.

Invariant of the checker itself: it only reads images; an image is checked once per (node,
incarnation, applied offset).
"""

from __future__ import annotations

from typing import Protocol

from harness.sim.checks.invariants import SafetyChecker
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import NO_LEADER, LeaderRecoveryState


class ImageHolder(Protocol):
    """A process with a metadata image: its id, its process start number, its image."""

    node_id: int
    incarnation: int
    image: MetadataImage


class PartitionImageChecker:
    """The invariants above, checked on a node's image each time it applied something; failures
    go to `checker.fail` (a SafetyViolation stops the run)."""

    def __init__(self, checker: SafetyChecker) -> None:
        self.checker = checker
        self.leader_of: dict[tuple[str, int, int], int] = {}
        self.seen: dict[tuple[int, int], dict[tuple[str, int], tuple[int, int]]] = {}
        self.checked_offset: dict[int, tuple[int, int]] = {}

    def check(self, node: ImageHolder) -> None:
        image = node.image
        key = (node.node_id, node.incarnation)
        if self.checked_offset.get(node.node_id) == (node.incarnation, image.applied_offset):
            return
        self.checked_offset[node.node_id] = (node.incarnation, image.applied_offset)
        seen = self.seen.setdefault(key, {})
        for topic, part in image.all_partitions():
            where = f"{topic.name}-{part.partition} at offset {image.applied_offset}"
            self.checker.count("cluster_partition_checks")
            if (
                part.leader != NO_LEADER
                and part.leader not in part.isr
                and part.leader_recovery_state != LeaderRecoveryState.RECOVERING
            ):
                self.checker.fail(
                    "PartitionLeaderInIsr",
                    node.node_id,
                    f"{where}: leader {part.leader} not in ISR {part.isr}",
                )
            tp = (topic.topic_id, part.partition)
            before = seen.get(tp)
            now = (part.leader_epoch, part.partition_epoch)
            if before is not None and (now[0] < before[0] or now[1] < before[1]):
                self.checker.fail(
                    "MonotonicPartitionEpochs",
                    node.node_id,
                    f"{where}: (leader_epoch, partition_epoch) {before} -> {now}",
                )
            seen[tp] = now
            epoch_key = (topic.topic_id, part.partition, part.leader_epoch)
            known = self.leader_of.setdefault(epoch_key, part.leader)
            if known != part.leader:
                self.checker.fail(
                    "SingleLeaderPerEpoch",
                    node.node_id,
                    f"{where}: leader_epoch {part.leader_epoch} led by {known} "
                    f"and by {part.leader}",
                )
