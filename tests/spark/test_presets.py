"""`kraftlab compare --preset`: the named matrices (harness/study/presets.py) and the options
that change them."""

from __future__ import annotations

import collections

import pytest

from harness.sim.faults.shapes import SCENARIO_NEMESES as NEMESES
from harness.sim.runs.matrix import MODES, default_spec
from harness.sim.runs.study_matrix import ARM_FAULTS, StudySpec, study_configs
from harness.study.presets import preset_spec

RUNNABLE = [s for s, _ in ARM_FAULTS if s[0] in MODES]


def setting(c) -> tuple:
    return (c.replication_mode, c.acks, c.min_insync_replicas, c.unclean_leader_election,
            c.eligible_leader_replicas, c.leader_epoch_enable, c.flush_policy)


def test_the_default_preset_is_the_study_row_for_row() -> None:
    assert preset_spec("default").configs() == study_configs() == StudySpec().configs()
    # Every arm, and the RF curve's ISR with min.insync.replicas=3.
    assert {setting(c) for c in preset_spec("default").configs()} == set(RUNNABLE) | {
        ("isr", "all", 3, False, False, True, "page-cache")}


def test_tiny_covers_every_arm_with_two_faults() -> None:
    configs = preset_spec("tiny").configs()
    assert len(configs) == len(RUNNABLE) * 2 * 3
    assert {setting(c) for c in configs} == set(RUNNABLE)
    assert {(c.nemesis, c.fault_duration_ms) for c in configs} == {
        ("kill-leader", 5000), ("isolate-partition-leader", 5000)}


def test_large_is_every_arm_under_every_fault_at_three_durations_and_two_rfs() -> None:
    configs = preset_spec("large", seeds=2).configs()
    assert len({c.key() for c in configs}) == len(configs)
    cells = collections.Counter((c.nemesis, c.fault_duration_ms) for c in configs)
    assert set(n for n, _ in cells) == set(NEMESES)
    assert {d for _, d in cells} >= {0, 1000, 5000, 30000}
    assert {c.replication_factor for c in configs} == {3, 5}
    arms = {setting(c) for c in configs if c.nemesis == "bridge" and c.fault_duration_ms == 1000}
    assert arms == set(RUNNABLE)


def test_the_earlier_matrices_stay_as_presets() -> None:
    assert preset_spec("matrix").configs() == default_spec().configs()
    cross = preset_spec("cross", seeds=1).configs()
    assert {(c.replication_factor, c.min_insync_replicas) for c in cross} == {
        (3, 1), (3, 2), (3, 3), (5, 1), (5, 2), (5, 3), (5, 4), (5, 5)}
    assert {c.leader_epoch_enable for c in cross} == {True, False}


def test_seeds_and_faults_change_a_preset() -> None:
    configs = preset_spec("default", seeds=2, faults=("flapping", "none")).configs()
    assert {c.nemesis for c in configs} == {"flapping", "none"}
    assert {c.seed for c in configs} == {1, 2}
    assert {setting(c) for c in configs} == set(RUNNABLE)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"name": "huge"}, "unknown preset 'huge'"),
    ({"name": "tiny", "seeds": 0}, "seeds must be >= 1"),
    ({"name": "tiny", "faults": ("kill-leader", "meteor")}, "unknown nemesis meteor"),
])
def test_bad_options_are_named(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        preset_spec(**kwargs)
