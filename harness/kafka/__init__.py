"""The Kafka wire protocol on kraftlab brokers: a PLAINTEXT listener (server.py) answering
ApiVersions, Metadata, Produce, Fetch, ListOffsets and InitProducerId (handlers.py) through the
broker's ReplicaManager. See docs/kafka-protocol.md."""
