"""What a seed runs and reports: the World (kernel + actors + fault target), the quorum and
metadata runs, the data-plane Cluster and its runs (scenario, cluster, KIP-101), many seeds, the
scenario matrix."""
