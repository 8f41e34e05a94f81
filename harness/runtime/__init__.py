"""The asyncio runtime of one node: the Raft driver and transport wiring (node.py), the broker
(broker.py, replica_manager.py), controller RPCs, native data requests, metrics and status.
It drives the sans-IO cores through harness.drive; it never imports harness.sim."""
