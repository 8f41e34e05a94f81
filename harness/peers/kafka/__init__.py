"""The Apache Kafka peer kit: a real KRaft cluster from Maven Central on loopback
(docs/kafka-peer.md). install.py resolves and checks the jars, cluster.py lays out, formats,
starts, watches and stops the nodes, tools.py runs Kafka's own command-line tools."""
