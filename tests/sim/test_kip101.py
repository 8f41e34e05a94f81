"""KIP-101's scenarios 1 and 2 (KAFKA-1211) as deterministic simulation
runs (harness/sim/runs/kip101.py): reproduced with leader.epoch.enable=false, prevented with
the default."""

from __future__ import annotations

import pytest

from harness.sim.runs.kip101 import silent_divergence, truncation_to_hw_loss
from harness.sim.runs.runner import quiet_logging


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards


def test_truncation_to_hw_loses_an_acknowledged_write_without_leader_epochs() -> None:
    outcome = truncation_to_hw_loss(leader_epoch_enable=False)
    assert outcome.lost() == ["1"]
    assert all(entries == [(0, "0")] for entries in outcome.logs.values())


def test_leader_epochs_keep_the_acknowledged_write() -> None:
    outcome = truncation_to_hw_loss(leader_epoch_enable=True)
    assert outcome.lost() == []
    assert all(entries == [(0, "0"), (1, "1")] for entries in outcome.logs.values())


def test_silent_divergence_without_leader_epochs() -> None:
    outcome = silent_divergence(leader_epoch_enable=False)
    assert outcome.diverged()
    values = sorted(dict(entries)[1] for entries in outcome.logs.values())
    assert values == ["1", "2"]  # offset 1 is m1 on A and m2 on B
    # Without leader epochs the committed prefix is not protected: the replica checks count
    # the rewrite (checks/replicas.py Counters.divergence_after_loss), not an invariant.
    assert outcome.violations.get("divergence-below-hw-after-loss", 0) >= 1
    assert "divergence-below-hw" not in outcome.violations


def test_leader_epochs_truncate_the_returning_replica() -> None:
    outcome = silent_divergence(leader_epoch_enable=True)
    assert not outcome.diverged()
    assert all(entries == [(0, "0"), (1, "2")] for entries in outcome.logs.values())
