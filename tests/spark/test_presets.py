"""`kraftlab compare --preset`: the named matrices (harness/study/presets.py) and the options
that change them."""

from __future__ import annotations

import collections

import pytest

from harness.sim.faults.shapes import SCENARIO_NEMESES as NEMESES
from harness.sim.runs.matrix import DEFAULT_SETTINGS, default_spec
from harness.study.presets import preset_spec


def test_the_default_preset_is_the_default_matrix_row_for_row() -> None:
    assert preset_spec("default").configs() == default_spec().configs()
    assert len(preset_spec("default").configs()) == 5800


def test_tiny_covers_every_arm_with_two_faults() -> None:
    configs = preset_spec("tiny").configs()
    assert len(configs) == 10 * 2 * 3
    arms = {(c.replication_mode, c.acks, c.min_insync_replicas, c.unclean_leader_election,
             c.eligible_leader_replicas, c.leader_epoch_enable) for c in configs}
    assert arms == set(DEFAULT_SETTINGS)
    assert {(c.nemesis, c.fault_duration_ms) for c in configs} == {
        ("kill-leader", 5000), ("isolate-partition-leader", 5000)}


def test_large_is_the_full_cross_product() -> None:
    configs = preset_spec("large").configs()
    assert len(configs) == 110_080 == 256 * 43 * 10
    assert len({c.key() for c in configs}) == len(configs)
    # min.insync.replicas from 1 to RF, for RF 3 and 5
    assert {(c.replication_factor, c.min_insync_replicas) for c in configs} == {
        (3, 1), (3, 2), (3, 3), (5, 1), (5, 2), (5, 3), (5, 4), (5, 5)}
    cells = collections.Counter((c.nemesis, c.fault_duration_ms) for c in configs)
    assert len(cells) == 1 + 14 * 3 and set(n for n, _ in cells) == set(NEMESES)
    assert {d for _, d in cells} == {0, 1000, 5000, 30000}
    assert {c.leader_epoch_enable for c in configs} == {True, False}
    assert {c.seed for c in configs} == set(range(1, 11))
    assert len(preset_spec("large", seeds=5).configs()) == 55_040


def test_seeds_and_faults_change_a_preset() -> None:
    configs = preset_spec("default", seeds=2, faults=("flapping", "none")).configs()
    assert len(configs) == 10 * (1 + 2) * 2
    assert {c.nemesis for c in configs} == {"flapping", "none"}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"name": "huge"}, "unknown preset 'huge'"),
    ({"name": "tiny", "seeds": 0}, "seeds must be >= 1"),
    ({"name": "tiny", "faults": ("kill-leader", "meteor")}, "unknown nemesis meteor"),
])
def test_bad_options_are_named(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        preset_spec(**kwargs)
