"""Data-plane safety on the whole simulated cluster (`kraftlab sim cluster`, data plane): the
data plane (brokers on the real ReplicaCore, producers, consumers) with its metadata on a Raft
quorum of controller voters (harness/sim/runs/cluster.py), under seeded faults.

- same seed, same run (digest, history, faults);
- acks=all, min.insync.replicas=2, RF 3, no unclean election, under partitions, process crashes
  and pauses of brokers AND controllers: no acknowledged write lost, no divergence below the HW,
  no Raft or metadata invariant broken, and the partition is available after the heal;
- acks=1, and separately min.insync.replicas=1 with the leader isolated then losing power: the
  sweep finds a lost acknowledged write within a bounded number of seeds;
- metadata quorum down: the data plane waits on the control plane (the ISR cannot shrink, so
  acks=all writes stall while a follower is cut off), and recovers when the quorum returns.
"""

from __future__ import annotations

from collections import Counter

import pytest

from harness.sim.actors.abstract_controller import AbstractController
from harness.sim.faults.shapes import CLUSTER_KINDS
from harness.sim.runs.cluster import VOTER_BASE, Cluster, DataTiming
from harness.sim.runs.cluster_run import (
    ClusterRun,
    ClusterRunConfig,
    parse_nemesis,
    run_cluster,
)
from harness.sim.runs.runner import quiet_logging
from partition.replica import ReplicaConfig
from quorum.controller import ControllerConfig


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards


SAFE = ClusterRunConfig(
    acks="all",
    min_insync_replicas=2,
    replication_factor=3,
    unclean_leader_election=False,
    nemesis=parse_nemesis("partition,crash,pause"),
)


def test_same_seed_same_run() -> None:
    first, again = (
        run_cluster(ClusterRunConfig(seed=4, nemesis=SAFE.nemesis)) for _ in range(2)
    )
    assert first.faults and first.faults == again.faults
    assert first.digest == again.digest and first.events == again.events
    assert first.summary() == again.summary()
    other = run_cluster(ClusterRunConfig(seed=5, nemesis=SAFE.nemesis))
    assert other.digest != first.digest


def test_acks_all_min_isr_2_loses_nothing_under_partitions_crashes_and_pauses() -> None:
    shapes: Counter[str] = Counter()
    acked = elections = controller_epochs = 0
    for seed in range(1, 21):
        result = run_cluster(ClusterRunConfig(seed=seed, nemesis=SAFE.nemesis))
        assert result.ok, (seed, result.violations, result.examples, result.faults)
        assert result.lost == 0 and result.divergent_offsets == 0, seed
        assert result.drained, f"seed {seed}: no partition leader after the heal"
        shapes.update(shape for _, _, shape, _ in result.faults)
        acked += result.acked
        elections += result.leader_elections
        controller_epochs += result.controller_epochs
    # Not vacuous: every kind of fault ran, on brokers and on controllers, partition leaders
    # and active controllers changed, and thousands of writes were acknowledged.
    for kind in ("partition", "crash", "pause"):
        assert any(shapes[s] for s in CLUSTER_KINDS[kind]), (kind, shapes)
    assert shapes["crash-controller-leader"] and shapes["quorum-down"]
    assert shapes["pause-controller-leader"] and shapes["isolate-controller-leader"]
    assert shapes["quorum-cut"]
    assert elections >= 12 and controller_epochs >= 20 + 15
    assert acked > 20 * 300


def _first_loss(config: ClusterRunConfig, seeds: range) -> tuple[int, int] | None:
    for seed in seeds:
        result = run_cluster(
            ClusterRunConfig(
                **{**{f: getattr(config, f) for f in config.__dataclass_fields__}, "seed": seed}
            )
        )
        if result.lost:
            assert "lost-write" in result.violations and not result.ok
            return seed, result.lost
    return None


def test_acks_1_loses_an_acknowledged_write() -> None:
    found = _first_loss(
        ClusterRunConfig(
            acks="1", min_insync_replicas=2, nemesis=parse_nemesis("partition,crash,pause")
        ),
        range(1, 21),
    )
    assert found is not None, "acks=1: no lost acknowledged write in 20 seeds"


def test_min_isr_1_loses_an_acknowledged_write_when_the_isolated_leader_loses_power() -> None:
    found = _first_loss(
        ClusterRunConfig(
            acks="all", min_insync_replicas=1, nemesis=("leader-isolated-then-power-crash",)
        ),
        range(1, 21),
    )
    assert found is not None, "min.insync.replicas=1: no lost acknowledged write in 20 seeds"


def test_metadata_quorum_down_the_isr_cannot_shrink_until_it_returns() -> None:
    run = ClusterRun(ClusterRunConfig(seed=3, nemesis=(), duration_ms=14_000))
    run.start()
    cluster, world = run.cluster, run.cluster.world
    cluster.run_until(3000)
    part = cluster.image.partition(cluster.topic_id, 0)
    assert part is not None and len(part.isr) == 3
    leader = part.leader
    follower = max(b for b in part.isr if b != leader)
    down_ms = world.now_ms
    world.metadata_quorum_down()
    assert cluster.active_controller() is None
    assert sum(not cluster.voters[v].up for v in world.controller_ids) == 2
    world.network.cut_between(leader, [follower])
    # Twice replica.lag.time.max.ms: the leader wants the follower out of the ISR, but only the
    # controller can take it out (AlterPartition), and there is none.
    cluster.run_until(down_ms + 2 * cluster.timing.replica_lag_time_max_ms)
    assert cluster.image.partition(cluster.topic_id, 0) == part
    core = cluster.brokers[leader].core
    assert core is not None and core.is_leader and core.partition is not None
    assert set(core.partition.isr) == set(part.isr)
    stalled = [
        e
        for e in run.history.events
        if e.f == "send" and e.type == "ok" and e.time // 1_000_000 > down_ms + 50
    ]
    assert stalled == []  # acks=all waits on the follower still in the ISR
    up_ms = world.now_ms
    world.metadata_quorum_up()
    cluster.run_until(up_ms + 4000)
    after = cluster.image.partition(cluster.topic_id, 0)
    assert after is not None and follower not in after.isr and after.leader == leader
    assert cluster.stats["controller_epochs"] >= 2  # a new active controller did it
    resumed = [
        e
        for e in run.history.events
        if e.f == "send" and e.type == "ok" and e.time // 1_000_000 > up_ms
    ]
    assert len(resumed) > 20


def test_the_abstract_controller_stays_the_default() -> None:
    args = (1, 3, ReplicaConfig(), ControllerConfig(), DataTiming())
    abstract = Cluster(*args)
    assert isinstance(abstract.abstract, AbstractController)
    assert abstract.world.controller_ids == (0,) and abstract.voters == {}
    raft = Cluster(*args, voters=5)
    assert raft.abstract is None
    assert raft.world.controller_ids == tuple(VOTER_BASE + i for i in range(1, 6))


def test_metadata_quorum_down_acks_1_writes_and_reads_go_on() -> None:
    run = ClusterRun(ClusterRunConfig(seed=3, acks="1", nemesis=(), duration_ms=8000))
    run.start()
    cluster = run.cluster
    cluster.run_until(3000)
    cluster.world.metadata_quorum_down()
    cluster.run_until(6000)
    assert cluster.active_controller() is None
    during = [
        e for e in run.history.events if e.type == "ok" and 3100 < e.time // 1_000_000 <= 6000
    ]
    assert sum(e.f == "send" for e in during) > 100  # the partition leader needs no controller
    assert any(e.f == "poll" and e.value["t-0"] for e in during)
