"""The Kafka listener in a broker's config: `listeners=host:port,PLAINTEXT://host:port` (the
RPC listener, then the Kafka one), its round trip through the properties file, and
`kafka_port` in cluster.json for every broker (on by default) and for no controller."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.launcher import cluster as cl
from harness.runtime.config import ConfigError, Endpoint, from_properties, parse_properties

BASE = {
    "node.id": "101", "cluster.id": "c", "process.roles": "broker",
    "controller.quorum.voters": "1@127.0.0.1:9001", "metadata.log.dir": "/tmp/x",
    "kraftlab.admin.listeners": "1@127.0.0.1:8001,101@127.0.0.1:8101",
}  # fmt: skip


def test_plaintext_listener_is_parsed_and_round_trips() -> None:
    config = from_properties({**BASE, "listeners": "127.0.0.1:9101,PLAINTEXT://127.0.0.1:9092"})
    assert config.listener == Endpoint("127.0.0.1", 9101)
    assert config.kafka_listener == Endpoint("127.0.0.1", 9092)
    again = from_properties(parse_properties(config.to_properties()))
    assert (again.listener, again.kafka_listener) == (config.listener, config.kafka_listener)


def test_listener_without_plaintext_has_no_kafka_listener_and_rpc_is_required() -> None:
    assert from_properties({**BASE, "listeners": "127.0.0.1:9101"}).kafka_listener is None
    with pytest.raises(ConfigError, match="RPC listener"):
        from_properties({**BASE, "listeners": "PLAINTEXT://127.0.0.1:9092"})
    with pytest.raises(ConfigError, match="listeners"):
        from_properties({**BASE, "listeners": "127.0.0.1:9101,PLAINTEXT://nohost"})


def test_cluster_layout_gives_each_broker_a_distinct_kafka_port(tmp_path: Path) -> None:
    cluster = cl.create_cluster(tmp_path, 3, {}, brokers=3)
    kafka_ports = [n.kafka_port for n in cluster.brokers]
    assert all(n.kafka_port is None for n in cluster.controllers)
    all_ports = [p for n in cluster.nodes for p in (n.rpc_port, n.admin_port)] + kafka_ports
    assert None not in kafka_ports and len(set(all_ports)) == len(all_ports) == 15
    reloaded = cl.ClusterFile.load(tmp_path)
    assert [n.kafka_port for n in reloaded.brokers] == kafka_ports
    for node in cluster.brokers:
        text = Path(node.config_file).read_text()
        assert f"PLAINTEXT://127.0.0.1:{node.kafka_port}" in text
