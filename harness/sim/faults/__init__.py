"""The simulator's faults: one nemesis (nemesis.py) applying shapes from one table (shapes.py) to
any run through the FaultTarget protocol (fault.py): partitions, kills, power loss of unsynced
data, pauses, the metadata quorum down."""
