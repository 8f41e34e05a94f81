"""The simulator's faults: network partitions, kills, pauses, power loss of unsynced data."""
