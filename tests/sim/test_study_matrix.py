"""The study's matrix (harness/sim/runs/study_matrix.py): which arms, faults and curves it runs,
that every run key is unique, and that arms of modes the simulator does not run are left out."""

from __future__ import annotations

import collections

from harness.sim.faults.shapes import SCENARIO_NEMESES
from harness.sim.runs import study_matrix as sm
from harness.sim.runs.matrix import MODES


def test_the_default_study_runs_each_arm_under_its_faults_with_the_probe():
    configs = sm.study_configs()
    assert len({c.key() for c in configs}) == len(configs)
    arms = [c for c in configs if c.fault_duration_ms in (0, 5000) and c.replication_factor == 3
            and c.timing == configs[0].timing]
    cells = collections.defaultdict(set)
    for c in arms:
        setting = (c.replication_mode, c.acks, c.min_insync_replicas, c.unclean_leader_election,
                   c.eligible_leader_replicas, c.leader_epoch_enable, c.flush_policy)
        cells[setting].add((c.nemesis, c.seed))
    for setting, faults in sm.ARM_FAULTS:
        if setting[0] not in MODES:
            continue
        assert cells[setting] == {(n, s) for n in faults for s in range(1, sm.STUDY_SEEDS + 1)}
    # The equal-safety arms see every fault of the one table.
    for setting in sm.EQUAL_SAFETY_SETTINGS:
        if setting[0] in MODES:
            assert {n for n, _ in cells[setting]} == set(SCENARIO_NEMESES)
    assert {(c.producer, c.probe_interval_ms, c.metadata) for c in configs} == {
        ("kafka", sm.PROBE_MS, "raft")}
    assert all(c.start_jitter_ms == 500 for c in configs)


def test_modes_the_simulator_does_not_run_are_left_out():
    modes = {c.replication_mode for c in sm.study_configs(seeds=1, curve_seeds=1)}
    assert modes == set(MODES) & {s[0] for s in sm.STUDY_SETTINGS}
    if "raft" not in MODES:
        assert "raft" not in modes and any(s[0] == "raft" for s in sm.STUDY_SETTINGS)


def test_the_curves_move_one_setting_over_the_equal_safety_arms():
    configs = sm.study_configs(seeds=1, curve_seeds=1)
    lags = {c.timing.replica_lag_time_max_ms for c in configs}
    sessions = {c.timing.session_timeout_ms for c in configs}
    durations = {c.fault_duration_ms for c in configs if c.nemesis == "kill-leader"}
    assert lags == {1000, 2000, 4000, 8000} and sessions == {500, 1000, 2000, 4000}
    assert durations == {500, 1000, 2000, 5000, 10_000, 30_000}
    rf5 = {(c.replication_mode, c.min_insync_replicas) for c in configs
           if c.replication_factor == 5}
    assert ("isr", 2) in rf5 and ("isr", 3) in rf5
    swept = [c for c in configs if c.timing != configs[0].timing or c.replication_factor == 5]
    assert {(c.replication_mode, c.flush_policy) for c in swept} <= {
        ("isr", "page-cache"), ("quorum", "fsync-before-ack"), ("raft", "fsync-before-ack")}


def test_the_large_preset_holds_the_default_study():
    small = {c.key() for c in sm.study_configs(seeds=2, curve_seeds=2)}
    large = {c.key() for c in sm.large_study_configs(seeds=2)}
    assert small <= large
    assert {c.replication_factor for c in sm.large_study_configs(seeds=1)} == {3, 5}


def test_the_election_timeout_curve_runs_raft_only_and_replays():
    from dataclasses import replace

    import pytest

    from harness.sim.runs.cluster import raft_settings_for
    from harness.sim.runs.replay import config_from_replay, replay_command
    from harness.sim.runs.scenario_run import ScenarioConfig, build_cluster

    configs = sm.study_configs(seeds=1, curve_seeds=2)
    swept = [c for c in configs if c.raft_election_timeout_ms is not None]
    assert {c.replication_mode for c in swept} == {"raft"}
    assert {(c.raft_election_timeout_ms, c.nemesis, c.seed) for c in swept} == {
        (ms, n, s) for ms in sm.RAFT_ELECTION_MS for n in ("kill-leader", "flapping",
                                                           "pause-leader") for s in (1, 2)}
    c = swept[0]
    assert config_from_replay(replay_command(c)) == c and f"-et{c.raft_election_timeout_ms}" \
        in c.key()
    # The setting replaces the drawn timeout and the timeouts scaled from it; the other
    # draws of the seed stay.
    drawn, set_ = raft_settings_for(3).config.raft, raft_settings_for(3, 1000).config.raft
    assert (set_.election_timeout_ms, set_.request_timeout_ms) == (1000, 1000)
    assert set_.fetch_timeout_ms // 1000 == drawn.fetch_timeout_ms // drawn.election_timeout_ms
    assert set_.fetch_max_wait_ms == drawn.fetch_max_wait_ms
    settings = build_cluster(replace(c, seed=3, raft_election_timeout_ms=1000)).raft
    assert settings is not None and settings.config.raft.election_timeout_ms == 1000
    with pytest.raises(ValueError, match="replication.mode=raft runs only"):
        build_cluster(ScenarioConfig(replication_mode="isr", raft_election_timeout_ms=100))
