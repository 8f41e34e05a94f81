"""The Kafka wire protocol on kraftlab brokers: a PLAINTEXT listener (server.py) answering
ApiVersions, Metadata, Produce, Fetch, ListOffsets and InitProducerId (handlers.py), the admin
and config APIs (admin_handlers.py, config_handlers.py), through the broker's ReplicaManager;
FindCoordinator and the classic group protocol through its GroupHost (group_handlers.py); the
replication APIs of Kafka's tools (ops_handlers.py).
It sees the node as a `BrokerNode` (harness/runtime/broker.py); harness.node starts it.
See docs/kafka-protocol.md."""
