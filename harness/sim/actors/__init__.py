"""Simulated processes built from the real cores: controllers (Raft + active controller), brokers
(replicas on simulated disks), and clients (producers, consumers, key/value)."""
