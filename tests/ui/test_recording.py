"""Recording simulated runs for replay (harness/sim/runs/recording.py): the KIP-101 scenarios show
their anomaly at the frame it happens with the exact logs of the story, leader epochs prevent
the divergence, and recording never changes the run it records."""

from __future__ import annotations

from typing import Any

import pytest

from harness.sim.actors.broker import Broker
from harness.sim.runs.recording import (
    Memory,
    Recorder,
    Recording,
    _read_entries,
    record_data_run,
    record_scenario,
)
from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.scenario_run import ScenarioConfig, ScenarioRun, run_scenario


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards


def logs_of(frame: dict[str, Any]) -> dict[int, dict[str, Any]]:
    (part,) = frame["state"]["partitions"]
    return {lg["id"]: lg for lg in part["logs"]}


def first_frame(recording: Recording, kind: str) -> int:
    return next(a["frame"] for a in recording.anomalies if a["kind"] == kind)


def test_silent_divergence_is_recorded_where_the_follower_is_counted_past_it() -> None:
    recording = record_scenario("kip101-divergence", leader_epoch_enable=False)
    assert [a["kind"] for a in recording.anomalies] == ["loss", "divergence"]
    at = first_frame(recording, "divergence")
    logs = logs_of(recording.frames[at])
    # Broker 2 leads with the new record at offset 1 (epoch 1); broker 1 kept the old one
    # (epoch 0) and the leader counts it as holding offset 1: its fetch reported LEO 2.
    assert logs[2]["role"] == "leader" and logs[2]["entries"] == [[0, 0, "0"], [1, 1, "2"]]
    assert logs[1]["role"] == "follower" and logs[1]["entries"] == [[0, 0, "0"], [1, 0, "1"]]
    assert (logs[1]["hw"], logs[2]["hw"], logs[1]["fetched_to"]) == (2, 2, 2)
    assert recording.frames[at]["state"]["anomalies"][-1]["offsets"] == [1]
    # The frame before: broker 1 had not fetched yet, so nothing diverged in the leader's view.
    before = recording.frames[at - 1]["state"]["anomalies"]
    assert "divergence" not in {a["kind"] for a in before}
    final = logs_of(recording.frames[-1])
    assert final[1]["entries"][1] != final[2]["entries"][1]


def test_leader_epochs_truncate_instead_of_diverging() -> None:
    recording = record_scenario("kip101-divergence", leader_epoch_enable=True)
    # Both replicas lost power; the acknowledged offset 1 was flushed on broker 1 only, and
    # broker 2, elected first, never had it: a loss either way, but no divergence.
    assert [a["kind"] for a in recording.anomalies] == ["loss"]
    final = logs_of(recording.frames[-1])
    assert final[1]["entries"] == final[2]["entries"] == [[0, 0, "0"], [1, 1, "2"]]


def test_truncation_to_the_high_watermark_shows_the_lost_write() -> None:
    recording = record_scenario("kip101-loss", leader_epoch_enable=False)
    assert [a["kind"] for a in recording.anomalies] == ["loss"]
    frame = recording.frames[first_frame(recording, "loss")]
    (part,) = frame["state"]["partitions"]
    logs = logs_of(frame)
    assert part["leader"] == 2 and part["committed_end"] == 2
    assert logs[2]["role"] == "leader" and logs[2]["leo"] == 1
    assert frame["state"]["anomalies"][0]["offsets"] == [1]
    assert recording.source["lost"] == ["1"]


def test_leader_epochs_keep_the_acknowledged_write() -> None:
    recording = record_scenario("kip101-loss", leader_epoch_enable=True)
    assert recording.anomalies == []
    final = logs_of(recording.frames[-1])
    assert final[1]["entries"] == final[2]["entries"] == [[0, 0, "0"], [1, 0, "1"]]


def test_frames_change_something_and_time_never_goes_back() -> None:
    recording = record_scenario("kip101-loss", leader_epoch_enable=False)
    states = [f["state"] for f in recording.frames]
    assert all(a != b for a, b in zip(states, states[1:], strict=False))
    times = [f["time_ms"] for f in recording.frames]
    assert times == sorted(times) and times[0] == 0


def test_a_scenario_records_the_same_frames_every_time() -> None:
    first = record_scenario("kip101-divergence", leader_epoch_enable=False).to_json()
    again = record_scenario("kip101-divergence", leader_epoch_enable=False).to_json()
    assert first == again


class CheckedMemory(Memory):
    """Every incremental read compared with a full read of the same log."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def entries(self, broker: Broker, first: int) -> list[list[Any]]:
        got = super().entries(broker, first)
        assert broker.log is not None
        assert got == _read_entries(broker.log, max(first, broker.log.log_start_offset))
        self.reads += 1
        return got


def test_recording_leaves_the_run_unchanged_and_reads_logs_exactly() -> None:
    # An unclean election after a crash that loses the unflushed tail: leaders change, logs
    # are truncated and rewritten, acknowledged writes are lost.
    config = ScenarioConfig(seed=1, nemesis="unclean-crash-losing-unflushed-tail",
                           min_insync_replicas=1, unclean_leader_election=True)
    plain = run_scenario(config)
    run = ScenarioRun(config)
    memory = CheckedMemory()
    recording = Recording("run", {})
    Recorder(recording, memory=memory).attach(run.cluster)
    recorded = run.run()
    assert recorded.history.events == plain.history.events
    assert recorded.queue.counts == plain.queue.counts
    assert memory.reads > 1000
    assert plain.lost_writes > 0 and [a["kind"] for a in recording.anomalies] == ["loss"]


def test_a_long_run_stops_recording_at_the_frame_bound() -> None:
    run = ScenarioRun(ScenarioConfig(seed=2))
    recording = Recording("run", {})
    Recorder(recording, max_frames=50).attach(run.cluster)
    run.run()
    assert len(recording.frames) == 50 and recording.truncated


def test_a_raft_quorum_run_shows_voters_their_cut_links_and_the_new_leader() -> None:
    from harness.ui.server import replay_document

    config = ScenarioConfig(seed=2, nemesis="isolate-controller-leader", metadata="raft")
    recording = record_data_run(config)
    voters = {c["id"] for c in recording.frames[-1]["state"]["controllers"]}
    assert len(voters) == 3
    events = replay_document(recording.to_json())["events"]
    cut = next(e for e in events if e["text"].startswith("links cut: "))
    pairs = [{int(n) for n in pair.split("-")}
             for pair in cut["text"].removeprefix("links cut: ").split(", ")]
    (isolated,) = set.intersection(*pairs)  # the one node every cut link touches
    assert isolated in voters and len(pairs) == 5  # cut from the 2 other voters, 3 brokers
    after = [e["text"] for e in events if e["kind"] == "election"
             and e["text"].startswith("controller ") and e["time_ms"] > cut["time_ms"]]
    assert after and not after[0].startswith(f"controller {isolated} ")
