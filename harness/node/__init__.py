"""The real (asyncio) node runtime: config, quorum-state file, the Raft driver, metrics, and the
process entry point `python -m harness.node --config FILE`. On brokers also the data plane: the
replica manager (replica_manager.py, the ReplicaCore driver; replica_effects.py executes the
cores' effects) and the native data protocol server (data_requests.py)."""
