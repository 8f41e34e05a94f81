"""Reproductions (harness/spark/repro.py, harness/sim/runs/timeline.py): a loss's replay command
runs again on the driver and its replica timeline shows the loss."""

from __future__ import annotations

from harness.sim.runs.replay import replay_command
from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.scenario_run import ScenarioConfig
from harness.sim.runs.timeline import record_timeline
from harness.spark.repro import replay_timelines
from harness.spark.verdicts import Reproduction

LOSSY = ScenarioConfig(seed=1, nemesis="power-loss-all-brokers", fault_duration_ms=1000,
                       start_jitter_ms=500, metadata="raft", flush_policy="page-cache",
                       producer="kafka")


def test_the_timeline_shows_the_power_loss_and_the_lost_offsets():
    quiet_logging()
    result, timeline = record_timeline(LOSSY)
    assert result.lost_writes > 0 and timeline.lost_count == result.lost_writes
    rows = timeline.around_loss()
    assert rows and all(a.time_ms <= b.time_ms for a, b in zip(rows, rows[1:], strict=False))
    # Every broker down at once (the fault), then back with an empty log.
    assert any(all(not r.up for r in row.replicas) for row in rows)
    text = timeline.markdown()
    assert f"lost acknowledged writes ({result.lost_writes})" in text
    assert "| ms | broker 1: leader/epoch, ISR, LEO/HW |" in text and "down" in text
    offsets = [x["offset"] for x in timeline.lost]
    assert offsets == sorted(offsets)


def test_replays_are_bounded_and_skip_runs_without_a_command():
    quiet_logging()
    command = replay_command(LOSSY)
    repros = [Reproduction("c", "isr-min2", LOSSY.nemesis, 1, LOSSY.key(), command, 5),
              Reproduction("c", "isr-min2", LOSSY.nemesis, 1, LOSSY.key(), command, 5),
              Reproduction("c", "quorum", "kill-leader", 2, "real-run", None, 1)]
    done = replay_timelines(repros, limit=8)
    assert list(done) == [LOSSY.key()]
    assert done[LOSSY.key()].lost_writes > 0 and done[LOSSY.key()].rows > 0
    assert replay_timelines(repros, limit=0) == {}
