"""A simulated broker builds its replica only from an image that holds its own registration
(Kafka's initial catch-up, as harness/runtime/replica_manager.py does): after a restart the
simulated network can deliver an older metadata push after the registration answer."""

from __future__ import annotations

import pytest

import harness.sim.actors.data_world as dw
from harness.sim.runs.data_simulation import DataRunConfig, run_data
from harness.sim.runs.runner import quiet_logging


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards


def test_a_restarted_broker_waits_for_an_image_holding_its_registration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[tuple[int, int, int]] = []  # (broker, applied offset, broker epoch)
    on_metadata = dw.Broker._on_metadata

    def watch(self: dw.Broker, push: dw.MetadataPush) -> None:
        had_core = self.core is not None
        on_metadata(self, push)
        if not had_core and self.core is not None:
            built.append((self.node_id, self.applied_offset, self.broker_epoch))

    monkeypatch.setattr(dw.Broker, "_on_metadata", watch)
    # A default-matrix cell where, before the fix, a broker restarted after its power loss and
    # built its core from a push older than its new registration.
    config = DataRunConfig(seed=1, acks="1", nemesis="unclean-crash-losing-unflushed-tail",
                           fault_duration_ms=1000, start_jitter_ms=500, metadata="raft")
    run_data(config)
    restarts = [b for b in built if b[2] > min(e for _, _, e in built)]
    assert restarts, "the scenario must restart a broker (else this test checks nothing)"
    assert all(offset >= epoch for _, offset, epoch in built), built
