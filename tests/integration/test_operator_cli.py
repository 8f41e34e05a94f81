"""Operator commands on real processes: `kraftlab config show`, validation of
`cluster up --config` (a bad key or value starts nothing and names the key), `cluster logs ID`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.launcher import cluster as cl
from harness.runtime.config import TUNABLES
from quorum.metadata.configs import TOPIC_CONFIG_DEFAULTS
from tests.live import LiveCluster, kraftlab, started_cluster

pytestmark = pytest.mark.integration


def test_config_show_lists_every_key_with_its_default_and_scope() -> None:
    done = kraftlab("config", "show")
    assert done.returncode == 0, done.stderr
    table = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[1:]
             if line.strip() and not line.startswith("node keys")}
    assert set(table) == set(TUNABLES) | set(TOPIC_CONFIG_DEFAULTS) | set(cl.LAUNCHER_KEYS)
    assert table["kraftlab.bind.host"] == ["127.0.0.1", "launcher"]
    assert table["kraftlab.admin.require.token"] == ["false", "controller,broker"]
    assert table["controller.quorum.election.timeout.ms"] == ["1000", "controller,broker"]
    assert table["replica.lag.time.max.ms"] == ["30000", "broker"]
    assert table["auto.leader.rebalance.enable"] == ["true", "controller"]
    assert table["min.insync.replicas"] == ["1", "topic"]
    assert table["unclean.leader.election.enable"] == ["false", "topic"]
    # The data logs' settings are read by brokers only (controllers host no data logs).
    assert table["log.segment.bytes"] == [str(1 << 30), "broker"]
    assert table["log.retention.check.interval.ms"] == ["300000", "broker"]
    assert table["message.max.bytes"] == ["1048588", "broker"]


@pytest.mark.parametrize(("override", "message"), [
    ("no.such.key=1", "unknown config 'no.such.key'"),
    ("broker.session.timeout.ms=abc", "broker.session.timeout.ms must be an integer"),
    ("broker.session.timeout.ms=-5", "broker.session.timeout.ms must be >= 1"),
    ("replica.lag.time.max.ms=true", "replica.lag.time.max.ms must be an integer"),
    ("auto.leader.rebalance.enable=2", "auto.leader.rebalance.enable must be true or false"),
    ("min.insync.replicas=2", "min.insync.replicas is a topic config"),
    ("novalue", "--config expects key=value"),
    ("kraftlab.bind.host=localhost", "kraftlab.bind.host must be an IPv4 address"),
    ("kraftlab.bind.host=0.0.0.0", "not 0.0.0.0"),
    # Per-node overrides (--controllers 1, no brokers unless the case adds them).
    ("broker.104.rack=a", "broker.104.rack: no broker 104 in this cluster; brokers are none"),
    ("controller.2.kraftlab.raft.seed=3", "no controller 2 in this cluster; controllers are [1]"),
    ("broker.1.rack=a", "node 1 is a controller, not a broker"),
    ("controller.1.rack=a", "only brokers have a rack"),
    ("controller.1.no.such.key=1", "controller.1.no.such.key: unknown config 'no.such.key'"),
    ("controller.1.broker.session.timeout.ms=0",
     "controller.1.broker.session.timeout.ms: broker.session.timeout.ms must be >= 1"),
    ("controller.1.replica.lag.time.max.ms=100", "is read by broker nodes only"),
    ("controller.1.kraftlab.bind.host=127.0.0.3", "kraftlab.bind.host is cluster-wide"),
    # Broker log settings: checked up front (the broker would refuse them at start).
    ("log.flush.interval.messages=0", "log.flush.interval.messages must be >= 1"),
    ("log.retention.ms=-2", "log.retention.ms must be >= -1 (-1: unlimited)"),
    # Any negative log.retention.bytes is unlimited (as retention.bytes); past Java's long is not.
    ("log.retention.bytes=-9223372036854775809", "log.retention.bytes must be a 64-bit integer"),
    ("log.retention.hours=-1", "log.retention.hours must be in [0, 2147483647]"),
    # Integers are ASCII `-?[0-9]+`: Python's int() would take these.
    ("broker.session.timeout.ms=9_000", "broker.session.timeout.ms must be an integer (ASCII"),
    ("broker.session.timeout.ms=\uff19\uff10\uff10\uff10", "broker.session.timeout.ms must be an integer"),
    ("log.segment.bytes=10", "log.segment.bytes is the broker default of topic config "
                             "segment.bytes: invalid value '10'"),
    ("controller.1.log.segment.bytes=4096", "log.segment.bytes is read by broker nodes only"),
    ("controller.1.message.max.bytes=2048", "message.max.bytes is read by broker nodes only"),
])
def test_cluster_up_rejects_bad_config_and_starts_nothing(
    tmp_path: Path, override: str, message: str
) -> None:
    done = kraftlab("cluster", "up", "--controllers", "1", "--data-dir", str(tmp_path),
                    "--config", override, timeout_s=20)
    assert done.returncode == 1
    assert message in done.stderr, done.stderr
    assert not (tmp_path / "cluster.json").exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("override", "message"), [
    ("broker.102.auto.leader.rebalance.enable=false", "is read by controller nodes only"),
    ("broker.101.rack=a b", "a rack is 1-64 characters"),
    ("broker.103.rack=a", "no broker 103 in this cluster; brokers are [101, 102]"),
])
def test_per_node_overrides_are_checked_against_the_brokers_too(
    tmp_path: Path, override: str, message: str
) -> None:
    done = kraftlab("cluster", "up", "--controllers", "1", "--brokers", "2",
                    "--data-dir", str(tmp_path), "--config", override, timeout_s=20)
    assert done.returncode == 1
    assert message in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def one(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with started_cluster(tmp_path_factory.mktemp("operator"), controllers=1,
                         configs=["auto.leader.rebalance.enable=false"]) as live:
        yield live


def test_cluster_logs_prints_the_node_log_as_json_lines(one: LiveCluster) -> None:
    done = kraftlab("cluster", "logs", "1", "--data-dir", str(one.data_dir))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert events, done.stdout[:500]
    assert done.stdout == Path(one.file.node(1).log_file).read_text()[: len(done.stdout)]
    unknown = kraftlab("cluster", "logs", "7", "--data-dir", str(one.data_dir))
    assert unknown.returncode == 1 and "no node 7" in unknown.stderr
