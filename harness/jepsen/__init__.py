"""Jepsen-style runs on real processes: workloads (kv, queue), the nemesis (with its staged faults), the history recorder
and the runner that writes histories, reports and run-summary rows. The checkers that judge the
histories are in harness.check."""
