"""Clusters for the real-process runs of this package.

`data_dir`: a test's own cluster directory (for a run that lays out and brings up its own
cluster); afterwards every PID recorded there that still runs our node is SIGKILLed, whatever
the run did.

`queue_cluster`: 3 controllers + brokers 101-103 as `kraftlab jepsen run --workload queue` lays
them out (DEFAULT_OVERRIDES, the queue workload's fast fencing and ISR shrink), started once for
test_run_queue.py, test_run_queue_raft.py and test_run_staged.py (starting one takes ~10 s).
Every run creates its own topic, so runs never see each other's values; every run heals what its
nemesis did (`heal_all`: links cleared, stopped nodes resumed, killed nodes started) and the next
run waits for every broker to be registered and unfenced before it starts. A finalizer SIGKILLs
every PID of the cluster still alive, whatever happened.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from harness.jepsen.nemesis import ClusterNemesis
from harness.jepsen.runner import RunOptions, bring_up
from tests.live import kill_recorded


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "cluster"
    yield path
    kill_recorded(path)  # nothing to do where no cluster.json was written


@pytest.fixture(scope="package")
def queue_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("queue-cluster")
    try:
        bring_up(RunOptions(out_dir=data_dir, workload="queue"), data_dir)
        yield data_dir
    finally:
        kill_recorded(data_dir)


def healed_then_written(seconds: float) -> Callable[[ClusterNemesis], Awaitable[bool]]:
    """`RunOptions.stop_when`: the run's one fault has been healed (the nemesis's heal returns
    once its fault is undone: links cleared, stopped nodes resumed, killed nodes started again),
    and the workload has written for `seconds` since, so the new leader took writes (at the
    offsets the old leader kept, for KIP-101's divergence). The run ends there instead of idling
    to its time limit. For one fault per run: its `quiet_s` must outlast the time limit."""
    healed_at: list[float] = []

    async def condition(nemesis: ClusterNemesis) -> bool:
        if nemesis.applied == 0 or nemesis.active is not None:
            return False
        if not healed_at:
            healed_at.append(time.monotonic())
        return time.monotonic() - healed_at[0] >= seconds

    return condition
