"""Simulated processes composed from the real cores and the I/O-free glue of harness.drive:
RaftNode (a voter or observer) hosting parts (the active controller, a broker's lifecycle, the
metadata publisher), the data-plane Broker (broker session + replica), the abstract controller,
and clients (key/value, producers, consumers). No actor reaches into another: the World
(harness.sim.runs.world) delivers their messages and runs their timers; the process state it
reads on each of them is process.py's SimProcess."""
