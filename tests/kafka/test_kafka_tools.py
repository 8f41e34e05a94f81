"""Apache Kafka's own command-line tools (the peer's install, harness/peers/kafka/tools.py: the
same main classes Kafka's bin/*.sh scripts run) against a kraftlab cluster's Kafka listeners.

Each tool either works, checked here against what kraftlab itself says (its Metadata, its
DescribeQuorum, its cluster file), or fails naming the API kraftlab lacks; the lacking ones are
pinned in GAPS and must be listed in docs/kafka-peer.md ("Kafka's tools against kraftlab"), so
the docs and the cluster cannot drift apart.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from harness.kafka.wire import Wire
from harness.peers.kafka import tools
from tests.kafka.conftest import BROKERS, KafkaCluster
from tests.peers.kafka_peer import require_install

pytestmark = [pytest.mark.integration, pytest.mark.kafka_peer]

DOC = Path(__file__).resolve().parents[2] / "docs" / "kafka-peer.md"
# tool -> (arguments after --bootstrap-server B, the Kafka API kraftlab does not serve)
GAPS = {
    "kafka-acls": (["--list"], "DESCRIBE_ACLS"),
    "kafka-reassign-partitions": (["--list"], "LIST_PARTITION_REASSIGNMENTS"),
}


def tool(name: str, *args: str, input_text: str | None = None, ok: bool = True
         ) -> subprocess.CompletedProcess[str]:
    require_install()
    done = tools.run(name, list(args), timeout_s=120, input_text=input_text)
    if ok:
        assert done.returncode == 0, f"{name} {args}: {done.stdout}{done.stderr}"
    return done


@pytest.fixture(scope="module")
def topic(kcluster: KafkaCluster) -> str:
    """A topic made by kafka-topics itself: 3 partitions, RF 3, min.insync.replicas=2."""
    name = f"tools-{uuid.uuid4().hex[:6]}"
    out = tool("kafka-topics", "--bootstrap-server", kcluster.bootstrap, "--create",
               "--topic", name, "--partitions", "3", "--replication-factor", "3",
               "--config", "min.insync.replicas=2").stdout
    assert f"Created topic {name}." in out
    return name


def test_kafka_topics_describe_and_list_show_what_metadata_says(kcluster: KafkaCluster,
                                                                  topic: str) -> None:
    out = tool("kafka-topics", "--bootstrap-server", kcluster.bootstrap, "--describe",
               "--topic", topic).stdout
    assert re.search(rf"Topic: {topic}\s+TopicId: \S+\s+PartitionCount: 3\s+"
                     r"ReplicationFactor: 3\s+Configs: min.insync.replicas=2", out), out
    with Wire(kcluster.kafka_port(BROKERS[0])) as w:
        md = w.metadata([topic]).topics[0]
    for p in md.partitions:
        row = re.search(rf"Partition: {p.partition_index}\s+Leader: (\d+)\s+Replicas: (\S+)\s+"
                        r"Isr: (\S+)", out)
        assert row, out
        assert int(row.group(1)) == p.leader_id
        assert [int(r) for r in row.group(2).split(",")] == list(p.replica_nodes)
        assert sorted(int(r) for r in row.group(3).split(",")) == sorted(p.isr_nodes)
    listed = tool("kafka-topics", "--bootstrap-server", kcluster.bootstrap, "--list").stdout
    assert topic in listed.split()


def test_kafka_metadata_quorum_names_kraftlabs_leader_voters_and_observers(
        kcluster: KafkaCluster) -> None:
    out = tool("kafka-metadata-quorum", "--bootstrap-server", kcluster.bootstrap, "describe",
               "--status").stdout
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", out, re.M))
    assert fields["ClusterId"] == kcluster.file.cluster_id
    with Wire(kcluster.kafka_port(BROKERS[0])) as w:
        q = w.describe_quorum().topics[0].partitions[0]
    assert int(fields["LeaderId"]) == q.leader_id
    assert int(fields["LeaderEpoch"]) >= q.leader_epoch  # a later answer never goes back
    assert sorted(v["id"] for v in json.loads(fields["CurrentVoters"])) == [1, 2, 3]
    assert sorted(o["id"] for o in json.loads(fields["CurrentObservers"])) == BROKERS
    rows = tool("kafka-metadata-quorum", "--bootstrap-server", kcluster.bootstrap, "describe",
                "--replication").stdout.splitlines()[1:]
    status = {int(r.split()[0]): r.split()[-1] for r in rows if r.strip()}
    assert sorted(status) == [1, 2, 3, *BROKERS]
    assert sum(1 for s in status.values() if s == "Leader") == 1
    assert all(status[b] == "Observer" for b in BROKERS)


def test_console_producer_consumer_groups_and_offsets_agree(kcluster: KafkaCluster,
                                                            topic: str) -> None:
    lines = [f"line-{i}" for i in range(30)]
    # Keyed, so the producer's partitioner (murmur2 of the key) spreads them over all three
    # partitions whatever the batching: unkeyed records go wherever the sticky partitioner's
    # batch is, often all to one partition, and a partition the consumer fetched nothing from
    # may have no committed offset to describe.
    tool("kafka-console-producer", "--bootstrap-server", kcluster.bootstrap, "--topic", topic,
         "--command-property", "acks=all", "--reader-property", "parse.key=true",
         "--reader-property", "key.separator=:",
         input_text="".join(f"k{i}:{v}\n" for i, v in enumerate(lines)))
    group = f"g-{topic}"
    out = tool("kafka-console-consumer", "--bootstrap-server", kcluster.bootstrap, "--topic",
               topic, "--from-beginning", "--max-messages", str(len(lines)), "--group", group,
               "--timeout-ms", "60000").stdout
    assert sorted(out.split()) == sorted(lines)
    ends = {}
    for row in tool("kafka-get-offsets", "--bootstrap-server", kcluster.bootstrap, "--topic",
                    topic).stdout.split():
        name, part, end = row.rsplit(":", 2)
        assert name == topic
        ends[int(part)] = int(end)
    assert sorted(ends) == [0, 1, 2] and sum(ends.values()) == len(lines)
    assert all(ends.values()), ends  # every partition got some of the keys
    assert group in tool("kafka-consumer-groups", "--bootstrap-server", kcluster.bootstrap,
                         "--list").stdout.split()
    described = tool("kafka-consumer-groups", "--bootstrap-server", kcluster.bootstrap,
                     "--describe", "--group", group).stdout
    for part, end in ends.items():
        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG: the group committed the end
        assert re.search(rf"{group}\s+{topic}\s+{part}\s+{end}\s+{end}\s+0\s", described), \
            described
    deleted = tool("kafka-consumer-groups", "--bootstrap-server", kcluster.bootstrap,
                   "--delete", "--group", group).stdout
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted


def test_kafka_leader_election_says_a_led_preferred_replica_needs_no_election(
        kcluster: KafkaCluster, topic: str) -> None:
    """ELECTION_NOT_NEEDED for every partition whose preferred replica leads (Kafka's
    LeaderElectionCommand prints it as "Valid replica already elected")."""
    with Wire(kcluster.kafka_port(BROKERS[0])) as w:
        md = w.metadata([topic]).topics[0]
    led = [p.partition_index for p in md.partitions if p.leader_id == p.replica_nodes[0]]
    assert led, "a fresh topic's partitions are led by their preferred replicas"
    for part in led[:1]:
        out = tool("kafka-leader-election", "--bootstrap-server", kcluster.bootstrap,
                   "--election-type", "PREFERRED", "--topic", topic, "--partition",
                   str(part)).stdout
        assert f"Valid replica already elected for partitions {topic}-{part}" in out, out


def test_kafka_log_dirs_and_configs_describe_each_brokers_replicas(kcluster: KafkaCluster,
                                                                   topic: str) -> None:
    out = tool("kafka-log-dirs", "--bootstrap-server", kcluster.bootstrap, "--describe",
               "--topic-list", topic).stdout
    doc = json.loads(out.strip().splitlines()[-1])
    assert sorted(b["broker"] for b in doc["brokers"]) == BROKERS
    for b in doc["brokers"]:
        (logdir,) = b["logDirs"]
        assert logdir["error"] is None
        assert sorted(p["partition"] for p in logdir["partitions"]) == [
            f"{topic}-{i}" for i in range(3)]
    tool("kafka-configs", "--bootstrap-server", kcluster.bootstrap, "--entity-type", "topics",
         "--entity-name", topic, "--alter", "--add-config", "retention.ms=3600000")
    described = tool("kafka-configs", "--bootstrap-server", kcluster.bootstrap,
                     "--entity-type", "topics", "--entity-name", topic, "--describe").stdout
    assert "retention.ms=3600000 sensitive=false" in described
    assert "min.insync.replicas=2 sensitive=false" in described


def test_kafka_cluster_tool_lists_kraftlabs_id_and_unfenced_brokers(
        kcluster: KafkaCluster) -> None:
    out = tool("kafka-cluster", "cluster-id", "--bootstrap-server", kcluster.bootstrap).stdout
    assert out.strip() == f"Cluster ID: {kcluster.file.cluster_id}"
    rows = tool("kafka-cluster", "list-endpoints", "--bootstrap-server",
                kcluster.bootstrap).stdout.splitlines()[1:]
    seen = {int(r.split()[0]): r.split() for r in rows if r.strip()}
    assert sorted(seen) == BROKERS
    for b, row in seen.items():
        assert row[1:3] == ["127.0.0.1", str(kcluster.kafka_port(b))]
        assert "unfenced" in row


def test_kafka_broker_api_versions_shows_what_kraftlab_advertises(
        kcluster: KafkaCluster) -> None:
    out = tool("kafka-broker-api-versions", "--bootstrap-server", kcluster.bootstrap).stdout
    for b in BROKERS:
        assert f"127.0.0.1:{kcluster.kafka_port(b)} (id: {b} rack: null" in out
    assert re.search(r"Produce\(0\): \d+ to \d+ \[usable: \d+\]", out), out
    assert re.search(r"DescribeQuorum\(55\): \d+ to \d+ \[usable: \d+\]", out), out


@pytest.mark.parametrize("name", sorted(GAPS))
def test_a_tool_kraftlab_cannot_serve_names_the_missing_api_and_the_docs_list_it(
        kcluster: KafkaCluster, name: str) -> None:
    args, api = GAPS[name]
    done = tool(name, "--bootstrap-server", kcluster.bootstrap, *args, ok=False)
    assert done.returncode != 0
    assert f"UnsupportedVersionException: The node does not support {api}" in (
        done.stdout + done.stderr)
    table = DOC.read_text()
    assert re.search(rf"^\| `{name}`.*`{api}`", table, re.M), f"{name} missing from {DOC.name}"
