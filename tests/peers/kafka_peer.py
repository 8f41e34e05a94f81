"""A real Apache Kafka KRaft cluster (harness/peers/kafka, docs/kafka-peer.md) for the tests that
hold kraftlab up against Kafka itself: the peer kit's own tests, Kafka's command-line tools and
the differential protocol tests.

`kafka_peer` is session-scoped and is started and stopped
through the CLI a user runs (`kraftlab peer kafka up|down --data-dir D`), so the fixture is also
the test of that path. It is registered suite-wide by tests/conftest.py. It is not skipped when
Kafka is missing: the suite fails, saying to run `bash .ci/install`, which installs it.

It is laid out as kraftlab's shared test cluster is (tests/live.py): controllers 1-3 and brokers
101-103 as six JVMs (the "split" layout), so the two systems' answers can be compared node id for
node id. It runs with the settings the kraftlab test cluster runs with (tests/live.py
BROKER_CONFIGS and SHARED_BROKER_CONFIGS) where Kafka has them, so the two answer under one
configuration. Its JVMs start with libfaketime preloaded (`up --faketime`), in step unless a
test skews one (tests/peers/test_z_kafka_clock.py, which puts it back), and its brokers' log
dirs are on the lazy file system (`up --lazyfs`, harness/peers/lazyfs), so the power loss of
tests/peers/test_z_kafka_power_loss.py (the last module to use it) runs on this peer too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.kafka.wire import Wire
from harness.peers.kafka import cluster as pk
from harness.peers.kafka import install as inst
from tests.live import BROKER_CONFIGS, kraftlab, poll

PEER_CONFIGS = (*BROKER_CONFIGS, "offsets.topic.num.partitions=10",
                "group.initial.rebalance.delay.ms=300")


def require_install() -> inst.Install:
    found = inst.installed()
    if found is None:
        pytest.fail(f"Apache Kafka {inst.KAFKA_VERSION} is not installed in "
                    f"{inst.install_dir()}: run `bash .ci/install`", pytrace=False)
    return found


@dataclass
class KafkaPeer:
    data_dir: Path

    @property
    def file(self) -> pk.PeerFile:
        return pk.PeerFile.load(self.data_dir)

    @property
    def brokers(self) -> list[int]:
        return [n.id for n in self.file.brokers]

    @property
    def bootstrap(self) -> str:
        return self.file.bootstrap

    def kafka_port(self, node_id: int) -> int:
        port = self.file.node(node_id).kafka_port
        assert port is not None
        return port

    def cli(self, verb: str, *args: str, timeout_s: float = 120) -> str:
        """`kraftlab peer kafka VERB ARGS` on this peer; it must succeed; its stdout."""
        where = () if verb == "tool" else ("--data-dir", str(self.data_dir))
        done = kraftlab("peer", "kafka", verb, *where, *args, timeout_s=timeout_s)
        assert done.returncode == 0, done.stderr + done.stdout
        return done.stdout

    def status(self) -> dict[str, Any]:
        return json.loads(self.cli("status", "--json"))  # type: ignore[no-any-return]

    def wire(self, node_id: int | None = None) -> Wire:
        running = [n.id for n in self.file.brokers if pk.running(n)]
        return Wire(self.kafka_port(node_id if node_id is not None else running[0]))

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     configs: dict[str, str] | None = None) -> None:
        """CreateTopics on a broker, then wait until Metadata shows every partition led."""
        from kafka.protocol.admin import CreateTopicsRequest  # type: ignore[import-untyped]

        cls = CreateTopicsRequest[5]
        req = cls(topics=[cls.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replication_factor,
            assignments=[], configs=[cls.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                                     for k, v in (configs or {}).items()])],
            timeout_ms=30000, validate_only=False)  # fmt: skip
        with self.wire() as w:
            answer = w.call(req)
        assert answer.topics[0].error_code == 0, answer

        def led() -> bool:
            with self.wire() as w:
                t = w.metadata([name]).topics[0]
            return t.error_code == 0 and len(t.partitions) == partitions and all(
                p.leader_id >= 0 for p in t.partitions)

        poll(led, 30, f"Kafka topic {name} with leaders in Metadata")

    def leader(self, topic: str, partition: int = 0) -> tuple[int, int]:
        """(leader id, leader epoch) from Metadata."""
        with self.wire() as w:
            p = w.metadata([topic]).topics[0].partitions[partition]
        return p.leader_id, p.leader_epoch


@pytest.fixture(scope="session")
def kafka_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaPeer]:
    require_install()
    data_dir = tmp_path_factory.mktemp("kafka-peer")
    up = kraftlab("peer", "kafka", "up", "--layout", "split", "--faketime", "--lazyfs",
                  "--data-dir", str(data_dir),
                  *[a for kv in PEER_CONFIGS for a in ("--config", kv)], timeout_s=180)
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        yield KafkaPeer(data_dir)
    finally:
        if pk.PeerFile.path_in(data_dir).exists():
            down = kraftlab("peer", "kafka", "down", "--data-dir", str(data_dir), timeout_s=180)
            left = [n.id for n in pk.PeerFile.load(data_dir).nodes if pk.running(n)]
            if left:  # whatever the CLI left, stopped by PID: a session leaves no JVM behind
                pk.down(data_dir, force=True)
            assert down.returncode == 0 and not left, down.stderr + down.stdout
