"""Real clusters on loopback for the tests: starting one, reading it, healing it, tearing it down.

`started_cluster` is how every cluster a test uses is started: `kraftlab cluster up` (the real
CLI, in a subprocess) in a directory, and afterwards a SIGKILL of every PID recorded in
cluster.json that still runs our node, whatever the test did. `broker_cluster` is 3 controllers
+ brokers 101-103 with fast elections and fencing. The clusters several test modules share are
tests/conftest.py's session fixtures; `heal` hands each module such a cluster with every node
running, no fault in force and every partition fully replicated, whatever the module before it
did. Helpers poll conditions with deadlines (never sleep to synchronise).
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

from harness.admin.client import AdminClient, AdminError
from harness.kafka.wire import Wire
from harness.launcher import cluster as cl

T = TypeVar("T")

BROKERS = [101, 102, 103]
CONTROLLERS = [1, 2, 3]

# Short timeouts so elections in tests take well under a second.
FAST = ["--config", "controller.quorum.election.timeout.ms=500",
        "--config", "controller.quorum.fetch.timeout.ms=1000"]

BROKER_SESSION_TIMEOUT_MS = 3000  # fast fencing for tests (Kafka's default: 9000)
BROKER_CONFIGS = (f"broker.session.timeout.ms={BROKER_SESSION_TIMEOUT_MS}",
                  "broker.heartbeat.interval.ms=500")
RETENTION_CHECK_INTERVAL_MS = 300  # Kafka's default: 5 minutes
SEGMENT_DELETE_DELAY_MS = 1500  # Kafka's default: 60 s
# The shared broker cluster (tests/conftest.py `brokers`): settings that let the modules on it
# see in seconds what Kafka's defaults would take minutes to show, and change nothing else.
SHARED_BROKER_CONFIGS = (
    # Groups (tests/kafka/test_groups.py): fewer offsets partitions than Kafka's 50 for 2 cores,
    # and a short initial rebalance delay (Kafka's test default is 0).
    "offsets.topic.num.partitions=10", "group.initial.rebalance.delay.ms=300",
    # Retention (tests/node/test_log_retention_processes.py): segments past a topic's retention
    # deleted within a check interval, a deleted topic's directories gone after the delay.
    f"log.retention.check.interval.ms={RETENTION_CHECK_INTERVAL_MS}",
    f"log.segment.delete.delay.ms={SEGMENT_DELETE_DELAY_MS}",
)


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

    def cli(self, *args: str, timeout_s: float = 60) -> str:
        """Run `kraftlab ARGS --data-dir DIR` on the cluster; it must succeed; its stdout."""
        done = kraftlab(*args, "--data-dir", str(self.data_dir), timeout_s=timeout_s)
        assert done.returncode == 0, done.stderr + done.stdout
        return done.stdout

    # Brokers 101-103 and their Kafka listeners.

    def kafka_port(self, broker_id: int) -> int:
        port = self.file.node(broker_id).kafka_port
        assert port is not None
        return port

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.kafka_port(b)}" for b in BROKERS)

    def create_topic(self, name: str, partitions: int = 1, *configs: str,
                     replication_factor: int = 3) -> None:  # fmt: skip
        """`kraftlab topic create`, then wait until Metadata names a leader for every partition."""
        extra = [a for kv in configs for a in ("--config", kv)]
        # RF 3 needs all three brokers unfenced. The cluster runs with a 3 s session timeout, so
        # on a loaded machine a broker restarted by an earlier test (or one that missed its
        # heartbeats) may be fenced for a moment; wait for it as an operator would.
        cl.wait_for_brokers(self.file, BROKERS, 60)
        self.cli("topic", "create", name, "--partitions", str(partitions),
                 "--replication-factor", str(replication_factor), *extra)  # fmt: skip

        def ready() -> bool:
            with Wire(self.kafka_port(BROKERS[0])) as w:
                md = w.metadata([name])
            t = md.topics[0]
            return t.error_code == 0 and all(p.leader_id >= 0 for p in t.partitions) and len(
                t.partitions) == partitions  # fmt: skip

        poll(ready, 20, f"topic {name} with leaders in Metadata")

    def leader(self, topic: str, partition: int = 0) -> tuple[int, int]:
        """(leader id, leader epoch) from Metadata."""
        with Wire(self.kafka_port(BROKERS[0])) as w:
            p = w.metadata([topic]).topics[0].partitions[partition]
        return p.leader_id, p.leader_epoch

    def partition(self, topic: str, partition: int = 0, via: int = 1) -> dict[str, Any]:
        """One partition as the metadata image has it (GET /topics/{topic} on node `via`)."""
        parts = self.client(via, 2.0).get_json(f"/topics/{topic}")["partitions"]
        p: dict[str, Any] = parts[partition]
        return p

    def replica_view(self, broker: int, topic: str, partition: int = 0) -> dict[str, Any] | None:
        """Broker `broker`'s own row for its replica of topic-partition (GET /partitions)."""
        for r in self.client(broker, 2.0).get_json("/partitions"):
            if r["topic"] == topic and r.get("partition", 0) == partition:
                return dict(r)
        return None

    def pid(self, node_id: int) -> int:
        node = self.file.node(node_id)
        assert cl.is_our_process(node.pid, node.config_file), f"node {node_id} is not running"
        assert node.pid is not None
        return node.pid


def cli(c: LiveCluster, *args: str, timeout_s: float = 60) -> str:
    """Run `kraftlab ARGS --data-dir DIR` on the cluster; it must succeed; its stdout."""
    return c.cli(*args, timeout_s=timeout_s)


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
    test did. The one way every test cluster is started."""
    layout = ["--controllers", str(controllers)] + (["--brokers", str(brokers)] if brokers else [])
    settings = [arg for kv in configs for arg in ("--config", kv)]
    try:
        up = kraftlab("cluster", "up", *layout, "--data-dir", str(data_dir),
                      *(FAST if fast else []), *settings)
        assert up.returncode == 0, up.stderr + up.stdout
        yield LiveCluster(data_dir)
    finally:
        kill_recorded(data_dir)


def broker_cluster(data_dir: Path, *configs: str) -> contextlib.AbstractContextManager[LiveCluster]:
    """3 controllers + brokers 101-103 with fast elections and fencing (then `configs`)."""
    return started_cluster(data_dir, brokers=3, configs=(*BROKER_CONFIGS, *configs))


def heal(c: LiveCluster, timeout_s: float = 120) -> None:
    """Undo whatever a module did to a shared cluster: resume paused nodes, start the ones that
    are not running (controllers first, then brokers, waited for by their new registration),
    clear every node's link faults and clock, then wait for an agreed active controller, every
    broker registered and unfenced, and no partition offline or under-replicated."""
    data_dir = c.data_dir.resolve()
    cluster = c.file
    down = []
    for node in cluster.nodes:
        if cl.is_our_process(node.pid, node.config_file):
            cl.signal_node(node, signal.SIGCONT)  # a no-op unless it was paused
        else:
            down.append(node)
    controllers = [n.id for n in cluster.controllers]
    brokers = [n.id for n in cluster.brokers]
    for node in (n for n in down if n.role == "controller"):
        node.pid = None
        cl.start_node(cluster, data_dir, node)
    cl.wait_for_leader(cluster, controllers, timeout_s)
    stale = cl.broker_epochs(cluster, timeout_s)
    for node in (n for n in down if n.role == "broker"):
        node.pid = None
        cl.start_node(cluster, data_dir, node)

    def cleared() -> bool:
        statuses = []
        for node in cluster.nodes:
            client = AdminClient(node.host, node.admin_port, 2.0)
            try:
                statuses += [client.request("DELETE", "/nemesis/links")[0],
                             client.request("DELETE", "/nemesis/clock")[0]]
            finally:
                client.close()
        return all(s == 200 for s in statuses)

    poll(cleared, timeout_s, "every node's links and clock cleared")
    cl.wait_for_leader(cluster, controllers, timeout_s)
    restarted = {n.id: stale[n.id] for n in down if n.role == "broker" and n.id in stale}
    cl.wait_for_brokers(cluster, brokers, timeout_s, newer_than=restarted)

    def healthy() -> bool:
        view = cl.broker_view(cluster)
        health = (view or {}).get("partition_health")
        return (health is not None and not health["offline"] and not health["under_replicated"]
                and all(not b["fenced"] for b in view.get("brokers", [])))  # fmt: skip

    poll(healthy, timeout_s, "no partition offline or under-replicated, no broker fenced")
