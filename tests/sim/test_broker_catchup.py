"""A simulated broker builds its replica only from an image that holds its own registration
(Kafka's initial catch-up, as harness/runtime/replica_manager.py does): after a restart the
simulated network can deliver an older metadata push after the registration answer. Until the
replica exists, requests for the partition are answered, not dropped."""

from __future__ import annotations

from typing import Any

import pytest

from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.scenario_run import (
    WORKLOAD_START_MS,
    ScenarioConfig,
    ScenarioRun,
    build_cluster,
)
from partition.replica import FetchRequest, FetchResponse
from quorum.metadata.errors import Errors


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards


def test_a_restarted_broker_waits_for_an_image_holding_its_registration() -> None:
    # A default-matrix cell where, before the fix, a broker restarted after its power loss and
    # built its core from a push older than its new registration.
    config = ScenarioConfig(seed=1, acks="1", nemesis="unclean-crash-losing-unflushed-tail",
                            fault_duration_ms=1000, start_jitter_ms=500, metadata="raft")
    run = ScenarioRun(config)
    built: list[tuple[int, int, int]] = []  # (broker, applied offset, broker epoch)
    had_core: dict[int, bool] = {}

    def watch(actor: Any) -> None:
        # After every input of every actor: a broker whose replica was just built.
        if actor.node_id not in run.cluster.brokers:
            return
        if actor.core is not None and not had_core.get(actor.node_id, False):
            built.append((actor.node_id, actor.applied_offset, actor.broker_epoch))
        had_core[actor.node_id] = actor.core is not None

    run.cluster.world.after_hooks.append(watch)
    run.run()
    restarts = [b for b in built if b[2] > min(e for _, _, e in built)]
    assert restarts, "the scenario must restart a broker (else this test checks nothing)"
    assert all(offset >= epoch for _, offset, epoch in built), built


def test_a_fetch_before_the_replica_exists_is_answered_not_dropped() -> None:
    # As harness/runtime/replica_manager.py: NOT_LEADER_OR_FOLLOWER, so the follower backs off
    # (replica.fetch.backoff.ms) instead of waiting for its request timeout.
    cluster = build_cluster(ScenarioConfig(seed=1))
    cluster.world.restart(1)  # up and registering: no replica until a push holds it
    broker = cluster.brokers[1]
    assert broker.core is None
    broker.outbox.clear()
    broker.handle(2, FetchRequest("tid", 0, 2, 0, request_id=7), 0)
    assert broker.outbox == [(2, FetchResponse("tid", 0, Errors.NOT_LEADER_OR_FOLLOWER, 0, 7))]


def test_replication_starts_without_waiting_for_a_request_timeout() -> None:
    # With seeded start times, a follower could fetch from the new leader before that broker
    # built its replica; dropped, the fetch cost the follower replica.socket.timeout.ms (1 s) and
    # held acks=all writes back (seed 3: first acknowledged write 800 ms after the workload
    # started). Now every seed's first write is acknowledged within a few fetch round trips.
    for seed in range(1, 9):
        result = ScenarioRun(ScenarioConfig(seed=seed, nemesis="none", metadata="raft",
                                            start_jitter_ms=500)).run()
        first_ok = min(e.time // 1_000_000 for e in result.history.events
                       if e.f == "send" and e.type == "ok")
        assert first_ok < WORKLOAD_START_MS + 100, (seed, first_ok)
