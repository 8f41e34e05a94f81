"""Real controller processes on loopback for the integration tests.

`started_cluster` is how every test module starts one: `kraftlab cluster up` (the real CLI, in a
subprocess) in a temporary directory, and afterwards a SIGKILL of every PID recorded in
cluster.json that still runs our node, whatever the test did. `cluster` is 3 controllers for a
module, `broker_cluster` adds brokers 101-103 with fast fencing. Helpers poll conditions with
deadlines (never sleep to synchronise).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from harness.admin.client import AdminClient, AdminError
from harness.launcher import cluster as cl

T = TypeVar("T")

# Short timeouts so elections in tests take well under a second.
FAST = ["--config", "controller.quorum.election.timeout.ms=500",
        "--config", "controller.quorum.fetch.timeout.ms=1000"]


def kraftlab(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True, text=True, timeout=timeout_s, check=False,
    )


def poll(fn: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Call fn until it returns something truthy (exceptions count as 'not yet')."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
            last = value
        except (AdminError, OSError) as exc:
            last = exc
        time.sleep(0.02)  # poll interval
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class LiveCluster:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    @property
    def file(self) -> cl.ClusterFile:
        return cl.ClusterFile.load(self.data_dir)

    def client(self, node_id: int, timeout_s: float = 5.0) -> AdminClient:
        node = self.file.node(node_id)
        return AdminClient(node.host, node.admin_port, timeout_s)

    def ids(self) -> list[int]:
        return [n.id for n in self.file.nodes]

    def statuses(self, ids: list[int] | None = None) -> dict[int, dict[str, Any]]:
        return {i: self.client(i, 1.0).get_json("/quorum/status") for i in ids or self.ids()}

    def agreed_leader(self, ids: list[int] | None = None, timeout_s: float = 10) -> int:
        def check() -> int | None:
            views = self.statuses(ids)
            return cl.agreed_leader(dict(views), list(views))

        return poll(check, timeout_s, "an agreed leader")


def kill_recorded(data_dir: Path) -> None:
    try:
        cluster = cl.ClusterFile.load(data_dir)
    except cl.ClusterError:
        return
    for node in cluster.nodes:
        if cl.is_our_process(node.pid, node.config_file):
            assert node.pid is not None
            os.kill(node.pid, signal.SIGKILL)


@contextlib.contextmanager
def started_cluster(data_dir: Path, *, controllers: int = 3, brokers: int = 0,
                    configs: Sequence[str] = (), fast: bool = True) -> Iterator[LiveCluster]:
    """`kraftlab cluster up` in data_dir (FAST elections unless fast=False, then each of
    `configs` as a `--config`); every PID it recorded is SIGKILLed afterwards, whatever the
    test did. The one way every test module starts its cluster."""
    layout = ["--controllers", str(controllers)] + (["--brokers", str(brokers)] if brokers else [])
    settings = [arg for kv in configs for arg in ("--config", kv)]
    try:
        up = kraftlab("cluster", "up", *layout, "--data-dir", str(data_dir),
                      *(FAST if fast else []), *settings)
        assert up.returncode == 0, up.stderr + up.stdout
        yield LiveCluster(data_dir)
    finally:
        kill_recorded(data_dir)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with started_cluster(tmp_path_factory.mktemp("cluster")) as live:
        yield live


BROKER_SESSION_TIMEOUT_MS = 3000  # fast fencing for tests (Kafka's default: 9000)
BROKER_CONFIGS = (f"broker.session.timeout.ms={BROKER_SESSION_TIMEOUT_MS}",
                  "broker.heartbeat.interval.ms=500")


def broker_cluster(data_dir: Path, *configs: str) -> contextlib.AbstractContextManager[LiveCluster]:
    """3 controllers + brokers 101-103 with fast elections and fencing (then `configs`)."""
    return started_cluster(data_dir, brokers=3, configs=(*BROKER_CONFIGS, *configs))


def cli(c: LiveCluster, *args: str, timeout_s: float = 60) -> str:
    """Run `kraftlab ARGS --data-dir DIR` on the cluster; it must succeed; its stdout."""
    done = kraftlab(*args, "--data-dir", str(c.data_dir), timeout_s=timeout_s)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout
