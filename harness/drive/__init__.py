"""I/O-free glue that both drivers (the asyncio runtime and the simulator) share, so they cannot
drift apart: the Raft effect executor (effects.py), the replica effect executor
(replica_effects.py), the Raft log store on the data log (raftlog.py), the broker session with the
active controller (broker_session.py), the controller RPC envelopes (controller_rpc.py), the
active controller's seat (active_controller.py) and a raft partition's stages, round passes,
effect environment and recovery flush (raft_stages.py)."""
