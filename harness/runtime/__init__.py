"""The asyncio runtime of one node: the Raft driver and transport wiring (node.py), the broker
(broker.py, replica_manager.py), controller RPCs, native data requests, metrics and status.
The helpers see the node through the protocols of context.py, never node.py; the listeners
(harness.kafka, harness.admin) are composed beside the node by harness.node, and this package
imports neither. It drives the sans-IO cores through harness.drive; it never imports harness.sim."""
