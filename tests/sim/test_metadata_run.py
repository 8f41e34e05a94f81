"""`kraftlab sim cluster --plane metadata`: controllers and brokers on the deterministic simulator.

Seeded runs must show zero violations of the metadata invariants (leader in ISR, monotonic
partition epochs, one leader per leader epoch, broker images converging); the same seed gives the
same trace; and the checks can fail: planted bugs and hand-made images are caught.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.sim.actors.raft_node import RaftNode
from harness.sim.checks.invariants import SafetyViolation
from harness.sim.runs.metadata_run import (
    MetadataPlane,
    cluster_config,
    metadata_simulation,
    run_cluster_seed,
)
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import Partition, Topic
from quorum.raft.log import Entry


def test_seeded_cluster_runs_have_no_violations() -> None:
    results = [run_cluster_seed(cluster_config(seed)) for seed in range(1, 16)]
    failed = [(r.config.seed, str(r.violation)) for r in results if not r.ok]
    assert failed == []
    # The runs did something: topics, elections, partition leader epochs, broker sessions.
    assert sum(r.stats["admin_ops"] for r in results) > 100
    assert sum(r.stats["partition_epochs_seen"] for r in results) > 50
    assert sum(r.stats["nemesis"].get("crash", 0) for r in results) > 10


def test_same_seed_same_trace() -> None:
    first, again = (run_cluster_seed(cluster_config(7)) for _ in range(2))
    assert first.digest == again.digest and first.events == again.events


class _Fake:
    def __init__(self, node_id: int, image: MetadataImage, incarnation: int = 1) -> None:
        self.node_id = node_id
        self.image = image
        self.incarnation = incarnation


def _image(leader: int, isr: tuple[int, ...], leader_epoch: int, partition_epoch: int = 0) -> Any:
    image = MetadataImage()
    image.apply_record(0, 1, Topic("t", "A" * 22, ()))
    image.apply_record(
        1, 1, Partition("A" * 22, 0, (101, 102), isr, leader, leader_epoch, partition_epoch)
    )
    return image


def _plane() -> MetadataPlane:
    plane = metadata_simulation(cluster_config(1)).plane
    assert isinstance(plane, MetadataPlane)
    return plane


def test_checks_catch_leader_outside_isr_two_leaders_per_epoch_and_epoch_regressions() -> None:
    plane = _plane()
    with pytest.raises(SafetyViolation, match="PartitionLeaderInIsr"):
        plane.check_image(_Fake(101, _image(101, (102,), 0)))
    plane = _plane()
    plane.check_image(_Fake(101, _image(101, (101, 102), 3)))
    with pytest.raises(SafetyViolation, match="SingleLeaderPerEpoch"):
        plane.check_image(_Fake(102, _image(102, (101, 102), 3)))
    plane = _plane()
    newer = _image(101, (101, 102), 4, 6)
    plane.check_image(_Fake(103, newer))
    older = _image(101, (101, 102), 4, 5)
    older.apply_control(2, 1)  # a later offset, but an older partition epoch
    with pytest.raises(SafetyViolation, match="MonotonicPartitionEpochs"):
        plane.check_image(_Fake(103, older))


class _ForgetfulImage(MetadataImage):
    """Planted bug: an image that skips one committed record (a lost metadata update)."""

    def apply_entry(self, entry: Entry) -> Any:
        if entry.offset == 12:
            self.apply_control(entry.offset, entry.epoch)
            return None
        return super().apply_entry(entry)


class _ForgetfulBroker(RaftNode):
    """Planted bug: brokers apply the log to a forgetful image."""

    def new_image(self) -> MetadataImage:
        return MetadataImage() if self.node_id in self.voter_ids else _ForgetfulImage()


def test_a_broker_image_that_diverges_is_caught() -> None:
    caught = []
    for seed in range(1, 6):
        result = metadata_simulation(cluster_config(seed), _ForgetfulBroker).run()
        if not result.ok:
            caught.append(result.violation.invariant if result.violation else "")
    assert "BrokerImageConvergence" in caught
