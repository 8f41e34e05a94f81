"""kraftlab quorum: the KRaft-style metadata quorum. A sans-IO Raft core (quorum.raft), the
metadata records and image, and the controller. Imports nothing from partition/ or harness/."""
