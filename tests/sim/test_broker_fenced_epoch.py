"""A simulated broker keeps a quorum-mode replica's fenced epoch across restarts, as the node's
ReplicaManager does (partition.replica.effects.SendReplicaPosition): persisted before the
position report leaves, and handed back to the core rebuilt after a restart, so the replica
never follows a leader of an epoch earlier than one it voted at."""

from __future__ import annotations

import pytest

from harness.sim.actors.broker import Broker
from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.scenario_run import ScenarioConfig, ScenarioRun
from quorum.controller.messages import ReportReplicaPositionRequest


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards


def _spy_reports(broker: Broker, seen: list[int]) -> None:
    """Record, as each position report leaves, the fenced epoch on disk."""
    send = broker.send_replica_position

    def spy(request: ReportReplicaPositionRequest) -> None:
        queued = len(broker.outbox)
        send(request)
        if len(broker.outbox) > queued:  # queued for a known controller, shipped after this
            assert broker.outbox[-1][1].request == request
        assert broker.log is not None
        # Durable before the vote leaves: the file already holds at least this epoch.
        assert broker.log.read_fenced_epoch() >= request.leader_epoch
        seen.append(request.leader_epoch)

    broker.send_replica_position = spy  # type: ignore[method-assign]


def test_quorum_mode_fenced_epoch_survives_restarts() -> None:
    sim = ScenarioRun(ScenarioConfig(seed=1, replication_mode="quorum", acks="all",
                                       min_insync_replicas=2, nemesis="kill-leader",
                                       fault_duration_ms=3000))
    cluster = sim.cluster
    reports: dict[int, list[int]] = {b: [] for b in cluster.brokers}
    for b, broker in cluster.brokers.items():
        _spy_reports(broker, reports[b])
    result = sim.run()
    assert result.violations == {} and result.lost_writes == 0
    voted = {b: max(epochs) for b, epochs in reports.items() if epochs}
    assert voted, "the leader kill never fenced the partition: nothing to persist"
    for b, epoch in voted.items():
        broker = cluster.brokers[b]
        assert broker.log is not None
        assert broker.log.read_fenced_epoch() == epoch == broker.fenced_epoch
    # A rebuilt replica (log recovery) and a power-crashed broker both get it back.
    b, epoch = max(voted.items())
    broker = cluster.brokers[b]
    broker.restart_replica(lose_unflushed=True)
    assert broker.fenced_epoch == epoch and broker.core is None
    cluster.push_metadata()
    cluster.run_until(cluster.world.now_ms + 1000)
    assert broker.core is not None and broker.core.fenced_epoch >= epoch
    cluster.world.crash(b)  # power loss
    assert broker.core is None
    cluster.world.restart(b)
    assert broker.fenced_epoch == epoch
    cluster.run_until(cluster.world.now_ms + 3000)
    assert broker.core is not None and broker.core.fenced_epoch >= epoch


def test_isr_mode_reports_no_position_and_persists_nothing() -> None:
    sim = ScenarioRun(ScenarioConfig(seed=1, replication_mode="isr", acks="all",
                                       min_insync_replicas=2, nemesis="kill-leader",
                                       fault_duration_ms=3000))
    result = sim.run()
    assert result.violations == {}
    for broker in sim.cluster.brokers.values():
        assert broker.log is not None and broker.log.read_fenced_epoch() == -1
        assert broker.fenced_epoch == -1

