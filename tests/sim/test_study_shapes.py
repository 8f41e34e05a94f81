"""Each of the study's fault shapes (harness/sim/faults/study_shapes.py) does what its name says,
and shows the behaviour of the reference scenario it reproduces, on seeded runs."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from harness.sim.faults.shapes import SCENARIO_NEMESES, SHAPES
from harness.sim.faults.study_shapes import STUDY_NEMESES
from harness.sim.runs.cluster import DataTiming
from harness.sim.runs.matrix import run_one
from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.scenario_run import FAULT_START_MS, ScenarioConfig, ScenarioRun


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()


BASE = ScenarioConfig(seed=1, metadata="raft", start_jitter_ms=500, producer="kafka",
                      probe_interval_ms=10, fault_duration_ms=5000, flush_policy="page-cache")


def row(**changes: Any):
    out = run_one(dataclasses.replace(BASE, **changes))
    assert out.invariant_violations == ()
    return out.row


def test_the_study_shapes_are_in_the_one_table_and_the_matrix():
    assert set(STUDY_NEMESES) <= set(SHAPES)
    assert set(STUDY_NEMESES) <= set(SCENARIO_NEMESES)


def test_follower_gc_pauses_flap_the_isr_only_when_they_cross_the_timeouts():
    flapping = [row(seed=s, nemesis="follower-gc-pauses", fault_duration_ms=10_000)
                for s in (1, 2, 3)]
    # Pauses of 1.5-3 s with 0.5-1.5 s between them: 3 or more in 10 s, each one a shrink and
    # an expansion (session timeout 1 s, lag 2 s).
    assert all(r.isr_shrinks >= 3 and r.isr_expands >= 3 for r in flapping)
    assert all(r.leader_elections == 0 and r.lost_writes == 0 for r in flapping)
    patient = row(nemesis="follower-gc-pauses", fault_duration_ms=10_000,
                  timing=DataTiming(session_timeout_ms=4000, replica_lag_time_max_ms=4000))
    assert (patient.isr_shrinks, patient.isr_expands) == (0, 0)


@pytest.mark.parametrize("seed", [1, 2, 4])
def test_staggered_isr_drop_separates_elr_from_unclean_election(seed):
    common = dict(seed=seed, nemesis="staggered-isr-drop-then-leader-crash",
                  min_insync_replicas=2)
    elr = row(eligible_leader_replicas=True, **common)
    unclean = row(unclean_leader_election=True, **common)
    neither = row(**common)
    # One follower, then the other, leaves the ISR before the leader's power loss.
    assert elr.isr_shrinks == unclean.isr_shrinks == 2
    # ELR elects the follower that left last (it holds every acknowledged write); the unclean
    # election takes the one that left first, which lacks the writes acknowledged by the
    # leader and the other; without either the leader comes back with its short log.
    assert (elr.lost_writes, elr.unclean_elections) == (0, 0)
    assert unclean.lost_writes > 0 and unclean.unclean_elections == 1
    assert neither.lost_writes > unclean.lost_writes


def test_metadata_quorum_down_with_a_dead_follower_stalls_isr_but_not_quorum():
    isr = row(nemesis="metadata-quorum-down-kill-follower", min_insync_replicas=2)
    quorum = row(nemesis="metadata-quorum-down-kill-follower", replication_mode="quorum",
                 flush_policy="fsync-before-ack")
    # ISR: the dead follower cannot be removed without the controller, so acks=all waits on
    # it for the whole fault (the shrink commits once the quorum is back, too late);
    # quorum mode commits on the leader and the live follower.
    assert isr.probe_ok_during == 0 and isr.isr_shrinks <= 1
    assert quorum.probe_ok_during == quorum.probe_slots_during
    # Without the dead follower the quorum down changes nothing (the old shape's 100%).
    alone = row(nemesis="metadata-quorum-down", min_insync_replicas=2)
    assert alone.probe_ok_during == alone.probe_slots_during


def test_metadata_quorum_down_with_a_dead_leader_elects_nobody_until_it_returns():
    for mode, policy in (("isr", "page-cache"), ("quorum", "fsync-before-ack")):
        r = row(nemesis="metadata-quorum-down-kill-leader", replication_mode=mode,
                flush_policy=policy)
        assert r.probe_ok_during == 0, mode
        assert r.leader_elections <= 1 and r.lost_writes == 0, mode


def test_fast_leader_changes_elect_twice_within_the_fault():
    for mode, policy in (("isr", "page-cache"), ("quorum", "fsync-before-ack")):
        r = row(nemesis="fast-leader-changes", replication_mode=mode, flush_policy=policy)
        assert r.leader_elections >= 2, mode
        assert (r.lost_writes, r.divergent_offsets) == (0, 0), mode


def test_a_fenced_follower_is_kept_out_of_the_isr_until_it_is_unfenced():
    run = ScenarioRun(dataclasses.replace(BASE, nemesis="fenced-follower-rejoins"))
    seen: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = []

    def watch(actor: Any) -> None:
        image = run.cluster.image
        topic = image.topic("t")
        if topic is None:
            return
        isr = tuple(sorted(image.partition(topic.topic_id, 0).isr))
        fenced = tuple(sorted(b.broker_id for b in image.brokers() if b.fenced))
        if not seen or seen[-1][1:] != (isr, fenced):
            seen.append((run.cluster.world.now_ms, isr, fenced))

    run.cluster.world.after_hooks.append(watch)
    run.run()
    fenced_at = [(t, f) for t, _, f in seen if f and t >= FAULT_START_MS]
    assert fenced_at, seen  # the follower's session expired during the fault
    assert all(not set(f) & set(isr) for _, isr, f in seen), seen
    assert seen[-1][1] == (1, 2, 3) and seen[-1][2] == ()


def test_power_loss_of_every_broker_separates_fsync_from_none():
    lost = {}
    for mode, policy in (("isr", "page-cache"), ("isr", "flush-every-message"),
                         ("quorum", "fsync-before-ack"), ("quorum", "no-fsync")):
        r = row(nemesis="power-loss-all-brokers", replication_mode=mode, flush_policy=policy,
                fault_duration_ms=1000)
        lost[(mode, policy)] = r.lost_writes
    assert lost[("isr", "flush-every-message")] == lost[("quorum", "fsync-before-ack")] == 0
    assert lost[("isr", "page-cache")] > 0 and lost[("quorum", "no-fsync")] > 0
