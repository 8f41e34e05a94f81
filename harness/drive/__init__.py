"""I/O-free glue that both drivers (the asyncio runtime and the simulator) share, so they cannot
drift apart: the Raft effect executor (effects.py), the replica effect executor
(replica_effects.py), the broker session with the active controller (broker_session.py), the
controller RPC envelopes (controller_rpc.py), the active controller's seat
(active_controller.py), a raft partition's stages, effect environment and recovery flush
(raft_stages.py), and the one raft-partition host (raft_host.py: every raft partition of a
broker, its rounds, grouped fsyncs, phase merging and timers, written against ports the runtime
and the simulator implement). The Raft log store both drivers use is partition/raft/log.py."""
