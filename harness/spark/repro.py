"""Reproductions for the report: the replica timeline around a loss, replayed on the driver.

A simulated run is a pure function of its config, and its row's `replay_command` names the
config (harness/sim/runs/replay.py), so the report replays the first losing seed of a few cells
with the timeline recorder (harness/sim/runs/timeline.py) and shows leader, epoch, ISR, LEO and
HW per replica around the lost offsets. Each replay is one simulated run (a fraction of a second
of CPU); at most `limit` are replayed, the rest keep their command only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.spark.verdicts import Reproduction


@dataclass(frozen=True, slots=True)
class Replayed:
    run_id: str
    command: str
    lost_writes: int
    timeline_markdown: str
    rows: int


def replay_timelines(reproductions: Sequence[Reproduction], limit: int = 8) -> dict[str, Replayed]:
    """The timelines of up to `limit` distinct runs with a replay command, by run id. A run
    whose replay loses nothing (a changed simulator) says so in its timeline."""
    from harness.sim.runs.replay import ReplayError, config_from_replay
    from harness.sim.runs.runner import quiet_logging
    from harness.sim.runs.timeline import record_timeline

    quiet_logging()
    out: dict[str, Replayed] = {}
    for r in reproductions:
        if len(out) >= limit or r.run_id in out or not r.command:
            continue
        try:
            config = config_from_replay(r.command)
        except ReplayError:
            continue
        result, timeline = record_timeline(config)
        note = ("" if result.lost_writes else
                "The replay lost nothing: the simulator changed since the row was written.\n\n")
        out[r.run_id] = Replayed(r.run_id, r.command, result.lost_writes,
                                 note + timeline.markdown(), len(timeline.around_loss()))
    return out
