"""The real (asyncio) node runtime: config, quorum-state file, the Raft driver, metrics, and the
process entry point `python -m harness.node --config FILE`."""
