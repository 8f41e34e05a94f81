"""replication.mode=raft in the whole-cluster simulator (harness/sim/actors/raft_host.py): each
broker hosts its replica of the partition's Raft group on its simulated disk, driven as
partition/raft/effects.py says, under the simulator's faults, with the invariants checked after
every event (one leader per Raft epoch, HW never back and never past the majority's log end,
nothing committed ever changes) and Jepsen's queue checker at the end (no acknowledged write
lost).

- same seed, same run;
- seeds under partitions, kills, pauses and power loss of unflushed data (of a broker, of the
  partition leader, of a majority at once): no violation (thousands in the slow sweep);
- planted bugs (followers counting an unflushed append toward the majority; a driver that
  skips the flush) are caught, and the real parts pass the seeds that catch them; a replica
  rebuilt after a kill -9 must fsync the log its killed process left (a scripted case);
- the leader cut from its followers only: the majority side elects a new leader within the
  fetch timeout plus an election timeout and stays writable; quorum mode, whose leadership is
  the controller's, stays unwritable for the whole fault;
- every controller down: the Raft group still elects a new leader when its leader is killed,
  clients find it through the brokers, and acks=all writes go on.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from harness.sim.actors.raft_host import RaftSettings, SimRaftPorts
from harness.sim.faults.shapes import CLUSTER_KINDS
from harness.sim.runs.cluster import raft_settings_for
from harness.sim.runs.cluster_run import (
    ClusterRun,
    ClusterRunConfig,
    ClusterRunResult,
    parse_nemesis,
    run_cluster,
)
from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.scenario_run import FAULT_START_MS, ScenarioConfig, ScenarioRun
from partition.log import Record, encode_batch
from partition.raft import RaftPartitionConfig, data_partition_raft_config
from partition.replica import ACKS_ALL, ProduceRequest
from tests.sim.planted import NoRecoveryFlushPorts, SkipFlushPorts, followers_ack_unflushed

NEMESIS = parse_nemesis("partition,crash,pause,power-loss")
RAFT = ClusterRunConfig(replication_mode="raft", nemesis=NEMESIS)
# The sweep's cheaper run: one producer, the abstract controller (a raft partition's leadership
# does not go through it; its faults still act on it).
SWEEP = replace(RAFT, voters=0, producers=1)
# 100 seeds take every fault shape the test asserts (power loss of a majority in >= 10 of them);
# the slow test runs the seeds after them.
SWEEP_SEEDS = int(os.environ.get("RAFT_SIM_SEEDS", "100"))
SLOW_SEEDS = int(os.environ.get("RAFT_SIM_SLOW_SEEDS", "2000"))


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards


def test_same_seed_same_run() -> None:
    first, again = (run_cluster(replace(RAFT, seed=3)) for _ in range(2))
    assert first.faults and first.faults == again.faults
    assert first.digest == again.digest and first.events == again.events
    assert first.summary() == again.summary()
    assert run_cluster(replace(RAFT, seed=4)).digest != first.digest


def _sweep(seeds: range, config: ClusterRunConfig) -> tuple[Counter[str], int, int]:
    shapes: Counter[str] = Counter()
    acked = elections = 0
    for seed in seeds:
        result = run_cluster(replace(config, seed=seed))
        assert result.ok, (seed, result.violations, result.examples, result.faults)
        assert result.lost == 0 and result.divergent_offsets == 0, seed
        assert result.drained, f"seed {seed}: no Raft leader after the heal"
        shapes.update(shape for _, _, shape, _ in result.faults)
        acked += result.acked
        elections += result.leader_elections
    return shapes, acked, elections


def test_no_violation_under_partitions_kills_pauses_and_power_loss() -> None:
    shapes, acked, elections = _sweep(range(1, SWEEP_SEEDS + 1), SWEEP)
    # Not vacuous: every kind of fault ran, power losses of a majority included, leaders moved,
    # and writes were acknowledged all along.
    for kind in ("partition", "crash", "pause", "power-loss"):
        assert any(shapes[s] for s in CLUSTER_KINDS[kind]), (kind, shapes)
    assert shapes["power-crash-majority"] >= SWEEP_SEEDS // 10
    assert elections >= SWEEP_SEEDS // 2
    assert acked > SWEEP_SEEDS * 100


def test_no_violation_with_raft_controllers_and_three_producers() -> None:
    _, acked, _ = _sweep(range(1, 11), RAFT)
    assert acked > 10 * 300


@pytest.mark.slow
@pytest.mark.timeout(4 * 3600)
def test_no_violation_across_thousands_of_seeds() -> None:
    _sweep(range(SWEEP_SEEDS + 1, SLOW_SEEDS + 1), SWEEP)


# -- planted bugs -----------------------------------------------------------------------------------

PLANT_SEEDS = 40
POWER_LOSS = parse_nemesis("power-loss")


def _first_violation(config: ClusterRunConfig,
                     plant: Callable[[RaftSettings], RaftSettings]) -> ClusterRunResult | None:
    for seed in range(1, PLANT_SEEDS + 1):
        run = ClusterRun(replace(config, seed=seed), plant(raft_settings_for(seed)))
        result = run.run()
        if not result.ok:
            return result
    return None


PLANTED: list[tuple[str, ClusterRunConfig, Callable[[RaftSettings], RaftSettings]]] = [
    ("followers-ack-unflushed", replace(SWEEP, nemesis=POWER_LOSS), followers_ack_unflushed),
    ("skip-flush", replace(SWEEP, nemesis=POWER_LOSS),
     lambda s: replace(s, ports_class=SkipFlushPorts)),
]


@pytest.mark.parametrize(("name", "config", "plant"), PLANTED, ids=[p[0] for p in PLANTED])
def test_planted_bug_is_caught(name: str, config: ClusterRunConfig,
                               plant: Callable[[RaftSettings], RaftSettings]) -> None:
    found = _first_violation(config, plant)
    assert found is not None, f"{name}: no violation in {PLANT_SEEDS} seeds"
    # The checkers (a committed record rewritten, an acknowledged write missing), or the Raft
    # core's own guard (a truncation below the HW).
    assert set(found.violations) & {"lost-write", "divergence-below-hw", "replica-divergence",
                                    "CoreInvariant"}, found.violations
    # The real parts pass that seed.
    assert run_cluster(found.config).ok


def _killed_mid_fsync_then_power_loss(ports_class: type[SimRaftPorts]) -> dict[str, int]:
    """Leader L, followers A and B; B is cut off. A write x reaches A, and A is killed while its
    fsync of x is in flight (x stays in its page cache), then restarted: its first fetch reports
    x, which L commits. A then loses power, L is killed, B heals: A and B elect a leader between
    them. The replicas' violations at the end."""
    raft = data_partition_raft_config(election_timeout_ms=1000, election_backoff_max_ms=1000,
                                      fetch_timeout_ms=5000, request_timeout_ms=1000,
                                      fetch_max_wait_ms=100)  # L leads alone until A returns
    settings = RaftSettings(RaftPartitionConfig(raft), fsync_ms=5, ports_class=ports_class)
    run = ClusterRun(ClusterRunConfig(seed=1, replication_mode="raft", voters=0, producers=0,
                                      consumers=0, nemesis=()), settings)
    run.start()
    cluster, world = run.cluster, run.cluster.world

    def until(done: Callable[[], bool], within_ms: int, what: str) -> None:
        end = world.now_ms + within_ms
        while not done():
            assert world.now_ms < end, what
            cluster.run_until(world.now_ms + 1)

    def replica(broker: int) -> Any:
        host = cluster.brokers[broker].raft
        assert host is not None
        return next(iter(host.replicas.values()))

    until(lambda: (led := cluster.leader_and_high_watermark()) is not None and led[1] > 0,
          5000, "a leader with a commit")
    leader = cluster.raft_leader()
    assert leader is not None
    a, b = (x for x in sorted(cluster.brokers) if x != leader)
    world.network.cut_between(b, world.node_ids)
    x_offset = replica(leader).core.log_end_offset
    world.send(1999, leader, ProduceRequest(cluster.topic_id, 0, 1, encode_batch([Record(b"7")]),
                                            ACKS_ALL, 5000))
    until(lambda: (cluster.brokers[a].raft_ports is not None
                   and cluster.brokers[a].raft_ports.fsync_done_ms is not None
                   and replica(a).store.end_offset > x_offset), 50, "A fsyncing x")
    world.kill(a)
    world.restart(a)
    until(lambda: replica(leader).core.high_watermark > x_offset, 3000, "x committed")
    cluster.brokers[a].crash(None)  # power loss: every unflushed byte gone
    world.kill(leader)
    world.network.heal()
    world.restart(a)
    cluster.run_until(world.now_ms + 8000)
    assert cluster.raft_leader() in (a, b)  # A and B elected and committed in a new epoch
    return dict(cluster.replicas.counters.violations)


def test_a_replica_rebuilt_after_a_kill_fsyncs_its_log_before_counting_it() -> None:
    # Without the recovery flush, x was committed on a copy only a page cache held: the new
    # leader's epoch marker takes its offset (a committed record rewritten).
    assert _killed_mid_fsync_then_power_loss(NoRecoveryFlushPorts) == {"divergence-below-hw": 1}
    assert _killed_mid_fsync_then_power_loss(SimRaftPorts) == {}


# -- leadership without the controller ----------------------------------------------------------


def _leader_cut_run(mode: str, seed: int) -> tuple[ScenarioRun, Any, list[tuple[int, int]]]:
    """The leader cut from its followers only, for 5 s; the Raft leaders (time, broker) seen
    every ms of the first 2 s of the fault."""
    run = ScenarioRun(ScenarioConfig(seed=seed, replication_mode=mode, acks="all",
                                     min_insync_replicas=2, metadata="raft", start_jitter_ms=500,
                                     nemesis="leader-cut-from-followers-only",
                                     fault_duration_ms=5000))
    cluster = run.cluster
    seen: list[tuple[int, int]] = []

    def probe() -> None:
        leader = cluster.raft_leader() if mode == "raft" else cluster.partition_leader()
        seen.append((cluster.world.now_ms, -1 if leader is None else leader))

    for at_ms in range(FAULT_START_MS, FAULT_START_MS + 2000):
        cluster.world.queue.call_at(at_ms, probe)
    return run, run.run(), seen


def _acked_between(result: Any, start_ms: int, end_ms: int) -> list[int]:
    return [t for e in result.history.events if e.f == "send" and e.type == "ok"
            and start_ms <= (t := e.time // 1_000_000) < end_ms]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_leader_cut_from_followers_the_majority_elects_and_stays_writable(seed: int) -> None:
    run, result, seen = _leader_cut_run("raft", seed)
    assert not result.violations and result.lost_writes == 0
    old = seen[0][1]
    elected = next(t for t, leader in seen if leader not in (old, -1))
    raft = raft_settings_for(seed).config.raft
    # The followers notice within the fetch timeout that no fetch succeeds, then one election
    # (pre-vote, vote) elects one of them; message delays are 1-3 ms.
    assert elected - FAULT_START_MS <= raft.fetch_timeout_ms + raft.election_timeout_ms, (
        elected, raft)
    # Writable for the rest of the fault: acks=all writes acknowledged in every second of it
    # once clients found the new leader (the old one keeps answering until check-quorum).
    fault_end = FAULT_START_MS + 5000
    for second in range(FAULT_START_MS + 1000, fault_end, 1000):
        assert _acked_between(result, second, second + 1000), (seed, second)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_quorum_mode_stays_unwritable_under_the_same_cut(seed: int) -> None:
    # Quorum mode's leadership is the controller's: the leader, cut from its followers only,
    # still heartbeats the controller, which keeps it; nothing commits for the whole fault.
    _, result, seen = _leader_cut_run("quorum", seed)
    assert {leader for _, leader in seen} == {seen[0][1]}
    assert not _acked_between(result, FAULT_START_MS + 100, FAULT_START_MS + 5000)


def test_every_controller_down_the_group_still_elects_and_writes() -> None:
    """A majority of the controllers crashed for 6 s; 1 s in, the Raft leader's broker is killed
    (SIGKILL) for the rest of it. The other two elect a leader among themselves, clients find it
    through the brokers' Raft state, and acks=all writes are acknowledged while no controller
    could answer anything."""
    run = ScenarioRun(ScenarioConfig(seed=2, replication_mode="raft", acks="all",
                                     metadata="raft", nemesis="metadata-quorum-down",
                                     fault_duration_ms=6000))
    cluster = run.cluster
    world = cluster.world
    killed: list[tuple[int, int]] = []  # (broker, its Raft epoch)

    def kill_leader() -> None:
        assert cluster.active_controller() is None  # the quorum is down
        leader = cluster.raft_leader()
        assert leader is not None
        raft = cluster.brokers[leader].raft
        assert raft is not None
        killed.append((leader, max(r.core.leader_epoch for r in raft.replicas.values())))
        world.kill(leader)

    after = FAULT_START_MS + 2500
    probe: list[tuple[int | None, int | None]] = []
    world.queue.call_at(FAULT_START_MS + 1000, kill_leader)
    world.queue.call_at(after, lambda: probe.append((cluster.raft_leader(),
                                                     cluster.active_controller())))
    world.queue.call_at(FAULT_START_MS + 5900, lambda: world.restart(killed[0][0]))
    result = run.run()
    assert not result.violations and result.lost_writes == 0
    (dead, epoch), = killed
    new_leader, active = probe[0]
    assert active is None and new_leader not in (None, dead)
    raft = cluster.brokers[new_leader].raft  # type: ignore[index]
    assert raft is not None
    assert all(r.core.leader_epoch > epoch for r in raft.replicas.values())
    assert len(_acked_between(result, after, FAULT_START_MS + 6000)) > 30
