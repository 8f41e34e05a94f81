"""kraftlab partition: log storage (for data partitions and the Raft log alike) and the
sans-IO replica state machine (leader/follower, HW/LEO/ISR). May use quorum's metadata types."""
