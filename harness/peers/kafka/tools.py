"""Kafka's own command-line tools from the peer's install, against any bootstrap: the Apache
Kafka peer or a kraftlab cluster's Kafka listeners (docs/kafka-peer.md, "Kafka's tools against
kraftlab").

`command("kafka-topics", ["--bootstrap-server", B, "--list"])` is the java command line that
Kafka's `bin/kafka-topics.sh` runs (the same main class, on the install's classpath), with a
small client heap and the tools' log level (WARN to stderr, as Kafka's tools-log4j2.yaml).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from harness.peers.kafka.install import HERE, Install, require

# bin/<script>.sh -> its main class (Kafka 4.x bin/ scripts)
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-storage": "kafka.tools.StorageTool",
}
TOOLS_LOG4J2 = HERE / "tools-log4j2.properties"
# A tool is a short-lived client: a small heap, and C1 only (starts in about half the time).
TOOL_JVM = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            "-Djava.awt.headless=true")


class ToolError(ValueError):
    """An unknown tool name."""


def command(tool: str, args: Sequence[str], install: Install | None = None) -> list[str]:
    main = TOOLS.get(tool.removesuffix(".sh"))
    if main is None:
        raise ToolError(f"unknown tool {tool!r}; the tools are {', '.join(sorted(TOOLS))}")
    install = install or require()
    return [install.java, *TOOL_JVM, f"-Dlog4j2.configurationFile={TOOLS_LOG4J2}", "-cp",
            install.classpath, main, *args]


def run(tool: str, args: Sequence[str], *, timeout_s: float = 120.0, input_text: str | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the tool to completion (bounded by timeout_s) and return what it printed."""
    return subprocess.run(command(tool, args), capture_output=True, text=True,
                          timeout=timeout_s, input=input_text,
                          stdin=None if input_text is not None else subprocess.DEVNULL,
                          cwd=cwd)
