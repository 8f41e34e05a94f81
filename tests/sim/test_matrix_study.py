"""The study's matrix dimensions and row columns (harness/sim/runs/matrix.py, measures.py):
flush policies per mode, the writers, timeouts swept, latency per phase, availability in time
from the open-loop probe, and a replay command that gives the same row back."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from harness.cli.sim_matrix import add_kind, build_spec
from harness.results.schema import validate_row
from harness.sim.runs import measures
from harness.sim.runs.cluster import DataTiming
from harness.sim.runs.matrix import MatrixSpec, config_from_dict, config_to_dict, run_one
from harness.sim.runs.replay import ReplayError, config_from_replay, replay_command
from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.scenario_run import ScenarioConfig
from harness.sim.runs.study_matrix import study_configs


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()


STUDY = ScenarioConfig(seed=4, replication_mode="quorum", nemesis="kill-leader",
                       fault_duration_ms=1000, start_jitter_ms=500, metadata="raft",
                       flush_policy="fsync-before-ack", producer="kafka", probe_interval_ms=10,
                       timing=DataTiming(replica_lag_time_max_ms=1500, session_timeout_ms=900))


def parse(command: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_kind(parser.add_subparsers())
    return parser.parse_args(command.removeprefix("kraftlab sim ").split())


def test_flush_policies_go_only_with_the_modes_that_can_run_them():
    spec = MatrixSpec(modes=("isr", "quorum"), acks=("all",), min_isr=(2,), unclean=(False,),
                      elr=(False,), rf=(3,), nemeses=("none",), durations_ms=(1000,), seeds=1,
                      flush_policies=("page-cache", "flush-every-message", "fsync-before-ack",
                                      "no-fsync"))
    assert [(c.replication_mode, c.flush_policy) for c in spec.configs()] == [
        ("isr", "page-cache"), ("isr", "flush-every-message"),
        ("quorum", "fsync-before-ack"), ("quorum", "no-fsync")]
    pinned = dataclasses.replace(spec, settings=(("isr", "all", 2, False, False, True,
                                                  "flush-every-message"),))
    assert [c.flush_policy for c in pinned.configs()] == ["flush-every-message"]


def test_timeouts_are_swept_as_a_product_and_survive_the_trip_to_a_worker():
    spec = MatrixSpec(modes=("isr",), acks=("all",), min_isr=(2,), unclean=(False,),
                      elr=(False,), rf=(3,), nemeses=("none",), durations_ms=(1000,), seeds=1,
                      lag_ms=(500, 2000), session_ms=(1000, 3000))
    timings = [(c.timing.replica_lag_time_max_ms, c.timing.session_timeout_ms)
               for c in spec.configs()]
    assert timings == [(500, 1000), (500, 3000), (2000, 1000), (2000, 3000)]
    assert len({c.key() for c in spec.configs()}) == 4
    assert config_from_dict(config_to_dict(STUDY)) == STUDY


def test_a_row_has_latency_per_phase_and_the_probe_s_availability_in_time():
    out = run_one(STUDY)
    row = out.row
    validate_row(row)
    assert out.invariant_violations == ()
    assert (row.flush_policy, row.producer, row.replica_lag_time_max_ms,
            row.broker_session_timeout_ms) == ("fsync-before-ack", "kafka", 1500, 900)
    # Every acknowledged producer write falls in one phase; the probe's are apart.
    assert row.acked_before + row.acked_during + row.acked_after < row.acked_writes
    for phase in ("before", "during", "after"):
        p50, p99, p999 = (getattr(row, f"latency_{q}_ms_{phase}") for q in ("p50", "p99", "p999"))
        assert 0 < p50 <= p99 <= p999
    # Two fsyncs (the leader's, then a follower's before its next fetch) at least, before.
    assert row.latency_p50_ms_before >= 2
    # The probe: one slot per 10 ms of the phase, the fault's [3000, 4000 + restart) ms.
    assert row.probe_interval_ms == 10
    assert row.probe_slots_during == (row.heal_ms - row.fault_start_ms) // 10
    assert 0 <= row.probe_ok_during < row.probe_slots_during  # the leader was killed
    # Before the fault every slot is available but those too close to it to be acknowledged
    # within PROBE_OK_MS (the leader dies at 3000 ms).
    assert row.probe_slots_before == 100  # it starts a second before the fault
    assert 100 - measures.PROBE_OK_MS // 10 <= row.probe_ok_before < 100


def test_the_replay_command_gives_the_same_row():
    row = run_one(STUDY).row
    args = parse(row.replay_command)
    (config,) = build_spec(args).configs()
    assert config == STUDY == config_from_replay(row.replay_command)
    again = run_one(config).row
    assert dataclasses.replace(again, wall_duration_ms=0) == dataclasses.replace(
        row, wall_duration_ms=0)


def test_arms_of_one_seed_share_the_fault_schedule():
    rows = [run_one(dataclasses.replace(STUDY, replication_mode=mode, flush_policy=policy)).row
            for mode, policy in (("isr", "page-cache"), ("quorum", "fsync-before-ack"))]
    isr, quorum = rows
    assert (isr.fault_start_ms, isr.fault_end_ms, isr.heal_ms) == (
        quorum.fault_start_ms, quorum.fault_end_ms, quorum.heal_ms)
    assert isr.nemesis_timeline == quorum.nemesis_timeline
    assert isr.probe_slots_during == quorum.probe_slots_during


@pytest.mark.parametrize(("invoked", "phase"), [(2999, "before"), (3000, "during"),
                                                (5999, "during"), (6000, "after")])
def test_phases_split_at_the_fault_start_and_the_heal(invoked, phase):
    assert measures.phase_of(invoked, 3000, 6000) == phase
    assert measures.phase_of(invoked, None, None) == "before"


def test_visibility_lag_is_ack_to_the_hw_passing_the_offset_during_the_fault():
    from harness.check.history import Event

    def op(i: int, t_ms: int, kind: str, process: int, offset: int | None = None) -> Event:
        value = None if offset is None else ["t-0", [offset, i]]
        return Event(i, t_ms * 1_000_000, process, kind, "send", value)  # type: ignore[arg-type]

    events = [op(0, 2900, "invoke", 1), op(1, 2910, "ok", 1, 0),   # before the fault
              op(2, 3100, "invoke", 2), op(3, 3105, "ok", 2, 1),   # HW passes 1 at 3500
              op(4, 3200, "invoke", 3), op(5, 3210, "ok", 3, 2),   # HW passes 2 at 6200
              op(6, 3300, "invoke", 4), op(7, 3300, "ok", 4, 9)]   # never passed: no lag
    marks = [(2915, 1), (3500, 2), (6200, 3)]
    assert measures.visibility_columns(events, marks, 3000, 6000) == {
        "visibility_lag_p99_ms": 2990.0, "visibility_lag_max_ms": 2990.0}
    assert measures.visibility_columns(events, marks[:2], 3000, 6000) == {
        "visibility_lag_p99_ms": 395.0, "visibility_lag_max_ms": 395.0}
    assert measures.visibility_columns(events, marks, None, None) == {
        "visibility_lag_p99_ms": None, "visibility_lag_max_ms": None}


@pytest.mark.parametrize(("acks", "frozen"), [("1", True), ("all", False)])
def test_strict_min_isr_holds_acks_1_records_invisible_until_the_isr_recovers(acks, frozen):
    """ISR, min.insync.replicas=2, the leader cut from its followers for 5 s: acks=1 records
    are acknowledged by the leader alone and stay invisible (the HW frozen, KAFKA-15583) until
    the followers are back in the ISR after the heal; acks=all ones are acknowledged only once
    the HW passed them."""
    config = dataclasses.replace(STUDY, seed=1, replication_mode="isr", acks=acks,
                                 min_insync_replicas=2, flush_policy="page-cache",
                                 nemesis="leader-cut-from-followers-only",
                                 fault_duration_ms=5000, timing=DataTiming())
    row = run_one(config).row
    assert row.lost_writes == 0
    if frozen:
        assert row.visibility_lag_p99_ms >= 1000
        assert row.visibility_lag_max_ms > row.heal_ms - row.fault_start_ms
    else:
        assert row.visibility_lag_max_ms == 0


def test_latency_leaves_out_writes_invoked_before_the_partition_had_a_leader():
    """A raft partition's group elects its first leader an election timeout after creation,
    after the workload started: writes invoked before clients could find a leader measure
    topic creation (~100-220 ms each), not the arm. An ISR partition has its leader from the
    controller at creation, before the workload: nothing is left out."""
    from harness.sim.runs.scenario_run import WORKLOAD_START_MS, run_scenario

    raft = run_scenario(dataclasses.replace(STUDY, seed=5, replication_mode="raft",
                                            nemesis="none"))
    assert raft.first_leader_ms is not None and raft.first_leader_ms > WORKLOAD_START_MS
    events = raft.history.events
    every = measures.latency_columns(events, None, None)
    ready = measures.latency_columns(events, None, None, raft.first_leader_ms)
    assert every["latency_p99_ms_before"] >= 100 and every["latency_p999_ms_before"] >= 200
    assert ready["latency_p99_ms_before"] < 60
    assert 0 < every["acked_before"] - ready["acked_before"] < 10
    assert run_one(dataclasses.replace(STUDY, seed=5, replication_mode="raft",
                                       nemesis="none")).row.latency_p99_ms_before \
        == ready["latency_p99_ms_before"]
    isr = run_scenario(dataclasses.replace(STUDY, seed=5, replication_mode="isr",
                                           flush_policy="page-cache", nemesis="none"))
    assert isr.first_leader_ms is not None and isr.first_leader_ms < WORKLOAD_START_MS
    assert measures.latency_columns(isr.history.events, None, None, isr.first_leader_ms) \
        == measures.latency_columns(isr.history.events, None, None)


def test_nearest_rank_percentiles():
    values = list(range(1, 1001))
    assert [measures.nearest_rank(values, q) for _, q in measures.QUANTILES] == [
        500.0, 990.0, 999.0]
    assert measures.nearest_rank([7], 0.999) == 7.0


def test_every_study_run_reads_back_from_its_replay_command():
    for config in study_configs(seeds=1, curve_seeds=1):
        assert config_from_replay(replay_command(config)) == config
    with pytest.raises(ReplayError, match="unknown option --colour"):
        config_from_replay("kraftlab sim matrix --colour red")
    with pytest.raises(ReplayError, match="not a"):
        config_from_replay("rm -rf replay")
