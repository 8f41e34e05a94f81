"""A real 3-controller + 3-broker cluster on loopback for the Kafka protocol tests, and a raw
Kafka wire client (harness/kafka/wire.py: kafka-python's message classes over a plain socket)
to send requests the client libraries would never send (bad sequences, stale leader epochs,
garbage).

The cluster is shared by every test in tests/kafka (session scope) and torn down by PID
(tests/integration/conftest.broker_cluster) whatever the tests did.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.kafka.wire import Wire
from harness.launcher import cluster as cl
from tests.integration.conftest import LiveCluster, broker_cluster, kraftlab, poll

BROKERS = [101, 102, 103]


class KafkaCluster(LiveCluster):
    def kafka_port(self, broker_id: int) -> int:
        port = self.file.node(broker_id).kafka_port
        assert port is not None
        return port

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.kafka_port(b)}" for b in BROKERS)

    def cli(self, *args: str, timeout_s: float = 60) -> str:
        done = kraftlab(*args, "--data-dir", str(self.data_dir), timeout_s=timeout_s)
        assert done.returncode == 0, done.stderr + done.stdout
        return done.stdout

    def create_topic(self, name: str, partitions: int = 1, *configs: str) -> None:
        extra = [a for kv in configs for a in ("--config", kv)]
        # RF 3 needs all three brokers unfenced. The cluster runs with a 3 s session timeout, so
        # on a loaded machine a broker restarted by an earlier test (or one that missed its
        # heartbeats) may be fenced for a moment; wait for it as an operator would.
        cl.wait_for_brokers(self.file, BROKERS, 60)
        self.cli("topic", "create", name, "--partitions", str(partitions),
                 "--replication-factor", "3", *extra)  # fmt: skip

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

    def pid(self, node_id: int) -> int:
        node = self.file.node(node_id)
        assert cl.is_our_process(node.pid, node.config_file), f"node {node_id} is not running"
        assert node.pid is not None
        return node.pid


@pytest.fixture(scope="session")
def kcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    # Groups (test_groups.py): fewer offsets partitions than Kafka's 50 for 2 cores, and a
    # short initial rebalance delay (Kafka's test default is 0).
    with broker_cluster(tmp_path_factory.mktemp("kafka"), "offsets.topic.num.partitions=10",
                        "group.initial.rebalance.delay.ms=300") as live:
        yield KafkaCluster(live.data_dir)
