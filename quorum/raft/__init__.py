"""A KRaft-style Raft core (KIP-595, KIP-996 pre-vote, check-quorum, KIP-630 snapshots), sans-IO."""
