"""The brokers' disk model (harness/sim/actors/disk.py): which appends each flush policy fsyncs,
fsync times drawn from a distribution, acknowledgements waiting for them, and a power loss that
drops exactly what was not fsynced."""

from __future__ import annotations

import random

import pytest

from harness.results import fsync as fs
from harness.results.schema import FLUSH_POLICIES
from harness.sim.actors import disk as dm
from harness.sim.faults.shapes import LAST_REPLICA_RESTART_MS
from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.scenario_run import (
    FAULT_START_MS,
    ScenarioConfig,
    ScenarioRun,
    run_scenario,
)
from partition.replica import AppendAsFollower, AppendAsLeader, TruncateTo


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()


def constant_profile(us: float) -> fs.FsyncProfile:
    return fs.FsyncProfile({}, (fs.FsyncCase.from_samples(512, False, [us] * 10),))


@pytest.fixture
def five_ms(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fsync takes exactly 5 ms (the shipped distribution would make the test depend
    on the machine it was measured on)."""
    monkeypatch.setattr(dm, "_DEFAULT_PROFILE", constant_profile(5000.0))


LEADER = AppendAsLeader(b"x" * 70, 0, 0, 1, flush=False)
LEADER_FLUSH = AppendAsLeader(b"x" * 70, 0, 0, 1, flush=True)
FOLLOWER = AppendAsFollower(b"x" * 70, flush=False)
FOLLOWER_FLUSH = AppendAsFollower(b"x" * 70, flush=True)


@pytest.mark.parametrize(("policy", "fsynced"), [
    (None, (False, True, False, True)),
    ("page-cache", (False, False, False, False)),
    ("flush-every-message", (True, True, True, True)),
    ("fsync-before-ack", (False, True, False, True)),
    ("no-fsync", (False, False, False, False)),
])
def test_which_appends_each_policy_fsyncs(policy, fsynced):
    d = dm.Disk(policy, random.Random(1), constant_profile(100.0))
    assert tuple(d.must_fsync(e) for e in (LEADER, LEADER_FLUSH, FOLLOWER, FOLLOWER_FLUSH)) \
        == fsynced
    assert not d.must_fsync(TruncateTo(0))


def test_policies_are_the_schema_s_and_unknown_ones_are_refused():
    assert dm.FLUSH_POLICIES == FLUSH_POLICIES
    with pytest.raises(ValueError, match="flush policy 'sometimes'"):
        dm.Disk("sometimes", random.Random(1))


def test_fsync_times_follow_the_distribution_deterministically():
    skewed = fs.FsyncProfile({}, (fs.FsyncCase.from_samples(512, False,
                                                             [1000.0] * 90 + [20000.0] * 10),))
    draws = [dm.Disk("fsync-before-ack", random.Random(7), skewed).fsync_ms(70)
             for _ in range(1)]
    d = dm.Disk("fsync-before-ack", random.Random(7), skewed)
    times = [d.fsync_ms(70) for _ in range(2000)]
    assert times[:1] == draws
    assert times == [dm.Disk("fsync-before-ack", random.Random(7), skewed).fsync_ms(70)
                     for _ in range(1)] + times[1:]
    assert 0.85 < sum(t == 1 for t in times) / len(times) < 0.92
    assert 0.07 < sum(t == 20 for t in times) / len(times) < 0.12
    assert d.fsyncs == 2000 and d.fsync_ms_total == sum(times)
    assert dm.Disk("fsync-before-ack", random.Random(1), constant_profile(1.0)).fsync_ms(1) == 1


def latencies(result) -> list[int]:
    invoked, out = {}, []
    for e in result.history.events:
        if e.f != "send" or e.extra.get("final"):
            continue
        if e.type == "invoke":
            invoked[e.process] = e.time
        elif e.type == "ok":
            out.append((e.time - invoked.pop(e.process)) // 1_000_000)
    return sorted(out)


def test_an_acknowledgement_waits_for_the_fsyncs_its_policy_needs(five_ms):
    def run(mode: str, policy: str | None) -> list[int]:
        return latencies(run_scenario(ScenarioConfig(seed=3, replication_mode=mode,
                                                     flush_policy=policy, metadata="raft")))

    # Quorum: the leader's fsync (5 ms) then a follower's (5 ms) before its next fetch counts.
    fsync = run("quorum", "fsync-before-ack")
    assert fsync[0] >= 10
    free = run("quorum", "no-fsync")
    assert free[0] < 10 and free == run("quorum", None)
    # ISR on the page cache acknowledges as before the disk model; flush.messages=1 pays the
    # leader's and a follower's fsync too.
    page = run("isr", "page-cache")
    assert page == run("isr", None)
    assert run("isr", "flush-every-message")[0] >= 10 > page[0]


@pytest.mark.parametrize("policy", ["page-cache", "flush-every-message"])
def test_power_loss_drops_exactly_what_was_not_fsynced(policy, five_ms):
    config = ScenarioConfig(seed=2, nemesis="unclean-crash-losing-unflushed-tail",
                            fault_duration_ms=5000, flush_policy=policy, metadata="raft")
    run = ScenarioRun(config)
    crash_ms = FAULT_START_MS + config.fault_duration_ms
    seen: dict[str, dict[int, tuple[int, int, int]]] = {}

    def look(when: str) -> None:  # (process starts, log end offset, flushed up to) per broker
        seen[when] = {b: (broker.incarnation, broker.log.log_end_offset,
                          broker.log.recovery_point)
                      for b, broker in run.cluster.brokers.items() if broker.log is not None}

    queue = run.cluster.world.queue
    queue.call_at(crash_ms - 1, look, "before")
    queue.call_at(crash_ms + LAST_REPLICA_RESTART_MS + 1, look, "after")
    run.run()
    crashed = [b for b in seen["after"] if seen["after"][b][0] > seen["before"][b][0]]
    assert len(crashed) == 1
    _, appended, durable = seen["before"][crashed[0]]
    assert seen["after"][crashed[0]][1] == durable
    if policy == "page-cache":
        assert (durable, appended > 0) == (0, True)  # nothing written back within the run
    else:
        assert appended - durable <= 1  # at most the batch whose fsync was in flight


def test_raft_partitions_draw_each_grouped_fsync_from_the_broker_s_disk(monkeypatch):
    """A raft partition's grouped fsyncs are drawn one by one from its broker's seeded disk, as
    ISR and quorum brokers draw theirs, not one fixed time: with a disk that takes about 1 ms
    nine times in ten and up to 20 ms otherwise, both kinds occur, every grouped fsync is one
    draw, and the same seed draws the same times."""
    skewed = fs.FsyncProfile({}, (fs.FsyncCase.from_samples(512, False,
                                                             [1000.0] * 90 + [20000.0] * 10),))
    monkeypatch.setattr(dm, "_DEFAULT_PROFILE", skewed)
    drawn: list[int] = []
    draw = dm.Disk.fsync_ms

    def recorded(self: dm.Disk, batch_bytes: int) -> int:
        drawn.append(draw(self, batch_bytes))
        return drawn[-1]

    monkeypatch.setattr(dm.Disk, "fsync_ms", recorded)

    def run() -> tuple[list[int], int]:
        drawn.clear()
        r = ScenarioRun(ScenarioConfig(seed=4, replication_mode="raft",
                                       flush_policy="fsync-before-ack", metadata="raft"))
        r.run()
        ports = [broker.raft_ports for broker in r.cluster.brokers.values()]
        assert all(p is not None and p.draw_fsync_ms is not None for p in ports)
        hosts = [broker.raft for broker in r.cluster.brokers.values()]
        return list(drawn), sum(h.fsync_rounds for h in hosts if h is not None)

    times, rounds = run()
    # One draw per grouped fsync (a restart's recovery flush takes none), a mix of times.
    assert len(times) == rounds > 100
    assert 0.8 < sum(t == 1 for t in times) / len(times) < 0.97
    assert max(times) >= 10
    assert run() == (times, rounds)


def test_raft_settings_on_a_measured_disk_refuse_a_host_without_the_draw():
    from harness.sim.actors.raft_host import RaftSettings
    from harness.sim.runs.cluster import raft_settings_for

    settings = RaftSettings(raft_settings_for(1).config, measured_disk=True)
    with pytest.raises(ValueError, match="measured disk"):
        settings.host(None, None)  # type: ignore[arg-type]
