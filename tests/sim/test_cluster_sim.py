"""`kraftlab sim cluster`: controllers and brokers on the deterministic simulator (issue 4).

Seeded runs must show zero violations of the metadata invariants (leader in ISR, monotonic
partition epochs, one leader per leader epoch, broker images converging); the same seed gives the
same trace; and the checks can fail: planted bugs and hand-made images are caught.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.sim.actors.cluster_node import ClusterSimNode
from harness.sim.checks.invariants import SafetyViolation
from harness.sim.runs.cluster_simulation import ClusterSimulation, cluster_config, run_cluster_seed
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


def test_checks_catch_leader_outside_isr_two_leaders_per_epoch_and_epoch_regressions() -> None:
    sim = ClusterSimulation(cluster_config(1))
    with pytest.raises(SafetyViolation, match="PartitionLeaderInIsr"):
        sim._check_image(_Fake(101, _image(101, (102,), 0)))  # type: ignore[arg-type]
    sim = ClusterSimulation(cluster_config(1))
    sim._check_image(_Fake(101, _image(101, (101, 102), 3)))  # type: ignore[arg-type]
    with pytest.raises(SafetyViolation, match="SingleLeaderPerEpoch"):
        sim._check_image(_Fake(102, _image(102, (101, 102), 3)))  # type: ignore[arg-type]
    sim = ClusterSimulation(cluster_config(1))
    newer = _image(101, (101, 102), 4, 6)
    sim._check_image(_Fake(103, newer))  # type: ignore[arg-type]
    older = _image(101, (101, 102), 4, 5)
    older.apply_control(2, 1)  # a later offset, but an older partition epoch
    with pytest.raises(SafetyViolation, match="MonotonicPartitionEpochs"):
        sim._check_image(_Fake(103, older))  # type: ignore[arg-type]


class _ForgetfulBroker(ClusterSimNode):
    """Planted bug: a broker whose image skips one committed record (a lost metadata update)."""

    def _apply_committed(self) -> None:
        if self.is_broker and type(self.image) is MetadataImage:
            image = self.image
            original = image.apply_entry

            def skipping(entry: Entry) -> Any:
                if entry.offset == 12:
                    image.apply_control(entry.offset, entry.epoch)
                    return None
                return original(entry)

            image.apply_entry = skipping  # type: ignore[method-assign]
            try:
                super()._apply_committed()
            finally:
                del image.apply_entry
            return
        super()._apply_committed()


def test_a_broker_image_that_diverges_is_caught() -> None:
    caught = []
    for seed in range(1, 6):
        result = ClusterSimulation(cluster_config(seed), _ForgetfulBroker).run()
        if not result.ok:
            caught.append(result.violation.invariant if result.violation else "")
    assert "BrokerImageConvergence" in caught
